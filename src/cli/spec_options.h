// Speculative-decoding options shared by `tachyon run` and `tachyon serve`:
//   --speculative-config '{"method":"ngram|draft|mtp|suffix","num_speculative_tokens":k,"disable_auto_k":false,
//                         "disable_gates":false,"tree_nodes":n}'
//   --no-pld  --no-drafter  --no-mtp  --drafter DIR
// Default: prompt lookup (ngram) with the prompt-time repetition gate; --no-pld falls back to
// the model's drafter/ companion (tokenizer checked), then its MTP heads.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "spec/drafter.h"

namespace tachyon::cli {

struct SpecOptions {
  std::string speculative_config;  // JSON
  std::string drafter_dir;
  bool no_pld = false, no_drafter = false, no_mtp = false;
  // The model alias's drafter (io::AliasDefaults::drafter: ngram | mtp | draft | suffix | none),
  // used when neither --speculative-config's method nor a --no-* flag decides. A method the
  // checkpoint cannot run (mtp without heads, draft without drafter/) falls back to ngram.
  std::string alias_method;

  void add_to(CLI::App& command);
  // Builds the drafter (or none) and fills the engine's speculation fields. Throws
  // tachyon::Error naming a bad option or an incompatible drafter. Logs the choice.
  std::unique_ptr<spec::Drafter> apply(const std::string& model_dir, const model::Model& model,
                                       kernels::Backend& backend, engine::EngineConfig& config) const;
};

}  // namespace tachyon::cli
