#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/cpu/quant_pack.h"
#include "kernels/quantize.h"
#include "kernels/reference/rowwise.h"

namespace tachyon::kernels {

namespace {
ThreadPool& pool() { return ThreadPool::global(); }

}  // namespace

std::string CpuBackend::name() const { return std::string("cpu/") + cpu::isa_kernels().name; }

void CpuBackend::embedding(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  if (for_each_row_kind(rows, table, [&](int64_t first, int64_t n, bool decode) {
        CpuBackend::embedding(table.of_kind(decode), ids + first, n, scale, out + first * table.cols);
      }))
    return;
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) rowwise::embedding_row(table, ids[r], scale, out + r * table.cols);
  }, 16);
}

void CpuBackend::top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) {
  const auto& isa = cpu::isa_kernels();
  for (int64_t r = 0; r < rows; ++r) out[r] = isa.top_two_row(x + r * n, n);
}

Weight CpuBackend::upload_weight(const Weight& host) {
  if (int8_activations() && !loading_draft_weights() && cpu::int8_dot_eligible(host)) return upload_int8_dot(host);
  return upload_packed(host);
}

namespace {
// The bf16 bits of an F32 row-major matrix whose every value is a bf16 value (low 16 bits zero),
// else nothing: an F32 file converted up from a bf16 checkpoint, as most F32 GGUFs are.
std::optional<std::vector<uint16_t>> bf16_exact_bits(const Weight& host) {
  const auto* bits = static_cast<const uint32_t*>(host.data);
  const size_t n = static_cast<size_t>(host.rows * host.cols);
  uint32_t low = 0;
  for (size_t i = 0; i < n; ++i) low |= bits[i] & 0xffffu;
  if (low != 0) return std::nullopt;
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(bits[i] >> 16);
  return out;
}
}  // namespace

Weight CpuBackend::upload_packed(const Weight& host) {
  if (host.quantized()) return upload_quantized(host);
  if (host.rows <= 1) return ReferenceBackend::upload_weight(host);  // vectors stay as they are
  // Stored as bf16 where that is lossless: the matmul chain reads each weight as its f32 value
  // (cpu/dot.h), so the bits of every output are unchanged and decode streams half the bytes.
  if (host.dtype == DType::F32 && host.layout == WeightLayout::RowMajor && !host.scales)
    if (const auto narrowed = bf16_exact_bits(host)) {
      narrowed_f32_.tensors += 1;
      narrowed_f32_.bytes_saved += static_cast<int64_t>(narrowed->size() * sizeof(uint16_t));
      Weight as_bf16 = host;
      as_bf16.data = narrowed->data();
      as_bf16.dtype = DType::BF16;
      return upload_packed(as_bf16);
    }
  const size_t bytes = static_cast<size_t>(cpu::panel64_padded_rows(host.rows) * host.cols) * dtype_size(host.dtype);
  void* packed = allocate(bytes);
  cpu::pack_panel64(host, packed);
  owned_.push_back(packed);
  Weight w = host;
  w.data = packed;
  w.layout = WeightLayout::Panel64;
  // An I8 weight's row scales (kernels/quantize.h quantize_int8): the host copy is transient.
  if (host.scales) w.scales = static_cast<const float*>(own_copy(host.scales, static_cast<size_t>(host.rows) * sizeof(float)));
  return w;
}

Weight CpuBackend::upload_quantized(const Weight& host) {
  TACHYON_CHECK(host.layout == WeightLayout::RowMajor, "weights arrive row-major");
  check_quantized_weight(host);
  const cpu::QuantPanelBytes bytes = cpu::quant_panel64_bytes(host);
  void* codes = allocate(bytes.codes);
  owned_.push_back(codes);
  void* scales = allocate(bytes.scales);
  owned_.push_back(scales);
  void* biases = nullptr;
  if (bytes.biases) {
    biases = allocate(bytes.biases);
    owned_.push_back(biases);
  }
  return cpu::pack_quant_panel64(host, codes, scales, biases);
}

