// The one data structure every forward pass consumes: a ragged batch of token rows from
// many sequences. Prefill, chunked prefill, decode, speculative verification and many
// requests at once are all just different Batches (DESIGN.md "The step").
//
//   Batch batch;
//   batch.add(seq_a, prompt_ids, /*first_position=*/0, LogitRows::Last);   // prefill
//   batch.add(seq_b, {last_token}, /*first_position=*/57, LogitRows::Last); // decode
//   StepOutput out = model.forward(batch, kv);
//   // out.logits row 0 belongs to seq_a's last row, row 1 to seq_b's.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"

namespace tachyon::model {

enum class LogitRows { None, Last, All };

// What a forward returns for its logit rows: logits, or only the rows' tokens picked where the
// logits are (so only token ids cross the bus), or nothing at all. Built by the named
// constructors; check() rejects the combinations they cannot make.
//
//   batch.outputs = StepOutputs::argmax();                       // greedy: StepOutput::argmax
//   batch.outputs = StepOutputs::sampled(draws, /*read_later=*/true);
//   batch.outputs = StepOutputs::top_two_on_device(levels);      // a drafter's level
struct StepOutputs {
  enum class Tokens {
    Logits,          // StepOutput::logits, on the host
    Argmax,          // StepOutput::argmax: each row's argmax (Backend::argmax)
    Sampled,         // StepOutput::argmax: each row's token drawn with sampling[row] (Backend::sample_tokens)
    TopTwoOnDevice,  // each row's kernels::TopTwo written to `top_two`; nothing returned, nothing waited for
  };
  Tokens tokens = Tokens::Logits;
  // Sampled: one entry per logit row (temperature 0: that row's argmax), drawn where the logits are.
  std::vector<kernels::TokenSampling> sampling;
  kernels::TopTwo* top_two = nullptr;  // TopTwoOnDevice: device [logit rows]
  // Argmax or Sampled: the forward returns once the step is issued, before its tokens are known
  // (StepOutput::tokens_pending; collect_tokens waits for them). The host can then issue the
  // next step, its rows reading these tokens on the device through Batch::device_tokens =
  // StepOutput::device_ids, while the device runs this one (overlapped decode).
  bool read_tokens_later = false;

  static StepOutputs argmax(bool read_later = false) { return {Tokens::Argmax, {}, nullptr, read_later}; }
  static StepOutputs sampled(std::vector<kernels::TokenSampling> draws, bool read_later = false) {
    return {Tokens::Sampled, std::move(draws), nullptr, read_later};
  }
  static StepOutputs top_two_on_device(kernels::TopTwo* out) { return {Tokens::TopTwoOnDevice, {}, out, false}; }

