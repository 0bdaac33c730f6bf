#include "cli/pflash_options.h"

#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "base/logging.h"
#include "cli/default_model.h"
#include "engine/pflash_attention.h"
#include "engine/pflash_lexical.h"

namespace tachyon::cli {

void PflashOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--pflash", mode,
                 "Prompt compression before prefill: off, auto (prompts over --pflash-threshold tokens) or always "
                 "(default off; a request's \"pflash\" field overrides it)");
  cmd.add_option("--pflash-threshold", threshold, "auto compresses prompts of more tokens than this (default 2048)");
  cmd.add_option("--pflash-keep", keep, "Share of the prompt's tokens kept, sink and tail included (default 0.2)");
  cmd.add_option("--pflash-sink", sink, "First tokens always kept (0: the scorer's, lexical 256, attention 64)");
  cmd.add_option("--pflash-tail", tail, "Last tokens always kept (0: the scorer's, lexical 2048, attention 128)");
  cmd.add_option("--pflash-block", block, "Tokens per scored block (0: the scorer's, lexical 128, attention 32)");
  cmd.add_option("--pflash-scorer", scorer,
                 "auto (attention where a draft model exists, else lexical), lexical or attention");
  cmd.add_option("--pflash-scorer-model", scorer_model,
                 "The attention scorer's model (default: --drafter, else MODEL/drafter)");
  cmd.add_option("--pflash-scorer-chunk", scorer_chunk,
                 "The attention scorer reads the prompt in pieces of at most this many tokens (its training "
                 "context; default 512; 0: the whole prompt in one forward)");
  cmd.add_option("--pflash-scorer-layers", scorer_layers,
                 "The attention scorer runs and probes only its first N layers (0: all; which layers find what a "
                 "question asks depends on the scorer model)");
  cmd.add_option("--pflash-scorer-window", scorer_window,
                 fmt::format("While reading the prompt, the attention scorer's rows attend to their last W keys only, "
                             "the question's to all (0: full attention; default {})",
                             engine::AttentionScorerOptions{}.read_window));
  cmd.add_option("--pflash-positions", positions,
                 "original (kept tokens keep the uncompressed prompt's positions) or compacted (default original)");
}

std::unique_ptr<engine::PromptScorer> PflashOptions::apply(const std::string& model_dir, const std::string& drafter_dir,
                                                           const model::Model& model, kernels::Backend& backend,
                                                           engine::EngineConfig& config) const {
  namespace fs = std::filesystem;
  engine::PflashConfig& p = config.pflash;
  p.mode = engine::parse_pflash_mode(mode, "--pflash");
  if (threshold < 0) throw Error("--pflash-threshold must not be negative, got {}", threshold);
  p.threshold = threshold;
  p.keep_ratio = keep;
  p.sink = sink;
  p.tail = tail;
  p.block = block;
  if (positions != "original" && positions != "compacted")
    throw Error("--pflash-positions: '{}' is neither original nor compacted", positions);
  p.positions = positions == "original" ? engine::PflashPositions::Original : engine::PflashPositions::Compacted;
  if (scorer != "auto" && scorer != "lexical" && scorer != "attention")
    throw Error("--pflash-scorer: '{}' is not auto, lexical or attention", scorer);
  engine::LexicalScorer check_lexical;
  engine::resolve_shape(p, check_lexical);  // rejects negative sizes and a keep ratio outside (0, 1]
  const std::string dir = !scorer_model.empty()  ? resolve_model_arg(scorer_model).path
                          : !drafter_dir.empty() ? drafter_dir
                                                 : (fs::path(model_dir) / "drafter").string();
  const bool have_model = fs::exists(fs::path(dir) / "config.json");
  if (scorer == "lexical" || (scorer == "auto" && !have_model) ||
      (p.mode == engine::PflashMode::Off && scorer != "attention")) {
    if (p.mode != engine::PflashMode::Off) log::info("PFlash {}: lexical scorer", mode);
    return nullptr;
  }
  if (!have_model)
    throw Error("--pflash-scorer attention needs a draft model: {} has no config.json (give --pflash-scorer-model)",
                dir);
  std::unique_ptr<model::Model> scorer_model_loaded;
  {
    const kernels::DraftWeights scope(backend);  // it only ranks blocks: draft precision
    scorer_model_loaded = model::load_model(dir, backend);
  }
  if (scorer_model_loaded->config().vocab_size != model.config().vocab_size)
    throw Error("PFlash scorer model {}: vocab_size {} differs from the target's {}", dir,
                scorer_model_loaded->config().vocab_size, model.config().vocab_size);
  auto built = std::make_unique<engine::AttentionScorer>(std::move(scorer_model_loaded),
                                                         engine::AttentionScorerOptions{.chunk = scorer_chunk,
                                                                                        .layers = scorer_layers,
                                                                                        .read_window = scorer_window});
  config.pflash_scorer = built.get();
  log::info("PFlash {}: attention scorer {}", mode, dir);
  return built;
}

}  // namespace tachyon::cli
