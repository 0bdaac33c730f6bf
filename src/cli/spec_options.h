// Speculative-decoding options shared by `tachyon run` and `tachyon serve`:
//   --speculative-config '{"method":"ngram|draft|mtp|suffix","num_speculative_tokens":k,"disable_auto_k":false,
//                         "disable_gates":false,"tree_nodes":n}'
//   --no-pld  --no-suffix  --no-drafter  --no-mtp  --no-dflash  --drafter DIR
// Default: every drafter the checkpoint and flags allow, held at once, and per request the one
// with the best measured tokens per second on its kind of text (spec/drafter_choice.h): prompt
// lookup (ngram), the drafter/ companion (or --drafter DIR; tokenizer checked), the
// checkpoint's MTP heads, the DFlash drafter in MODEL/dflash, and with prompt lookup and a model
// drafter the merged drafter over them (spec/merged_drafter.h: one tree of their candidates; MTP
// or else DFlash, not both, as it takes one drafter that reads hidden states). Suffix trees are not in the
// default set: their server-wide trie holds up to ~24 nodes per past output token (1M tokens
// kept), hundreds of MiB to GiB on a long-running server, and the choice never measured them
// best (bench/results/drafter-choice-*.md); `"method":"suffix"` runs them. --no-pld removes the
// drafters that look text up, --no-drafter those loaded from drafter folders (drafter/,
// dflash/), --no-mtp the heads, --no-suffix and --no-dflash one each: so
// `--no-pld --no-drafter --no-mtp` still means no speculation. A method in --speculative-config
// (or the model alias's drafter) pins that one alone.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/mtp_head.h"
#include "spec/drafter.h"

namespace tachyon::cli {

// The drafters a server holds (owned; the engine's config points at them).
using SpecDrafters = std::vector<std::unique_ptr<spec::Drafter>>;

struct SpecOptions {
  std::string speculative_config;  // JSON
  std::string drafter_dir;
  bool no_pld = false, no_suffix = false, no_drafter = false, no_mtp = false, no_dflash = false;
  // The model alias's drafter (io::AliasDefaults::drafter: ngram | mtp | draft | suffix | none),
  // used when neither --speculative-config's method nor a --no-* flag decides. A method the
  // checkpoint cannot run (mtp without heads, draft without drafter/) falls back to ngram.
  std::string alias_method;

  void add_to(CLI::App& command);
  // Builds the drafters (or none) and fills the engine's speculation fields. Throws
  // tachyon::Error naming a bad option or a pinned drafter that cannot run; a drafter of the
  // default set that cannot run (an incompatible drafter/ companion) is left out with a log line.
  SpecDrafters apply(const std::string& model_dir, const model::Model& model, kernels::Backend& backend,
                     engine::EngineConfig& config) const;

 private:
  // No method pinned: every drafter the checkpoint and flags allow.
  SpecDrafters default_set(const std::string& model_dir, const std::string& companion, bool have_companion,
                           std::unique_ptr<model::MtpHead> mtp_head, const model::Model& model,
                           kernels::Backend& backend, engine::EngineConfig& config, bool k_given) const;
};

}  // namespace tachyon::cli