  bool token_ids() const { return tokens == Tokens::Argmax || tokens == Tokens::Sampled; }
  // Throws tachyon::Error when the fields do not fit `tokens` or `num_logit_rows`.
  void check(int64_t num_logit_rows) const;
};

// SpecPrefill-style prompt scoring (engine/pflash): the attention mass that the batch's last
// `query_rows` rows put on every row, summed over every attention layer, query head and query
// row (each row's softmax over the keys it sees sums to 1). The batch must be one sequence's
// rows starting at position 0, so that its keys are the batch's rows.
struct AttentionProbe {
  int32_t query_rows = 0;
  std::vector<float> key_mass;  // [num_rows]: zeroed by the caller, added to by every attention layer
  // [num_rows] or empty: the largest probability any query row and head of any layer gives the
  // row (a head that looks one token up puts nearly all of it there). Zeroed by the caller.
  std::vector<float> key_peak;
  // [query_rows] or empty (all 1): each query row's probabilities are scaled by its weight before
  // they count towards key_peak (not key_mass).
  std::vector<float> query_weights;
  // A cheaper read of the prompt (the probe asks for no logits, so what follows the probed
  // layers is of no use): 0 runs and probes every decoder layer; L > 0 only the first L, and the
  // forward stops after them (the later layers never run, nor the final norm).
  int32_t layers = 0;
  // Layers before this one run but are not probed: a small model's first layers attend by
  // spelling and position, not yet by what the question asks (engine/pflash_attention.h).
  int32_t first_layer = 0;
  int32_t layer = 0;  // set by the forward: the decoder layer running now
  // 0: every row attends as the model says; W > 0: while reading the prompt each row attends to
  // at most its last W keys (a sliding window, on top of the layer's own), which makes the read
  // linear in the prompt's length. The probe's own softmax for its query rows still spans every
  // key the layer lets them see.
  int32_t read_window = 0;
  int32_t layers_run = 0;  // out: the decoder layers the forward ran (tests: the early stop engaged)
};

struct Batch {
  std::vector<int32_t> tokens;       // [num_rows] token ids
  std::vector<int32_t> positions;    // [num_rows] absolute positions (KV slots, causal order)
  // [num_rows] the positions RoPE rotates by, where they differ from `positions`; empty: the
  // same. A PFlash-compressed prompt's kept tokens keep the positions of the uncompressed
  // prompt while their K/V sit in consecutive slots (the order is the same, so the causal
  // limit is too). Set after the rows are added (add() extends it while it is non-empty).
  std::vector<int32_t> rope_positions;
  std::vector<int32_t> row_seq;      // [num_rows] index into `seqs`
  std::vector<kv::SeqId> seqs;       // [num_seqs] the KV sequence of each entry
  std::vector<int32_t> logit_rows;   // rows whose logits are returned, in this order
  std::vector<int32_t> hidden_rows;  // rows whose final hidden state (before the final norm) is returned
  // The hidden rows after the final norm instead (transformers' last_hidden_state: embeddings).
  bool hidden_after_final_norm = false;
  // Which layers' outputs hidden_rows return: empty, the last layer's (as above); else, per row,
  // the residual stream after each named decoder layer, concatenated in this order
  // (StepOutput::hidden_size = size() · hidden). A block drafter's context (spec/dflash.h).
  std::vector<int32_t> hidden_layers;
  // The rows' token ids are read from this device int32 array [num_rows] (a previous forward's
  // StepOutput::device_ids or TopTwo::best) instead of `tokens`, which then hold placeholders:
  // a drafter's chain or overlapped decode steps without a wait for the host.
  const int32_t* device_tokens = nullptr;
  StepOutputs outputs;  // what the step returns for its logit rows
  // Draft trees (speculative tree verification, see kernels/ops.h kMaxTreeDepth): per row the
  // first physical position of its tree (-1 for rows outside trees) and the node index of its
  // ancestor at each depth. Both empty while the batch holds no tree.
  std::vector<int32_t> tree_base;
  std::vector<int32_t> tree_path;  // [num_rows, kernels::kMaxTreeDepth]
  AttentionProbe* attention_probe = nullptr;  // host; null: none
  // `--quantize-decode` (Model::has_decode_weights): [num_rows] 1 for a decode row, which reads
  // the weights' decode copies (kernels::Weight::decode), 0 for a prefill row, which reads the
  // weights as loaded; or empty: every row a prefill row. The engine marks a request's rows from
  // its first generated token's position on (decode, verification and tree rows, and a preempted
  // request's output when recomputed), so a row's bits depend on its kind, never on its
  // batch-mates. Set by mark_decode_rows; add() extends it while it is non-empty.
  std::vector<uint8_t> decode_rows;

  // What RoPE rotates row r by.
  const int32_t* rope_position_data() const { return rope_positions.empty() ? positions.data() : rope_positions.data(); }

  int64_t num_rows() const { return static_cast<int64_t>(tokens.size()); }
  // Every row is a logit row, in row order (decode and verification steps, drafting levels).
  bool logits_on_every_row() const;

  // Appends `ids` of sequence `seq` at positions first_position, first_position + 1, ...
  void add(kv::SeqId seq, std::span<const int32_t> ids, int32_t first_position, LogitRows logits = LogitRows::Last,
           bool want_hidden = false);
  // Appends a draft tree of `seq` with every row's logits: node 0 (the root, the last
  // committed token) at first_position, node i > 0 a child of parents[i] < i. Node i's K/V go to
  // position first_position + i; its logical position is first_position + its depth.
  void add_tree(kv::SeqId seq, std::span<const int32_t> ids, std::span<const int32_t> parents, int32_t first_position,
                bool want_hidden = false);
  // Marks the rows of the sequence added last whose positions are >= first_decode_position as
  // decode rows (decode_rows).
  void mark_decode_rows(int32_t first_decode_position);
  void clear();
};

struct StepOutput {
  std::vector<float> logits;  // [logit_rows.size(), vocab_size] float32, host
  std::vector<float> hidden;  // [hidden_rows.size(), hidden_size] float32, host
  // [logit_rows.size()] the rows' tokens when Batch::outputs asks for token ids (Argmax, Sampled;
  // then `logits` is empty).
  std::vector<int32_t> argmax;
  // StepOutputs::read_tokens_later: `argmax` is filled by collect_tokens. device_ids holds the same
  // tokens on the device until the next forward of the model writes its own (after its rows
  // have read these, when it takes them as device_tokens).
  bool tokens_pending = false;
  kernels::Backend::HostRead pending_read;
  const int32_t* device_ids = nullptr;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  std::span<const float> logits_row(size_t i) const {
    return {logits.data() + i * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

// Waits for a forward's tokens read later (StepOutputs::read_tokens_later); nothing if none pending.
// Throws, as the forward would have, when a row had no finite logit to draw from.
void collect_tokens(kernels::Backend& backend, StepOutput& out);

}  // namespace tachyon::model