Weight CpuBackend::upload_int8_dot(const Weight& host) {
  if (host.quantized()) check_quantized_weight(host);
  const cpu::PanelDotPlan plan = cpu::plan_panel64_dot(host);
  const cpu::QuantPanelBytes& bytes = plan.bytes;
  void* buffers[3] = {nullptr, nullptr, nullptr};
  const size_t sizes[3] = {bytes.codes, bytes.scales, bytes.biases};
  for (int i = 0; i < 3; ++i)
    if (sizes[i]) {
      buffers[i] = allocate(sizes[i]);
      owned_.push_back(buffers[i]);
    }
  ++int8_dot_weights_;
  return cpu::pack_planned_panel64_dot(plan, host, buffers[0], buffers[1], buffers[2]);
}

Weight CpuBackend::upload_draft_weight(const Weight& host) {
  const bool floats = host.dtype == DType::F32 || host.dtype == DType::BF16 || host.dtype == DType::F16;
  if (host.rows <= 1 || !floats || host.layout != WeightLayout::RowMajor) return upload_weight(host);
  std::vector<int8_t> q(static_cast<size_t>(host.rows * host.cols));
  std::vector<float> row_scales(static_cast<size_t>(host.rows));
  // A matrix with a non-finite weight has no int8 scale: it stays as stored.
  if (!cpu::quantize_rows_i8(host, q.data(), row_scales.data())) return upload_weight(host);
  auto* scales = static_cast<float*>(allocate(row_scales.size() * sizeof(float)));
  owned_.push_back(scales);
  std::copy(row_scales.begin(), row_scales.end(), scales);
  Weight i8{q.data(), DType::I8, host.rows, host.cols};
  i8.scales = scales;
  // On int8 activations where the rows are whole blocks (cpu/isa/matmul_int8.h): a drafter's
  // precision changes only which drafts are proposed, and its multi-row forwards (a DFlash
  // block, 8 rows) cost about a third less than on the f32 FMA chain.
  if (cpu::int8_dot_eligible(i8)) return upload_int8_dot(i8);
  Weight w = upload_weight(Weight{q.data(), DType::I8, host.rows, host.cols});
  w.scales = scales;
  return w;
}

void CpuBackend::matmul(const float* x, int64_t rows, const Weight& w, const Weight* bias, float* out) {
  // Rows are independent here, so each kind's run gives the bits it gives alone.
  if (for_each_row_kind(rows, w, [&](int64_t first, int64_t n, bool decode) {
        CpuBackend::matmul(x + first * w.cols, n, w.of_kind(decode), bias, out + first * w.rows);
      }))
    return;
  if (w.layout == WeightLayout::Panel64Dot) {
    // The rows are quantized split over the pool (on the caller alone, a fifth of the matmul's
    // wall time at prefill): each block on its own, so the same bits.
    const cpu::Int8Rows a = int8_x_.prepare(rows, w.cols, cpu::int8_activation_block(w));
    pool().parallel_for(rows, [&](size_t b, size_t e) {
      int8_x_.quantize_rows(x, a, static_cast<int64_t>(b), static_cast<int64_t>(e - b));
    }, 16);
    return matmul_int8(a, w, bias, out);
  }
  const auto& isa = cpu::isa_kernels();
  const auto matmul_range = w.layout == WeightLayout::Panel64 ? isa.matmul_range : cpu::matmul_range_portable;
  // Threads split the output features in whole panels; a small matmul stays on one thread,
  // where a fork-join would cost more than it saves.
  const int64_t panels = (w.rows + Weight::kPanel - 1) / Weight::kPanel;
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, w.cols * rows * Weight::kPanel)));
  pool().parallel_for(panels, [&](size_t b, size_t e) {
    const int64_t n0 = static_cast<int64_t>(b) * Weight::kPanel, n1 = std::min<int64_t>(w.rows, static_cast<int64_t>(e) * Weight::kPanel);
    matmul_range(x, rows, w, n0, n1, out, w.rows);
    if (bias && !bias->empty())
      for (int64_t m = 0; m < rows; ++m)
        for (int64_t n = n0; n < n1; ++n) out[m * w.rows + n] += rowwise::load_weight(*bias, n);
  }, grain);
}

