// PFlash: long-prompt compression before prefill. A scorer ranks the middle of a long prompt
// in fixed-size blocks; the first `sink` and last `tail` tokens are always kept, and the best
// middle blocks fill the rest of a budget of keep_ratio × the prompt. Dropped tokens get no KV
// at all. Kept tokens keep their positions in the uncompressed prompt (RoPE, Batch::
// rope_positions) or are renumbered consecutively (compacted positions).
//
//   PflashConfig config{.mode = PflashMode::Always, .keep_ratio = 0.2};
//   LexicalScorer scorer;
//   PflashPlan plan = plan_compression(prompt, config, scorer);
//   if (plan.compressed()) run(plan.kept);   // indices into prompt, ascending
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tachyon::engine {

enum class PflashMode { Off, Auto, Always };  // Auto: prompts longer than PflashConfig::threshold
enum class PflashPositions { Original, Compacted };
const char* pflash_mode_name(PflashMode mode);  // "off" | "auto" | "always"
// Parses "off" | "auto" | "always"; throws tachyon::Error naming `what` and the choices.
PflashMode parse_pflash_mode(const std::string& text, const std::string& what);

// The shape a scorer works with: sink, tail and middle blocks of a prompt.
struct PflashShape {
  int32_t sink = 0, tail = 0, block = 0;
};

struct PflashConfig {
  PflashMode mode = PflashMode::Off;
  int32_t threshold = 2048;  // Auto compresses prompts of more tokens than this
  double keep_ratio = 0.2;   // share of the prompt's tokens kept (sink and tail included)
  // 0: the scorer's own (PromptScorer::default_shape).
  int32_t sink = 0, tail = 0, block = 0;
  PflashPositions positions = PflashPositions::Original;
};

// Ranks the middle blocks of a prompt: one score per block, higher is kept first.
class PromptScorer {
 public:
  virtual ~PromptScorer() = default;
  virtual std::string name() const = 0;
  virtual PflashShape default_shape() const = 0;
  // blocks[i] = [begin, end) token ranges of the middle, in order.
  virtual std::vector<double> score_blocks(std::span<const int32_t> prompt,
                                           std::span<const std::pair<int32_t, int32_t>> blocks) = 0;
  // The device memory of the scorer's largest pass over prompts of up to `max_prompt` tokens,
  // taken and held until the handle goes: the engine holds it while it measures the memory its
  // KV pool may have, so that the pool leaves room for scoring. Null: the scorer takes no device
  // memory (the lexical scorer, a model in host memory).
  virtual std::shared_ptr<void> hold_peak_memory(int32_t /*max_prompt*/) { return nullptr; }
};

struct PflashPlan {
  std::vector<int32_t> kept;  // ascending indices into the prompt; empty: not compressed
  std::string refused;        // why not, when it was tried and refused
  PflashShape shape;          // what was used
  bool compressed() const { return !kept.empty(); }
};

// The shape `config` asks for, the scorer's defaults where it says 0; throws tachyon::Error
// for a negative size or a keep ratio outside (0, 1].
PflashShape resolve_shape(const PflashConfig& config, const PromptScorer& scorer);

// Compresses `prompt` now (the mode is the caller's business): refused (kept empty, `refused`
// says why) when the budget leaves no room for a middle block after the sink and the tail, or
// when nothing would be dropped.
PflashPlan plan_compression(std::span<const int32_t> prompt, const PflashConfig& config, PromptScorer& scorer);

}  // namespace tachyon::engine
