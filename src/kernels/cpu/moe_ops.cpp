// CPU MoE, per-head matmul and gating ops. The experts run as a grouped matmul: the rows
// routed to one expert are gathered and pushed through that expert's two matrices together
// (each weight streamed once per step, whatever the number of rows routed to it), all experts'
// panels in one parallel region, then combined per row in ascending expert id.
// Every output element still reduces over k in one sequential chain (cpu/dot.h), so a row's
// bits do not depend on which other rows share its experts.
#include <algorithm>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/isa/matmul.h"
#include "kernels/reference/moe_rowwise.h"

namespace tachyon::kernels {

namespace {
ThreadPool& pool() { return ThreadPool::global(); }
}  // namespace

void CpuBackend::moe_route(const float* logits, int64_t rows, const MoeRoutingParams& p, int32_t* ids,
                           float* weights) {
  TACHYON_CHECK(p.top_k > 0 && p.top_k <= p.num_experts, "moe_route: top_k {} of {} experts", p.top_k, p.num_experts);
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r)
      rowwise::moe_route_row(logits + r * p.num_experts, p, ids + r * p.top_k, weights + r * p.top_k);
  }, 16);
}

void CpuBackend::moe_experts(const float* x, int64_t rows, const int32_t* ids, const float* weights, int64_t top_k,
                             const MoeExperts& e, float* out) {
  std::vector<Weight> of_kind;
  if (e.num_experts > 0 && for_each_row_kind(rows, e.gate_up[0], [&](int64_t first, int64_t n, bool decode) {
        CpuBackend::moe_experts(x + first * e.hidden, n, ids + first * top_k, weights + first * top_k, top_k,
                                experts_of_kind(e, decode, of_kind), out + first * e.hidden);
      }))
    return;
  const int64_t hidden = e.hidden, inter = e.intermediate, slots = rows * top_k;
  // Group the (row, slot) pairs by expert, rows in order.
  std::vector<int32_t>& count = moe_count_;
  count.assign(static_cast<size_t>(e.num_experts + 1), 0);
  for (int64_t s = 0; s < slots; ++s) {
    TACHYON_CHECK(ids[s] >= 0 && ids[s] < e.num_experts, "moe_experts: expert id {} out of range", ids[s]);
    ++count[ids[s] + 1];
  }
  for (int64_t i = 0; i < e.num_experts; ++i) count[i + 1] += count[i];
  std::vector<int32_t>& by_expert = moe_by_expert_;
  std::vector<int32_t>& fill = moe_fill_;
  by_expert.resize(static_cast<size_t>(slots));
  fill.assign(count.begin(), count.end() - 1);
  for (int64_t s = 0; s < slots; ++s) by_expert[fill[ids[s]]++] = static_cast<int32_t>(s);

  moe_x_.resize(static_cast<size_t>(slots * hidden));
  moe_gate_up_.resize(static_cast<size_t>(slots * 2 * inter));
  moe_act_.resize(static_cast<size_t>(slots * inter));
  moe_y_.resize(static_cast<size_t>(slots * hidden));  // [slots, hidden], grouped order
  // Gather every routed row once, in grouped order.
  pool().parallel_for(slots, [&](size_t b, size_t en) {
    for (size_t i = b; i < en; ++i)
      std::copy_n(x + (by_expert[i] / top_k) * hidden, hidden, moe_x_.data() + i * hidden);
  }, 64);
  round_matmul_input(moe_x_.data(), slots * hidden);
  // The grouped matmul: one parallel region over every (expert, 64-row panel) pair, so all
  // threads stream weights even when a decode step routes its one row to a few small experts.
  const auto& isa = cpu::isa_kernels();
  auto grouped_matmul = [&](const Weight* ws, const Weight* biases, const float* in, int64_t in_width, float* outp,
                            int64_t out_width) {
    std::vector<std::pair<int32_t, int32_t>>& items = moe_items_;  // (expert, panel)
    items.clear();
    bool int8_experts = false;
    int64_t int8_block = cpu::kInt8MaxBlock;  // the narrowest experts' block divides every other's group
    for (int64_t ex = 0; ex < e.num_experts; ++ex)
      if (count[ex + 1] > count[ex]) {
        if (ws[ex].layout == WeightLayout::Panel64Dot) {
          int8_experts = true;
          int8_block = std::min(int8_block, cpu::int8_activation_block(ws[ex]));
        }
        for (int64_t p = 0; p * Weight::kPanel < ws[ex].rows; ++p) items.emplace_back(ex, p);
      }
    // Int8-activation experts: every slot's row quantized once (a row's blocks do not depend on
    // the rows beside it).
    const cpu::Int8Rows int8_in = int8_experts ? moe_int8_.quantize(in, slots, in_width, int8_block) : cpu::Int8Rows{};
    const cpu::MatmulInt8Fn int8_kernel = cpu::matmul_int8_kernel();
    pool().parallel_for(items.size(), [&](size_t b, size_t en) {
      for (size_t i = b; i < en; ++i) {
        const auto [ex, panel] = items[i];
        const Weight& w = ws[ex];
        const int64_t begin = count[ex], n = count[ex + 1] - begin;
        const int64_t n0 = panel * Weight::kPanel, n1 = std::min<int64_t>(w.rows, n0 + Weight::kPanel);
        float* o = outp + begin * out_width;
        if (w.layout == WeightLayout::Panel64Dot) {
          cpu::Int8Rows rows_of_expert = int8_in.from(begin);
          rows_of_expert.rows = n;
          int8_kernel(rows_of_expert, w, n0, n1, o, out_width);
        } else {
          const auto range = w.layout == WeightLayout::Panel64 ? isa.matmul_range : cpu::matmul_range_portable;
          range(in + begin * in_width, n, w, n0, n1, o, out_width);
        }
        if (biases && !biases[ex].empty())
          for (int64_t m = 0; m < n; ++m)
            for (int64_t c = n0; c < n1; ++c) o[m * out_width + c] += rowwise::load_weight(biases[ex], c);
      }
    });
  };
  grouped_matmul(e.gate_up, e.gate_up_bias, moe_x_.data(), hidden, moe_gate_up_.data(), 2 * inter);
  pool().parallel_for(slots, [&](size_t b, size_t en) {
    for (size_t i = b; i < en; ++i)
      rowwise::expert_activation_row(moe_gate_up_.data() + i * 2 * inter, e, moe_act_.data() + i * inter);
  }, 16);
  round_matmul_input(moe_act_.data(), slots * inter);
  grouped_matmul(e.down, e.down_bias, moe_act_.data(), inter, moe_y_.data(), hidden);
  std::vector<int32_t>& position = moe_fill_;  // reused: where each slot's output landed
  position.resize(static_cast<size_t>(slots));
  for (int64_t i = 0; i < slots; ++i) position[by_expert[i]] = static_cast<int32_t>(i);
  pool().parallel_for(rows, [&](size_t b, size_t en) {
    thread_local std::vector<int32_t> order;
    order.resize(static_cast<size_t>(top_k));
    for (size_t r = b; r < en; ++r) {
      float* o = out + r * hidden;
      std::fill(o, o + hidden, 0.f);
      rowwise::slots_by_expert(ids + r * top_k, top_k, order.data());
      for (int32_t slot : order) {
        const float w = weights[r * top_k + slot];
        const float* y = moe_y_.data() + static_cast<int64_t>(position[r * top_k + slot]) * hidden;
        for (int64_t i = 0; i < hidden; ++i) o[i] += y[i] * w;
      }
    }
  }, 8);
}

