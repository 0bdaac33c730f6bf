#include "model/blocks/mla.h"

namespace tachyon::model {

void bind_mla(WeightBinder& b, MlaWeights& w, const std::string& p, const MlaOptions& o) {
  const int64_t H = o.num_heads, nope = o.qk_nope_head_dim, rope = o.qk_rope_head_dim, v = o.v_head_dim;
  const int64_t r = o.kv_lora_rank, qk = nope + rope;
  if (o.q_lora_rank > 0) {
    b.bind(&w.q_a, p + "q_a_proj.weight", {o.q_lora_rank, o.hidden});
    b.bind(&w.q_a_norm, p + "q_a_layernorm.weight", {o.q_lora_rank});
    b.bind(&w.q_b, p + "q_b_proj.weight", {H * qk, o.q_lora_rank});
  } else {
    b.bind(&w.q, p + "q_proj.weight", {H * qk, o.hidden});
  }
  b.bind(&w.kv_a, p + "kv_a_proj_with_mqa.weight", {r + rope, o.hidden});
  b.bind(&w.kv_a_norm, p + "kv_a_layernorm.weight", {r});
  const std::vector<int64_t> kv_b_shape = {H * (nope + v), r};
  // uk_t row h·r + c, column i  =  kv_b[h·(nope + v) + i, c]
  b.bind_remapped(&w.uk_t, p + "kv_b_proj.weight", kv_b_shape,
                  {H * r, nope, [=](int64_t row, int64_t i) { return ((row / r) * (nope + v) + i) * r + row % r; }});
  // uv row h·v + j, column c  =  kv_b[h·(nope + v) + nope + j, c]
  b.bind_remapped(&w.uv, p + "kv_b_proj.weight", kv_b_shape,
                  {H * v, r, [=](int64_t row, int64_t c) { return ((row / v) * (nope + v) + nope + row % v) * r + c; }});
  b.bind(&w.o, p + "o_proj.weight", {o.hidden, H * v});
}

void mla_forward(StepContext& ctx, Workspace& ws, const MlaWeights& w, const MlaOptions& o, const kernels::PagedKv& kv,
                 const float* x, float* out) {
  auto& be = ctx.backend;
  const int64_t rows = ctx.rows, H = o.num_heads, nope = o.qk_nope_head_dim, rope = o.qk_rope_head_dim;
  const int64_t r = o.kv_lora_rank, qk = nope + rope, cd = o.cache_dim(), v = o.v_head_dim;
  float* q = ws.get(Workspace::kQ, rows * H * qk);           // [rows, H, nope + rope] f32
  float* q_abs = ws.get(Workspace::kScratch0, rows * H * cd);  // [rows, H, kv_lora + rope] f32
  float* ckv = ws.get(Workspace::kK, rows * cd);              // [rows, kv_lora + rope] f32: the cache row
  float* latent = ws.get(Workspace::kScratch1, rows * r);     // [rows, kv_lora] f32
  float* ctx_latent = ws.get(Workspace::kAttn, rows * H * cd);  // [rows, H, kv_lora + rope] f32
  float* heads_v = ws.get(Workspace::kScratch2, rows * H * v);  // [rows, H, v] f32
  if (o.q_lora_rank > 0) {
    float* qa = ws.get(Workspace::kScratch3, rows * o.q_lora_rank);  // [rows, q_lora] f32
    be.matmul(x, rows, w.q_a, nullptr, qa);
    be.rms_norm(qa, w.q_a_norm, rows, o.q_lora_rank, o.norm_eps, 0.f, qa);
    be.matmul(qa, rows, w.q_b, nullptr, q);
  } else {
    be.matmul(x, rows, w.q, nullptr, q);
  }
  // Key side: the cache row [RMSNorm(c), RoPE(kr)].
  be.matmul(x, rows, w.kv_a, nullptr, ckv);
  be.copy_strided(ckv, cd, rows, r, latent, r);
  be.rms_norm(latent, w.kv_a_norm, rows, r, o.norm_eps, 0.f, latent);
  be.copy_strided(latent, r, rows, r, ckv, cd);
  kernels::RopeTable rope_k = o.rope;
  rope_k.offset = r;
  be.rope(ckv, rows, 1, cd, rope_k, ctx.batch.rope_position_data());
  be.write_kv(ckv, ckv, rows, kv, ctx.meta);
  // Query side: [W_ukᵀ q_nope, RoPE(q_rope)] per head.
  kernels::RopeTable rope_q = o.rope;
  rope_q.offset = nope;
  be.rope(q, rows, H, qk, rope_q, ctx.batch.rope_position_data());
  be.copy_strided(q + nope, qk, rows * H, rope, q_abs + r, cd);
  be.head_matmul(q, rows, H, H * qk, qk, w.uk_t, q_abs, H * cd, cd);
  kernels::AttentionParams params;
  params.num_heads = H;
  params.scale = o.scale;
  be.attention(q_abs, rows, kv, ctx.meta, params, ctx_latent);
  // Value side: o_h = W_uv_h · (Σ p c), reading the first kv_lora columns of each head.
  be.head_matmul(ctx_latent, rows, H, H * cd, cd, w.uv, heads_v, H * v, v);
  be.matmul(heads_v, rows, w.o, nullptr, out);
}

}  // namespace tachyon::model