void CpuBackend::matmul_int8(const cpu::Int8Rows& a, const Weight& w, const Weight* bias, float* out) {
  const cpu::MatmulInt8Fn kernel = cpu::matmul_int8_kernel();
  const int64_t panels = (w.rows + Weight::kPanel - 1) / Weight::kPanel;
  const size_t grain = static_cast<size_t>(std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, w.cols * a.rows * Weight::kPanel)));
  pool().parallel_for(panels, [&](size_t b, size_t e) {
    const int64_t n0 = static_cast<int64_t>(b) * Weight::kPanel, n1 = std::min<int64_t>(w.rows, static_cast<int64_t>(e) * Weight::kPanel);
    kernel(a, w, n0, n1, out, w.rows);
    if (bias && !bias->empty())
      for (int64_t m = 0; m < a.rows; ++m)
        for (int64_t n = n0; n < n1; ++n) out[m * w.rows + n] += rowwise::load_weight(*bias, n);
  }, grain);
}

void CpuBackend::rope(float* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeTable& table,
                      const int32_t* positions) {
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) rowwise::rope_row(x + r * heads * head_dim, heads, head_dim, table, positions[r]);
  }, 8);
}

void CpuBackend::attention(const float* q, int64_t rows, const PagedKv& kv, const AttentionMeta& meta,
                           const AttentionParams& p, float* out) {
  const auto& isa = cpu::isa_kernels();
  const int64_t d = kv.head_dim, group = p.num_heads / kv.num_kv_heads;
  // One work item per (row, KV head): the group's query heads share each key/value read. Items
  // run KV-head-major, so a thread's consecutive rows reread one head's keys and values from its
  // own cache (a 512-token prompt's K and V of one head is 512 KiB; of all heads, 4 MiB).
  // The threads split units, not items: a unit is a run of one sequence's consecutive rows under
  // one KV head, at most kBatch of them, which the kernel attends in one shared pass (each key
  // read once for all the run's rows: a 5-row verify step's attention 0.68x of the rows one at a
  // time, verify_kernels_bench). Split item by item, such a step's 10 items went to 8 chunks of 1-2
  // and were attended one row at a time. Each row's bits are the same either way.
  constexpr size_t kBatch = 16;
  std::vector<std::pair<int64_t, int64_t>>& runs = attention_runs_;
  runs.clear();
  for (int64_t r = 0; r < rows;) {
    int64_t e = r + 1;
    while (e < rows && e - r < static_cast<int64_t>(kBatch) && meta.row_seq[e] == meta.row_seq[r]) ++e;
    runs.emplace_back(r, e);
    r = e;
  }
  const auto num_runs = static_cast<int64_t>(runs.size());
  pool().parallel_for(static_cast<size_t>(num_runs * kv.num_kv_heads), [&](size_t b, size_t e) {
    cpu::AttentionItem batch[kBatch];
    size_t count = 0;
    for (size_t unit = b; unit < e; ++unit) {
      const int64_t kvh = static_cast<int64_t>(unit) / num_runs;
      const auto [r0, r1] = runs[unit % static_cast<size_t>(num_runs)];
      if (count + static_cast<size_t>(r1 - r0) > kBatch) {  // a run is never split between two calls
        isa.attend(batch, count);
        count = 0;
      }
      for (int64_t r = r0; r < r1; ++r) {
        const int32_t pos = meta.positions[r];
        const int32_t lo =
            p.sliding_window > 0 ? std::max<int32_t>(0, pos - static_cast<int32_t>(p.sliding_window) + 1) : 0;
        const int64_t h0 = kvh * group;
        batch[count++] = cpu::AttentionItem{q + (r * p.num_heads + h0) * d, &kv,
                                            meta.block_tables + meta.block_table_offsets[meta.row_seq[r]],
                                            kvh, group, lo, pos, p.scale, p.softcap, p.sinks ? p.sinks + h0 : nullptr,
                                            out + (r * p.num_heads + h0) * d,
                                            meta.tree_base ? meta.tree_base[r] : -1,
                                            meta.tree_base ? meta.tree_path + r * kMaxTreeDepth : nullptr};
      }
    }
    if (count > 0) isa.attend(batch, count);
  });
}

}  // namespace tachyon::kernels
