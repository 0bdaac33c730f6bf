#include "model/batch.h"

namespace tachyon::model {

void Batch::add(kv::SeqId seq, std::span<const int32_t> ids, int32_t first_position, LogitRows logits,
                bool want_hidden) {
  const int32_t seq_index = static_cast<int32_t>(seqs.size());
  seqs.push_back(seq);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t row = static_cast<int32_t>(tokens.size());
    tokens.push_back(ids[i]);
    positions.push_back(first_position + static_cast<int32_t>(i));
    row_seq.push_back(seq_index);
    const bool last = i + 1 == ids.size();
    if (logits == LogitRows::All || (logits == LogitRows::Last && last)) logit_rows.push_back(row);
    if (want_hidden) hidden_rows.push_back(row);
  }
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  row_seq.clear();
  seqs.clear();
  logit_rows.clear();
  hidden_rows.clear();
}

}  // namespace tachyon::model
