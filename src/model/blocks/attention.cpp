#include "model/blocks/attention.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/blocks/attention_probe.h"
#include "model/rope.h"

namespace tachyon::model {

AttentionOptions attention_options(const io::ModelConfig& c, int64_t layer, RopeLayout layout) {
  AttentionOptions o;
  o.hidden = c.hidden_size;
  o.num_heads = c.num_attention_heads;
  o.num_kv_heads = c.num_key_value_heads;
  o.head_dim = c.head_dim;
  o.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  const std::string& type = c.layer_types.at(layer);
  if (type == "sliding_attention") {
    if (!c.sliding_window) throw Error("{}: layer {} is sliding_attention but sliding_window is not set", c.path, layer);
    o.sliding_window = *c.sliding_window;
  } else if (type != "full_attention") {
    throw Error("{}: layer type '{}' is not supported by model_type '{}'", c.path, type, c.model_type);
  }
  o.norm_eps = static_cast<float>(c.rms_norm_eps);
  o.rope_params = c.rope_for(type);
  o.max_position_embeddings = c.max_position_embeddings;
  o.rope = make_rope_table(o.rope_params, o.head_dim, c.max_position_embeddings);
  o.rope.interleaved = layout == RopeLayout::Interleaved;
  return o;
}

void bind_attention(WeightBinder& b, AttentionWeights& w, const std::string& p, const AttentionOptions& o) {
  const int64_t q_dim = o.num_heads * o.head_dim, kv_dim = o.num_kv_heads * o.head_dim;
  if (o.output_gate) {
    const int64_t D = o.head_dim, hidden = o.hidden;
    const std::vector<int64_t> shape = {2 * q_dim, hidden};
    b.bind_remapped(&w.q, p + "q_proj.weight", shape,
                    {q_dim, hidden, [=](int64_t r, int64_t c) { return ((r / D) * 2 * D + r % D) * hidden + c; }});
    b.bind_remapped(&w.gate, p + "q_proj.weight", shape,
                    {q_dim, hidden, [=](int64_t r, int64_t c) { return ((r / D) * 2 * D + D + r % D) * hidden + c; }});
    b.bind(&w.k, p + "k_proj.weight", {kv_dim, o.hidden}, WeightBinder::Use::Matmul);
    b.bind(&w.v, p + "v_proj.weight", {kv_dim, o.hidden}, WeightBinder::Use::Matmul);
    if (o.qkv_bias) {
      b.bind(&w.q_bias, p + "q_proj.bias", {q_dim});
      b.bind(&w.k_bias, p + "k_proj.bias", {kv_dim});
      b.bind(&w.v_bias, p + "v_proj.bias", {kv_dim});
    }
  } else {
    // Every output column is its own dot product in every backend's canonical order, so the
    // fused matmul gives the bits of the three separate ones.
    b.bind_fused(&w.qkv, {p + "q_proj.weight", p + "k_proj.weight", p + "v_proj.weight"},
                 {{q_dim, o.hidden}, {kv_dim, o.hidden}, {kv_dim, o.hidden}}, WeightBinder::Use::Matmul);
    if (o.qkv_bias)
      b.bind_fused(&w.qkv_bias, {p + "q_proj.bias", p + "k_proj.bias", p + "v_proj.bias"},
                   {{q_dim}, {kv_dim}, {kv_dim}});
  }
  b.bind(&w.o, p + "o_proj.weight", {o.hidden, q_dim}, WeightBinder::Use::Matmul);
  if (o.o_bias) b.bind(&w.o_bias, p + "o_proj.bias", {o.hidden});
  if (o.qk_norm) {
    b.bind(&w.q_norm, p + "q_norm.weight", {o.head_dim});
    b.bind(&w.k_norm, p + "k_norm.weight", {o.head_dim});
  }
  if (o.sinks)
    b.bind_remapped(&w.sinks, p + "sinks", {o.num_heads}, {1, o.num_heads, [](int64_t, int64_t c) { return c; }, true});
}

namespace {

void apply_rope(StepContext& ctx, const AttentionOptions& o, float* x, int64_t heads) {
  if (!rope_depends_on_length(o.rope_params)) {
    ctx.backend.rope(x, ctx.rows, heads, o.head_dim, o.rope, ctx.batch.rope_position_data());
    return;
  }
  // Dynamic NTK: the base depends on the sequence's length in this forward (transformers
  // recomputes it from the largest position of the call); done per sequence so a row's
  // result does not depend on its batch-mates.
  const int32_t* positions = ctx.batch.rope_position_data();
  for (size_t s = 0; s + 1 < ctx.seq_row_begin.size(); ++s) {
    const int32_t begin = ctx.seq_row_begin[s], end = ctx.seq_row_begin[s + 1];
    if (begin == end) continue;
    const int32_t max_pos = *std::max_element(positions + begin, positions + end);
    kernels::RopeTable table = make_rope_table(o.rope_params, o.head_dim, o.max_position_embeddings, max_pos + 1);
    table.interleaved = o.rope.interleaved;
    ctx.backend.rope(x + static_cast<int64_t>(begin) * heads * o.head_dim, end - begin, heads, o.head_dim, table,
                     positions + begin);
  }
}

}  // namespace

void attention_forward(StepContext& ctx, Workspace& ws, const AttentionWeights& w, const AttentionOptions& o,
                       const kernels::PagedKv& kv, const kernels::AttentionMeta& meta, const float* x, float* out) {
  auto& be = ctx.backend;
  const int64_t rows = ctx.rows, q_dim = o.num_heads * o.head_dim, kv_dim = o.num_kv_heads * o.head_dim;
  float* q = ws.get(Workspace::kQ, rows * q_dim);         // [rows, H, D] f32
  float* k = ws.get(Workspace::kK, rows * kv_dim);        // [rows, KV, D] f32
  float* v = ws.get(Workspace::kV, rows * kv_dim);        // [rows, KV, D] f32
  float* attn = ws.get(Workspace::kAttn, rows * q_dim);   // [rows, H, D] f32
  const bool qk_norm = !w.q_norm.empty(), fused = !w.qkv.empty();
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  float* qkv = fused ? ws.get(Workspace::kScratch0, rows * qkv_dim) : nullptr;  // [rows, (H + 2·KV)·D] f32
  if (fused) {
    be.matmul(x, rows, w.qkv, &w.qkv_bias, qkv);
  } else {
    be.matmul(x, rows, w.q, &w.q_bias, q);
    be.matmul(x, rows, w.k, &w.k_bias, k);
    be.matmul(x, rows, w.v, &w.v_bias, v);
  }
  kernels::AttentionParams params;
  params.num_heads = o.num_heads;
  params.scale = o.scale;
  params.sliding_window = o.sliding_window;
  // A probe's cheap read (AttentionProbe::read_window): the rows attend over a narrower window.
  if (const AttentionProbe* p = ctx.batch.attention_probe; p && p->read_window > 0 &&
                                                          (o.sliding_window == 0 || p->read_window < o.sliding_window))
    params.sliding_window = p->read_window;
  params.softcap = o.softcap;
  params.sinks = w.sinks.empty() ? nullptr : static_cast<const float*>(w.sinks.data);
  // A probe reads the rotated q and k, which only the unfused steps leave in q and k.
  const bool probe = ctx.batch.attention_probe != nullptr;
  if (fused && !probe && !rope_depends_on_length(o.rope_params)) {  // one op (see Backend)
    kernels::QkvPrologue prologue;
    prologue.num_heads = o.num_heads;
    prologue.q_norm = qk_norm ? &w.q_norm : nullptr;
    prologue.k_norm = qk_norm ? &w.k_norm : nullptr;
    prologue.eps = o.norm_eps;
    prologue.weight_offset = o.norm_weight_offset;
    prologue.rope = &o.rope;
    prologue.positions = ctx.batch.rope_position_data();
    be.attention_from_qkv(qkv, rows, prologue, kv, meta, params, q, k, v, attn);
  } else {
    if (fused) {
      be.copy_strided(qkv, qkv_dim, rows, q_dim, q, q_dim);
      be.copy_strided(qkv + q_dim, qkv_dim, rows, kv_dim, k, kv_dim);
      be.copy_strided(qkv + q_dim + kv_dim, qkv_dim, rows, kv_dim, v, kv_dim);
    }
    if (qk_norm) {
      be.rms_norm(q, w.q_norm, rows * o.num_heads, o.head_dim, o.norm_eps, o.norm_weight_offset, q);
      be.rms_norm(k, w.k_norm, rows * o.num_kv_heads, o.head_dim, o.norm_eps, o.norm_weight_offset, k);
    }
    apply_rope(ctx, o, q, o.num_heads);
    apply_rope(ctx, o, k, o.num_kv_heads);
    be.write_kv(k, v, rows, kv, meta);
    be.attention(q, rows, kv, meta, params, attn);
    if (probe && ctx.batch.attention_probe->layer >= ctx.batch.attention_probe->first_layer)
      add_attention_mass(be, q, k, rows, o, *ctx.batch.attention_probe);
  }
  if (!w.gate.empty()) {
    float* gate = ws.get(Workspace::kScratch5, rows * q_dim);  // [rows, H·D] f32
    be.matmul(x, rows, w.gate, nullptr, gate);
    be.gate_multiply(attn, rows, q_dim, gate, q_dim, 1, kernels::GateFn::Sigmoid);
  }
  be.matmul(attn, rows, w.o, &w.o_bias, out);
}

}  // namespace tachyon::model
