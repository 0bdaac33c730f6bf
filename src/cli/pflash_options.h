// PFlash prompt-compression options of `tachyon serve` (engine/pflash.h, docs/server.md):
//   --pflash off|auto|always   --pflash-threshold N   --pflash-keep R
//   --pflash-sink N  --pflash-tail N  --pflash-block N   (0: the scorer's own)
//   --pflash-scorer auto|lexical|attention   --pflash-scorer-model DIR   --pflash-scorer-chunk N
//   --pflash-scorer-layers L   --pflash-scorer-window W   (the attention scorer's cheap read)
//   --pflash-positions original|compacted
// The attention scorer (the default where a draft model exists: --pflash-scorer-model, else
// --drafter, else MODEL/drafter) loads its own copy of that model.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/pflash.h"
#include "engine/pflash_attention.h"

namespace tachyon::cli {

struct PflashOptions {
  std::string mode = "off", scorer = "auto", scorer_model, positions = "original";
  int32_t threshold = 2048, sink = 0, tail = 0, block = 0, scorer_chunk = 512;
  int32_t scorer_layers = engine::AttentionScorerOptions{}.layers,
          scorer_window = engine::AttentionScorerOptions{}.read_window;
  double keep = 0.2;

  void add_to(CLI::App& command);
  // Fills config.pflash and config.pflash_scorer; returns the scorer it built (the caller keeps
  // it alive as long as the engine), null for the engine's lexical one. `drafter_dir`: the
  // --drafter argument, resolved (empty: none given). Throws tachyon::Error naming a bad option
  // or a scorer model whose vocabulary differs from the target's.
  std::unique_ptr<engine::PromptScorer> apply(const std::string& model_dir, const std::string& drafter_dir,
                                              const model::Model& model, kernels::Backend& backend,
                                              engine::EngineConfig& config) const;
};

}  // namespace tachyon::cli
