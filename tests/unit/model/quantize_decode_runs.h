// The demo model loaded in a --quantize / --quantize-decode mode, and one forward whose rows at
// positions >= first_decode_position are decode rows: shared by the CPU and CUDA tests of
// --quantize-decode.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"

namespace tachyon::testing {

inline const std::string kQuantizeDecodeDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

inline std::unique_ptr<model::Model> load_demo(kernels::Backend& backend, kernels::QuantizeMode quantize,
                                               kernels::QuantizeMode decode) {
  model::LoadOptions options;
  options.quantize = quantize;
  options.quantize_decode = decode;
  return model::load_model(kQuantizeDecodeDemo, backend, options);
}

// The logits of every row of one forward over `ids` of `seq` from `position`.
inline std::vector<float> forward_marking_decode_rows(model::Model& m, kv::KvCache& kv, kv::SeqId seq,
                                                      const std::vector<int32_t>& ids, int32_t position,
                                                      int32_t first_decode_position) {
  kv.reserve(seq, position + static_cast<int32_t>(ids.size()));
  model::Batch batch;
  batch.add(seq, ids, position, model::LogitRows::All);
  batch.mark_decode_rows(first_decode_position);
  return m.forward(batch, kv).logits;
}

}  // namespace tachyon::testing
