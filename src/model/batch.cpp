#include "model/batch.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "kernels/ops.h"

namespace tachyon::model {

void Batch::add(kv::SeqId seq, std::span<const int32_t> ids, int32_t first_position, LogitRows logits,
                bool want_hidden) {
  const int32_t seq_index = static_cast<int32_t>(seqs.size());
  seqs.push_back(seq);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t row = static_cast<int32_t>(tokens.size());
    tokens.push_back(ids[i]);
    positions.push_back(first_position + static_cast<int32_t>(i));
    if (!rope_positions.empty()) rope_positions.push_back(positions.back());
    if (!decode_rows.empty()) decode_rows.push_back(0);
    row_seq.push_back(seq_index);
    if (!tree_base.empty()) {
      tree_base.push_back(-1);
      tree_path.resize(tree_path.size() + kernels::kMaxTreeDepth, 0);
    }
    const bool last = i + 1 == ids.size();
    if (logits == LogitRows::All || (logits == LogitRows::Last && last)) logit_rows.push_back(row);
    if (want_hidden) hidden_rows.push_back(row);
  }
}

void Batch::add_tree(kv::SeqId seq, std::span<const int32_t> ids, std::span<const int32_t> parents,
                     int32_t first_position, bool want_hidden) {
  TACHYON_CHECK(!ids.empty() && parents.size() == ids.size(), "a draft tree needs a root and one parent per node");
  if (tree_base.empty()) {  // rows added so far are outside trees
    tree_base.assign(tokens.size(), -1);
    tree_path.assign(tokens.size() * kernels::kMaxTreeDepth, 0);
  }
  const int32_t seq_index = static_cast<int32_t>(seqs.size());
  seqs.push_back(seq);
  const size_t first_row = tokens.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::array<int32_t, kernels::kMaxTreeDepth> path{};
    int32_t depth = 0;
    if (i > 0) {
      const int32_t parent = parents[i];
      TACHYON_CHECK(parent >= 0 && static_cast<size_t>(parent) < i, "draft tree node {} has parent {}", i, parent);
      depth = positions[first_row + static_cast<size_t>(parent)] - first_position + 1;
      TACHYON_CHECK(depth < kernels::kMaxTreeDepth, "draft tree deeper than {}", kernels::kMaxTreeDepth - 1);
      std::copy_n(tree_path.begin() + static_cast<long>((first_row + static_cast<size_t>(parent)) * kernels::kMaxTreeDepth),
                  depth, path.begin());
    }
    path[static_cast<size_t>(depth)] = static_cast<int32_t>(i);
    const int32_t row = static_cast<int32_t>(tokens.size());
    tokens.push_back(ids[i]);
    positions.push_back(first_position + depth);
    if (!rope_positions.empty()) rope_positions.push_back(positions.back());
    if (!decode_rows.empty()) decode_rows.push_back(0);
    row_seq.push_back(seq_index);
    tree_base.push_back(first_position);
    tree_path.insert(tree_path.end(), path.begin(), path.end());
    logit_rows.push_back(row);
    if (want_hidden) hidden_rows.push_back(row);
  }
}

void StepOutputs::check(int64_t num_logit_rows) const {
  if (tokens == Tokens::Sampled && sampling.size() != static_cast<size_t>(num_logit_rows))
    throw Error("Batch::outputs.sampling has {} entries for {} logit rows", sampling.size(), num_logit_rows);
  TACHYON_CHECK(tokens == Tokens::Sampled || sampling.empty(), "Batch::outputs: sampling draws without Sampled");
  TACHYON_CHECK((tokens == Tokens::TopTwoOnDevice) == (top_two != nullptr),
                "Batch::outputs: top_two is set exactly with TopTwoOnDevice");
  TACHYON_CHECK(!read_tokens_later || token_ids(), "Batch::outputs: only token ids can be read later");
}

bool Batch::logits_on_every_row() const {
  if (logit_rows.size() != tokens.size()) return false;
  for (size_t r = 0; r < logit_rows.size(); ++r)
    if (logit_rows[r] != static_cast<int32_t>(r)) return false;
  return true;
}

void Batch::mark_decode_rows(int32_t first_decode_position) {
  if (seqs.empty()) return;
  const int32_t last = static_cast<int32_t>(seqs.size()) - 1;
  for (size_t r = tokens.size(); r-- > 0 && row_seq[r] == last;) {
    if (positions[r] < first_decode_position) continue;
    if (decode_rows.empty()) decode_rows.assign(tokens.size(), 0);
    decode_rows[r] = 1;
  }
}

void Batch::clear() {
  decode_rows.clear();
  tree_base.clear();
  tree_path.clear();
  tokens.clear();
  positions.clear();
  rope_positions.clear();
  row_seq.clear();
  attention_probe = nullptr;
  seqs.clear();
  logit_rows.clear();
  hidden_rows.clear();
  hidden_after_final_norm = false;
  hidden_layers.clear();
  device_tokens = nullptr;
  outputs.tokens = StepOutputs::Tokens::Logits;
  outputs.sampling.clear();
  outputs.top_two = nullptr;
  outputs.read_tokens_later = false;
}

void collect_tokens(kernels::Backend& backend, StepOutput& out) {
  if (!out.tokens_pending) return;
  out.tokens_pending = false;
  if (out.pending_read.id != 0) backend.wait_host_read(out.pending_read);
  for (size_t r = 0; r < out.argmax.size(); ++r)  // a backend's sample_tokens marks a row without a finite logit
    if (out.argmax[r] < 0) throw Error("logit row {} has no finite logit: no token to sample", r);
}

}  // namespace tachyon::model
