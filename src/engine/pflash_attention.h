// PFlash's attention scorer (SpecPrefill, arXiv 2502.02789): a small model with the target's
// tokenizer (the draft model) reads the prompt once, and the blocks of its middle are ranked by
// the attention that the prompt's last `query_window` tokens (the question) put on them
// (model::AttentionProbe). A token scores by the largest probability any query row and head of
// any layer gives it (the heads that look a fact up put nearly all of theirs on it; summed mass
// is dominated by position), each row's weighted by its place in the window (rising linearly to
// 1 at the last token: the request is at the end, the window's first rows are often context that
// attends to text like its own), then by the rarity of the pair it ends and by the share of the
// pair's copies its piece read (score_blocks says why). A block scores by the mean of
// its kTopTokens best tokens, or, if better, of what its tokens carry from the block-length span
// before the block, fading with the distance (what a fact says follows what names it: the answer
// may lie in the block after the name the question attends to), plus half its better
// neighbour's score (a sentence that crosses the boundary is wanted whole). Attention follows meaning rather than spelling, so a
// needle that paraphrases the question is found too. Sink 64, tail 128, 32-token blocks by default.
//
// A small model attends sensibly only over the distances it was trained on: with `chunk` > 0
// it reads the middle in pieces of whole blocks, each as [the prompt's first kChunkSink
// tokens (they take the attention-sink mass), the piece, the query window], at most `chunk`
// tokens from position 0, the blocks spread evenly over the pieces (a softmax over fewer keys
// gives each more: a short last piece would outrank the others); every piece is then scored by
// the same question from the same distance. 0: the whole prompt in one forward (a scorer
// trained on long contexts).
#pragma once

#include <memory>

#include "engine/pflash.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tachyon::engine {

// How the scorer reads a prompt (defaults: AttentionScorer's k* constants).
struct AttentionScorerOptions {
  int32_t query_window = 64;  // the prompt's last tokens whose attention ranks the blocks
  int32_t chunk = 512;        // the longest forward (see above); 0: the whole prompt in one
  // The cheap read (model::AttentionProbe): only the scorer's first `layers` decoder layers run
  // and are probed (0: all), and while reading the prompt each row attends to its last
  // `read_window` keys only (0: all), the probe's query rows still to every key. What finds a
  // needle is an induction head: a query row of the question attends to the token after an
  // earlier occurrence of its own; the earlier layers need only the text near each token to set
  // that up, so a window of a few sentences keeps it (the demo drafter: 256 keeps all 168 needle
  // prompts of bench/pflash, as the full read does), and the read costs O(n·W), not O(n²).
  // Layers: the demo drafter's needle signal is all in its last layer (layer 0 alone keeps 19 of
  // 120), so the default runs them all; a deeper scorer may find it earlier (--pflash-scorer-layers).
  int32_t layers = 0, read_window = 256;
  int32_t first_layer = 0;  // the first layer probed (the ones before it run unprobed)
};

class AttentionScorer final : public PromptScorer {
 public:
  static constexpr int32_t kDefaultQueryWindow = 64, kDefaultChunk = 512, kChunkSink = 4, kTopTokens = 4;

  // `scorer` runs on its own KV (sized per prompt); any model with the target's vocabulary.
  // Throws tachyon::Error when the chunk cannot hold the sink, the window and a token, or for a
  // negative layer count or read window.
  explicit AttentionScorer(std::unique_ptr<model::Model> scorer, AttentionScorerOptions options = {});

  std::string name() const override { return "attention"; }
  PflashShape default_shape() const override { return {64, 128, 32}; }
  std::vector<double> score_blocks(std::span<const int32_t> prompt,
                                   std::span<const std::pair<int32_t, int32_t>> blocks) override;
  // On a device backend: a KV cache for the longest forward (the chunk, or the whole prompt
  // when chunk is 0, at most the scorer's positions) and one probed forward of that length.
  std::shared_ptr<void> hold_peak_memory(int32_t max_prompt) override;

  // Per token of the last scored prompt: the probe's summed mass, and the rarity-weighted peak
  // that the blocks are scored by (tests and the bench).
  const std::vector<float>& last_token_mass() const { return mass_; }
  const std::vector<float>& last_token_peak() const { return peak_; }
  const model::Model& model() const { return *model_; }
  const AttentionScorerOptions& options() const { return options_; }
  // The decoder layers the last forward ran (the cheap read's early stop engaged when fewer
  // than the model's).
  int32_t last_layers_run() const { return layers_run_; }

 private:
  // Adds the probe's mass of one forward over `tokens` (from position 0) to mass_[where[i]]
  // for each row i with where[i] >= 0.
  void probe(std::span<const int32_t> tokens, std::span<const int32_t> where);
  // A KV cache holding one forward of n tokens.
  std::unique_ptr<kv::KvCache> cache_for(int32_t n) const;
  // The probed forward over `tokens` from position 0 in `kv` (empty).
  model::AttentionProbe read(std::span<const int32_t> tokens, kv::KvCache& kv);

  std::unique_ptr<model::Model> model_;
  AttentionScorerOptions options_;
  int32_t layers_run_ = 0;
  std::vector<float> mass_, peak_;
};

}  // namespace tachyon::engine