void CpuBackend::head_matmul(const float* x, int64_t rows, int64_t heads, int64_t xrs, int64_t xhs, const Weight& w,
                             float* out, int64_t ors, int64_t ohs) {
  const int64_t n_out = w.rows / heads;
  pool().parallel_for(rows * heads, [&](size_t b, size_t e) {
    for (size_t item = b; item < e; ++item) {
      const int64_t r = static_cast<int64_t>(item) / heads, h = static_cast<int64_t>(item) % heads;
      const float* xh = x + r * xrs + h * xhs;
      for (int64_t n = 0; n < n_out; ++n) {
        float acc = 0.f;
        for (int64_t k = 0; k < w.cols; ++k) acc = std::fma(xh[k], rowwise::load_weight(w, h * n_out + n, k), acc);
        out[r * ors + h * ohs + n] = acc;
      }
    }
  }, 4);
}

void CpuBackend::gate_multiply(float* x, int64_t rows, int64_t dim, const float* gate, int64_t gate_stride,
                               int64_t group, GateFn fn) {
  pool().parallel_for(rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r)
      for (int64_t i = 0; i < dim; ++i) x[r * dim + i] *= rowwise::gate_fn(fn, gate[r * gate_stride + i / group]);
  }, 16);
}

}  // namespace tachyon::kernels
