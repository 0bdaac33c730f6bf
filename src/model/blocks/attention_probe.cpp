#include "model/blocks/attention_probe.h"

#include "base/error.h"
#include "model/blocks/attention.h"

namespace tachyon::model {

void add_attention_mass(kernels::Backend& backend, const float* q, const float* k, int64_t rows,
                        const AttentionOptions& o, AttentionProbe& probe) {
  TACHYON_CHECK(probe.key_peak.empty() || static_cast<int64_t>(probe.key_peak.size()) == rows,
                "attention probe: key_peak has {} entries for {} rows", probe.key_peak.size(), rows);
  TACHYON_CHECK(static_cast<int64_t>(probe.key_mass.size()) == rows, "attention probe: key_mass has {} entries for {} rows",
                probe.key_mass.size(), rows);
  kernels::AttentionProbeParams p;
  p.num_heads = o.num_heads;
  p.num_kv_heads = o.num_kv_heads;
  p.head_dim = o.head_dim;
  p.query_rows = probe.query_rows;
  p.scale = o.scale;
  p.sliding_window = o.sliding_window;
  p.softcap = o.softcap;
  TACHYON_CHECK(probe.query_weights.empty() || static_cast<int32_t>(probe.query_weights.size()) == probe.query_rows,
                "attention probe: {} query weights for {} query rows", probe.query_weights.size(), probe.query_rows);
  p.query_weights = probe.query_weights.empty() ? nullptr : probe.query_weights.data();
  backend.attention_probe(q, k, rows, p, probe.key_mass.data(), probe.key_peak.empty() ? nullptr : probe.key_peak.data());
}

}  // namespace tachyon::model
