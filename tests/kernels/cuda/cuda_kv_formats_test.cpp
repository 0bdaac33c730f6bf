// The CUDA backend over every KV storage format of kernels/kv_format.h: write_kv (and the fused
// prologues) write the bytes the scalar definition (kernels/kv_quant.h, through the reference
// backend) writes, bit for bit; every attention path (query tiles, split-KV decode rows, short
// runs, tree rows, sliding window, softcap, sinks, the decode kernel's own prologue) reads the
// stored format (the wgmma query tiles read f32, bf16 and f16 with the mma.sync kernel's bits)
// and matches the reference over the same cache within the f32 cache's bound
// (tf32 operands: the dequantized values are rounded to the operand format as f32 ones are),
// with a row's bits independent of its batch. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/tf32_chunk_attention.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_wgmma.cuh"
#include "kernels/kv_format.h"
#include "cuda_test_fixture.h"

namespace tachyon::kernels {
namespace {

constexpr KvFormat kFormats[] = {KvFormat::F32, KvFormat::BF16, KvFormat::F16, KvFormat::FP8,
                                 KvFormat::Int8, KvFormat::Int4, KvFormat::Turbo};

double attention_operand_scale() { return cpu::kCudaAttentionOperands == cpu::AttentionOperands::kBf16 ? 8 : 1; }

std::string name(KvFormat f) { return std::string(kv_format_name(f)); }

// One layer's K and V caches of `blocks` blocks in one format: host bytes, and device copies.
struct Cache {
  KvFormat format;
  int32_t bs;
  int64_t heads, d, blocks;
  std::vector<uint8_t> k, v;
  Cache(KvFormat f, int32_t block_size, int64_t kv_heads, int64_t head_dim, int64_t num_blocks)
      : format(f), bs(block_size), heads(kv_heads), d(head_dim), blocks(num_blocks) {
    k.assign(static_cast<size_t>(blocks * layout().k_layout().block_bytes), 0);
    v.assign(static_cast<size_t>(blocks * layout().v_layout().block_bytes), 0);
  }
  PagedKv layout() const { return PagedKv{nullptr, nullptr, bs, heads, d, format}; }
  PagedKv host() { return PagedKv{k.data(), v.data(), bs, heads, d, format}; }
};

// Device bytes freed with this object.
class DeviceBytes {
 public:
  explicit DeviceBytes(Backend& be) : be_(be) {}
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  ~DeviceBytes() {
    for (void* p : buffers_) be_.deallocate(p);
  }
  void* copy(const std::vector<uint8_t>& bytes) {
    buffers_.push_back(be_.allocate(bytes.size()));
    be_.copy_to_device(buffers_.back(), bytes.data(), bytes.size());
    return buffers_.back();
  }
  std::vector<uint8_t> download(const void* p, size_t n) {
    std::vector<uint8_t> out(n);
    be_.copy_to_host(out.data(), p, n);
    return out;
  }

 private:
  Backend& be_;
  std::vector<void*> buffers_;
};

// "" when equal, else where the first difference is.
std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& expect) {
  if (got.size() != expect.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expect[i])
      return "byte " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(expect[i]);
  return "";
}

// Vectors that reach every branch of the encoders: a zero head (scale 0), a constant head
// (max == min, std 0), signed zeros, a large outlier, and random values elsewhere.
std::vector<float> awkward_heads(int64_t rows, int64_t heads, int64_t d, std::mt19937& rng) {
  auto x = random_vec(static_cast<size_t>(rows * heads * d), rng);
  auto head = [&](int64_t r, int64_t h) { return x.data() + (r * heads + h) * d; };
  if (rows > 0) std::fill_n(head(0, 0), d, 0.f);
  if (rows > 1) std::fill_n(head(1, heads - 1), d, 0.375f);
  if (rows > 2) {
    float* y = head(2, 0);
    for (int64_t i = 0; i < d; i += 3) y[i] = (i / 3) % 2 ? 0.f : -0.f;
    y[d / 2] = 300.f;
  }
  return x;
}

// write_kv on the GPU against the reference (the scalar encoders), bytes compared, over two
// sequences with scattered tables; with tree rows (their slots follow their branch).
TEST_F(CudaKernels, KvWriteGivesTheScalarCodesInEveryFormat) {
  for (const KvFormat format : kFormats)
    for (const int64_t d : {40, 64, 128, 256})
      for (const bool tree : {false, true}) {
        if (kv_format_unsupported(format, d)) continue;
        SCOPED_TRACE(name(format) + ", head_dim " + std::to_string(d) + (tree ? ", tree rows" : ""));
        const int64_t kv_heads = 2, rows = 5;
        const int32_t bs = 4;
        Cache expect(format, bs, kv_heads, d, 8), start(format, bs, kv_heads, d, 8);
        std::vector<int32_t> tables = {4, 1, 3, 0, 7, 6}, offsets = {0, 2, 6}, positions = {6, 7, 9, 10, tree ? 10 : 11},
                             row_seq = {0, 0, 1, 1, 1};
        std::vector<int32_t> tree_base = {-1, -1, 9, 9, 9}, tree_path(static_cast<size_t>(rows * kMaxTreeDepth), 0);
        tree_path[3 * kMaxTreeDepth + 1] = 1;
        tree_path[4 * kMaxTreeDepth + 1] = 2;
        AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
        if (tree) meta.tree_base = tree_base.data(), meta.tree_path = tree_path.data();
        const auto k = awkward_heads(rows, kv_heads, d, rng), v = awkward_heads(rows, kv_heads, d, rng);
        ref->write_kv(k.data(), v.data(), rows, expect.host(), meta);
        DeviceBytes bytes(*gpu);
        void* dk = bytes.copy(start.k);
        void* dv = bytes.copy(start.v);
        gpu->write_kv(upload(k), upload(v), rows, PagedKv{dk, dv, bs, kv_heads, d, format}, meta);
        auto got_k = bytes.download(dk, start.k.size()), got_v = bytes.download(dv, start.v.size());
        if (format == KvFormat::F32) {  // the CUDA f32 cache holds operand values (write_kv)
          for (size_t i = 0; i < expect.k.size(); i += 4) {
            float x;
            std::memcpy(&x, expect.k.data() + i, 4);
            x = cpu::round_attention_operand(x);
            std::memcpy(expect.k.data() + i, &x, 4);
            std::memcpy(&x, expect.v.data() + i, 4);
            x = cpu::round_attention_operand(x);
            std::memcpy(expect.v.data() + i, &x, 4);
          }
        }
        EXPECT_EQ(first_difference(got_k, expect.k), "") << "K";
        EXPECT_EQ(first_difference(got_v, expect.v), "") << "V";
        EXPECT_NE(got_k, start.k) << "nothing written";
      }
}

RopeTable test_rope(int64_t rotary) {
  RopeTable t;
  for (int64_t i = 0; i < rotary / 2; ++i) t.inv_freq.push_back(std::pow(10000.f, -2.f * i / rotary));
  t.rotary_dim = rotary;
  t.attention_scaling = 1.1f;
  return t;
}

// The fused prologue kernel (qkv_norm_rope_write_kv) encodes k and v as write_kv does after
// the separate ops on the same GPU: the same cache bytes and q, in every format.
TEST_F(CudaKernels, FusedPrologueWritesTheCodesOfTheSeparateOps) {
  for (const KvFormat format : kFormats)
    for (const int64_t d : {64, 128, 256}) {
      SCOPED_TRACE(name(format) + ", head_dim " + std::to_string(d));
      const int64_t rows = 5, heads = 4, kv_heads = 2;
      const int32_t bs = 4;
      const RopeTable t = test_rope(d);
      std::vector<int32_t> tables = {4, 1, 3, 0, 7, 6}, offsets = {0, 2, 6}, positions = {6, 7, 9, 10, 11},
                           row_seq = {0, 0, 1, 1, 1};
      const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
      const auto qkv = random_vec(static_cast<size_t>(rows * (heads + 2 * kv_heads) * d), rng);
      const auto kn = random_vec(static_cast<size_t>(d), rng);
      const Weight k_norm = gpu->upload_weight(Weight{kn.data(), DType::F32, 1, d});
      const QkvPrologue p{heads, nullptr, &k_norm, 1e-6f, 0.f, &t, positions.data()};
      const Cache empty(format, bs, kv_heads, d, 8);
      std::vector<uint8_t> caches[2][2];
      std::vector<float> qs[2];
      for (int fused = 0; fused < 2; ++fused) {
        DeviceBytes bytes(*gpu);
        void* dk = bytes.copy(empty.k);
        void* dv = bytes.copy(empty.v);
        const PagedKv kv{dk, dv, bs, kv_heads, d, format};
        float* q = poisoned(static_cast<size_t>(rows * heads * d));
        float* k = poisoned(static_cast<size_t>(rows * kv_heads * d));
        float* v = poisoned(static_cast<size_t>(rows * kv_heads * d));
        if (fused) gpu->qkv_norm_rope_write_kv(upload(qkv), rows, p, kv, meta, q, k, v);
        else gpu->Backend::qkv_norm_rope_write_kv(upload(qkv), rows, p, kv, meta, q, k, v);
        caches[fused][0] = bytes.download(dk, empty.k.size());
        caches[fused][1] = bytes.download(dv, empty.v.size());
        qs[fused] = download(q, static_cast<size_t>(rows * heads * d));
      }
      EXPECT_EQ(first_difference(caches[1][0], caches[0][0]), "") << "K";
      EXPECT_EQ(first_difference(caches[1][1], caches[0][1]), "") << "V";
      EXPECT_EQ(0, std::memcmp(qs[0].data(), qs[1].data(), qs[0].size() * sizeof(float))) << "q";
      EXPECT_NE(caches[1][0], empty.k) << "nothing written";
    }
}

// A cache whose every slot holds an encoded random key and value (the reference's encoders),
// the same bytes on the device.
struct FilledCache {
  Cache host;
  DeviceBytes bytes;
  PagedKv device;
  FilledCache(Backend& ref, Backend& gpu, KvFormat format, int32_t bs, int64_t kv_heads, int64_t d, int64_t blocks,
              std::mt19937& rng)
      : host(format, bs, kv_heads, d, blocks), bytes(gpu) {
    const int64_t slots = blocks * bs;
    const auto k = random_vec(static_cast<size_t>(slots * kv_heads * d), rng);
    const auto v = random_vec(k.size(), rng);
    std::vector<int32_t> table(static_cast<size_t>(blocks)), positions(static_cast<size_t>(slots)),
        row_seq(static_cast<size_t>(slots), 0);
    for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(b);
    for (int64_t s = 0; s < slots; ++s) positions[s] = static_cast<int32_t>(s);
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(blocks)};
    const AttentionMeta meta{positions.data(), row_seq.data(), table.data(), offsets.data()};
    ref.write_kv(k.data(), v.data(), slots, host.host(), meta);
    if (format == KvFormat::F32)  // as the CUDA write_kv leaves an f32 cache
      for (std::vector<uint8_t>* t : {&host.k, &host.v})
        for (size_t i = 0; i < t->size(); i += 4) {
          float x;
          std::memcpy(&x, t->data() + i, 4);
          x = cpu::round_attention_operand(x);
          std::memcpy(t->data() + i, &x, 4);
        }
    device = PagedKv{bytes.copy(host.k), bytes.copy(host.v), bs, kv_heads, d, format};
  }
};

// Every attention path over every format against the reference over the same bytes: a 64-row
// prefill (query tiles), a decode row deep in its context (split-KV), a 5-row run (decode rows),
// and a 1-row sequence; full causal, sliding window, softcap, sinks. Then each sequence alone
// gives the bits it had in the batch.
TEST_F(CudaKernels, AttentionReadsEveryKvFormatLikeTheReference) {
  for (const KvFormat format : kFormats)
    for (const int64_t d : {64, 128, 256}) {
      SCOPED_TRACE(name(format) + ", head_dim " + std::to_string(d));
      // Every head_dim fits, on 99 KB with K and V apart (TACHYON_CUDA_ARCH=86, 89).
      ASSERT_TRUE(cuda::attention_fits(static_cast<int>(d), 4));
      const int64_t heads = 8, kv_heads = 2, blocks = 64;
      const int32_t bs = 16;
      FilledCache cache(*ref, *gpu, format, bs, kv_heads, d, blocks, rng);
      // seq 0: 64 rows at 100..163; seq 1: one row at 700; seq 2: 5 rows at 30..34; seq 3: one row at 3.
      const std::vector<std::pair<int, int>> seqs = {{100, 164}, {700, 701}, {30, 35}, {3, 4}};
      std::vector<int32_t> tables, offsets = {0}, positions, row_seq;
      for (size_t s = 0; s < seqs.size(); ++s) {
        for (int b = 0; b <= seqs[s].second / bs; ++b)
          tables.push_back(static_cast<int32_t>((b * 13 + 7 * s + 5) % blocks));
        offsets.push_back(static_cast<int32_t>(tables.size()));
        for (int p = seqs[s].first; p < seqs[s].second; ++p)
          positions.push_back(p), row_seq.push_back(static_cast<int32_t>(s));
      }
      const int64_t rows = std::ssize(positions);
      const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng);
      const float* dq = upload(q);
      const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
      std::vector<float> sinks = {0.5f, -1.f, 2.f, 0.f, 1.f, 1.f, -3.f, 0.25f};
      const float* d_sinks = upload(sinks);
      for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE("variant " + std::to_string(variant));
        AttentionParams p;
        p.num_heads = heads;
        p.scale = 1.f / std::sqrt(float(d));
        if (variant == 1) p.sliding_window = 21;
        if (variant == 2) p.softcap = 3.f;
        if (variant == 3) p.sinks = d_sinks;
        float* out = poisoned(q.size());
        gpu->attention(dq, rows, cache.device, meta, p, out);
        const auto got = download(out, q.size());
        // The wgmma query tiles (f32, bf16, f16 on sm_90) give the mma.sync kernel's bits.
        cuda::set_attention_wgmma(false);
        float* mma_out = poisoned(q.size());
        gpu->attention(dq, rows, cache.device, meta, p, mma_out);
        cuda::set_attention_wgmma(true);
        EXPECT_EQ(0, std::memcmp(download(mma_out, q.size()).data(), got.data(), got.size() * sizeof(float)))
            << "mma.sync query tiles vs the default kernel";
        AttentionParams host_p = p;
        if (variant == 3) host_p.sinks = sinks.data();
        std::vector<float> expect(q.size());
        ref->attention(q.data(), rows, cache.host.host(), meta, host_p, expect.data());
        EXPECT_LT(rel_l2(got, expect), 2e-3 * attention_operand_scale());
        std::printf("kv %s d %lld variant %d: rel_l2 %.3g vs reference\n", name(format).c_str(),
                    static_cast<long long>(d), variant, rel_l2(got, expect));
        // Each sequence alone (row_seq 0, its own table): the bits it had in the batch.
        int64_t first = 0;
        for (size_t s = 0; s < seqs.size(); ++s) {
          const int64_t n = seqs[s].second - seqs[s].first;
          const std::vector<int32_t> t(tables.begin() + offsets[s], tables.begin() + offsets[s + 1]),
              o = {0, offsets[s + 1] - offsets[s]}, zeros(static_cast<size_t>(n), 0);
          const AttentionMeta alone_meta{positions.data() + first, zeros.data(), t.data(), o.data()};
          float* alone_out = poisoned(static_cast<size_t>(n * heads * d));
          gpu->attention(dq + first * heads * d, n, cache.device, alone_meta, p, alone_out);
          const auto alone = download(alone_out, static_cast<size_t>(n * heads * d));
          EXPECT_EQ(0, std::memcmp(alone.data(), got.data() + first * heads * d, alone.size() * sizeof(float)))
              << "sequence " << s << " alone";
          first += n;
        }
        // The 64-row sequence's first 16 rows alone take the decode kernel row by row: the bits
        // the query tiles gave them.
        const std::vector<int32_t> t0(tables.begin() + offsets[0], tables.begin() + offsets[1]),
            o0 = {0, offsets[1] - offsets[0]}, zeros(16, 0);
        const AttentionMeta short_meta{positions.data(), zeros.data(), t0.data(), o0.data()};
        float* short_out = poisoned(static_cast<size_t>(16 * heads * d));
        gpu->attention(dq, 16, cache.device, short_meta, p, short_out);
        const auto short_run = download(short_out, static_cast<size_t>(16 * heads * d));
        EXPECT_EQ(0, std::memcmp(short_run.data(), got.data(), short_run.size() * sizeof(float)))
            << "short run vs query tiles";
      }
    }
}

// The inputs of the K-and-V-apart comparison (head_dim d, 8 query heads over 2 KV heads): a call
// of a 70-row prefill (query tiles) and a decode row at 700, a decode row at 300 alone, and
// attention_from_qkv on decode rows at 350 and 90 (the prologue inside the decode kernel).
struct ApartInputs {
  int64_t d, heads = 8, kv_heads = 2;
  std::vector<int32_t> positions, row_seq, tables, offsets = {0};
  std::vector<int32_t> fused_positions = {350, 90}, fused_row_seq = {0, 1}, fused_tables, fused_offsets = {0};
  std::vector<float> q, qkv, k_norm;
  RopeTable rope;
};
ApartInputs apart_inputs(int64_t d, int64_t blocks, std::mt19937& rng) {
  ApartInputs in;
  in.d = d;
  const int32_t bs = 16;
  const std::vector<std::pair<int, int>> seqs = {{0, 70}, {700, 701}};
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int b = 0; b <= seqs[s].second / bs; ++b) in.tables.push_back(static_cast<int32_t>((b * 13 + 7 * s + 5) % blocks));
    in.offsets.push_back(static_cast<int32_t>(in.tables.size()));
    for (int p = seqs[s].first; p < seqs[s].second; ++p) in.positions.push_back(p), in.row_seq.push_back(static_cast<int32_t>(s));
  }
  for (size_t s = 0; s < in.fused_positions.size(); ++s) {
    for (int b = 0; b <= in.fused_positions[s] / bs; ++b)
      in.fused_tables.push_back(static_cast<int32_t>((b * 11 + 3 * s + 1) % blocks));
    in.fused_offsets.push_back(static_cast<int32_t>(in.fused_tables.size()));
  }
  in.q = random_vec(static_cast<size_t>(std::ssize(in.positions) * in.heads * d), rng);
  in.qkv = random_vec(static_cast<size_t>(2 * (in.heads + 2 * in.kv_heads) * d), rng);
  in.k_norm = random_vec(static_cast<size_t>(d), rng);
  in.rope = test_rope(d);
  return in;
}

// The outputs of the three calls of ApartInputs on `be` over a fresh device copy of `cache`, and
// the K and V caches after them (the fused call writes its rows' keys).
std::vector<std::vector<uint8_t>> run_apart_calls(Backend& be, Cache& cache, const ApartInputs& in) {
  DeviceBytes bytes(be);
  const PagedKv kv{bytes.copy(cache.k), bytes.copy(cache.v), cache.bs, in.kv_heads, in.d, cache.format};
  auto floats = [](const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  auto poisoned = [&](int64_t n) {
    return static_cast<float*>(bytes.copy(floats(std::vector<float>(static_cast<size_t>(n), NAN))));
  };
  AttentionParams params;
  params.num_heads = in.heads;
  params.scale = 1.f / std::sqrt(static_cast<float>(in.d));
  const int64_t rows = std::ssize(in.positions), head_floats = in.heads * in.d;
  const auto* q = static_cast<const float*>(bytes.copy(floats(in.q)));
  std::vector<std::vector<uint8_t>> out;
  float* o = poisoned(rows * head_floats);
  be.attention(q, rows, kv, AttentionMeta{in.positions.data(), in.row_seq.data(), in.tables.data(), in.offsets.data()},
               params, o);
  out.push_back(bytes.download(o, static_cast<size_t>(rows * head_floats) * sizeof(float)));
  const int32_t mid = 300, zero = 0;
  const std::vector<int32_t> mid_offsets = {0, in.offsets[2] - in.offsets[1]};
  float* o_mid = poisoned(head_floats);
  be.attention(q, 1, kv, AttentionMeta{&mid, &zero, in.tables.data() + in.offsets[1], mid_offsets.data()}, params, o_mid);
  out.push_back(bytes.download(o_mid, static_cast<size_t>(head_floats) * sizeof(float)));
  const Weight k_norm = be.upload_weight(Weight{in.k_norm.data(), DType::F32, 1, in.d});
  const QkvPrologue p{in.heads, nullptr, &k_norm, 1e-6f, 0.f, &in.rope, in.fused_positions.data()};
  const int64_t kv_floats = 2 * in.kv_heads * in.d;
  float* o_fused = poisoned(2 * head_floats);
  be.attention_from_qkv(static_cast<const float*>(bytes.copy(floats(in.qkv))), 2, p, kv,
                        AttentionMeta{in.fused_positions.data(), in.fused_row_seq.data(), in.fused_tables.data(),
                                      in.fused_offsets.data()},
                        params, poisoned(2 * head_floats), poisoned(kv_floats), poisoned(kv_floats), o_fused);
  out.push_back(bytes.download(o_fused, static_cast<size_t>(2 * head_floats) * sizeof(float)));
  out.push_back(bytes.download(kv.k, cache.k.size()));
  out.push_back(bytes.download(kv.v, cache.v.size()));
  be.synchronize();
  return out;
}

// K and V staged apart (attention.cuh: one chunk buffer, K for the scores, then V; what 99 KB of
// shared memory per block (sm_86, sm_89) takes at head_dim 256) give the bits of K and V staged
// together, in the query tiles and the decode kernel (with and without its prologue, whose new
// key's V row waits apart), over f32 and coded caches: forced on this GPU by
// force_attention_kv_apart, and chosen by itself under an sm_89's shared memory (CudaOptions::arch
// 89). The default takes it only where K and V do not fit together; the launch counts say which ran.
TEST_F(CudaKernels, KvApartStagingGivesTheBitsOfKAndVTogether) {
  struct Restore {  // process-wide switches: the tests after this one run the defaults
    ~Restore() {
      cuda::force_attention_kv_apart(false);
      cuda::force_device_arch(0);
    }
  } restore;
  const bool arch_from_environment = CudaOptions::from_environment().arch != 0;
  const int64_t blocks = 64;
  for (const KvFormat format : {KvFormat::F32, KvFormat::BF16, KvFormat::Int8})
    for (const int64_t d : {40, 256}) {
      if (kv_format_unsupported(format, d)) continue;
      SCOPED_TRACE(name(format) + ", head_dim " + std::to_string(d));
      FilledCache cache(*ref, *gpu, format, 16, 2, d, blocks, rng);
      const ApartInputs in = apart_inputs(d, blocks, rng);
      // Only head_dim 256 on 99 KB (sm_86, sm_89): 163 KB (sm_80) and 227 KB hold K and V together.
      const bool needs_apart = d == 256 && cuda::device_arch().smem_per_block < 128 * 1024;
      cuda::KvApartLaunches before = cuda::attention_kv_apart_launches();
      const auto expect = run_apart_calls(*gpu, cache.host, in);
      cuda::KvApartLaunches after = cuda::attention_kv_apart_launches();
      EXPECT_EQ(after.query_tiles > before.query_tiles, needs_apart) << "query tiles, the default variant";
      EXPECT_EQ(after.decode > before.decode, needs_apart) << "decode, the default variant";
      auto expect_same = [&](const std::vector<std::vector<uint8_t>>& got) {
        const char* names[] = {"prefill and decode rows", "decode row alone", "fused prologue and decode", "K cache",
                               "V cache"};
        ASSERT_EQ(got.size(), expect.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(first_difference(got[i], expect[i]), "") << names[i];
      };
      // Forced: one query-tile launch, three decode launches (the row at 700, at 300, the fused rows).
      cuda::force_attention_kv_apart(true);
      before = cuda::attention_kv_apart_launches();
      const auto apart = run_apart_calls(*gpu, cache.host, in);
      after = cuda::attention_kv_apart_launches();
      cuda::force_attention_kv_apart(false);
      EXPECT_EQ(after.query_tiles, before.query_tiles + 1) << "forced: the query tiles did not take K and V apart";
      EXPECT_EQ(after.decode, before.decode + 3) << "forced: the decode launches did not take K and V apart";
      expect_same(apart);
      // An sm_89's 99 KB, emulated on this GPU (as TACHYON_CUDA_ARCH=89 does): head_dim 256 takes K
      // and V apart by itself, with the bits this GPU's own variant gave.
      if (arch_from_environment || needs_apart || d != 256) continue;
      auto ada = cuda_backend_with([](CudaOptions& o) { o.arch = 89; });
      before = cuda::attention_kv_apart_launches();
      const auto at_99kb = run_apart_calls(*ada, cache.host, in);
      after = cuda::attention_kv_apart_launches();
      ada.reset();
      cuda::force_device_arch(0);
      EXPECT_EQ(after.query_tiles, before.query_tiles + 1) << "99 KB: the query tiles did not take K and V apart";
      EXPECT_EQ(after.decode, before.decode + 3) << "99 KB: the decode launches did not take K and V apart";
      expect_same(at_99kb);
    }
}

// Tree rows (speculative verification) over every format: a tree of 5 nodes after 40 committed
// tokens (rows at logical 40, 41, 41, 42, 42; branches 0-1-3 and 0-2-4), against the reference.
TEST_F(CudaKernels, TreeRowsReadEveryKvFormatLikeTheReference) {
  for (const KvFormat format : kFormats) {
    SCOPED_TRACE(name(format));
    const int64_t heads = 8, kv_heads = 2, d = 128, blocks = 8, rows = 5;
    const int32_t bs = 16;
    FilledCache cache(*ref, *gpu, format, bs, kv_heads, d, blocks, rng);
    std::vector<int32_t> tables = {5, 2, 7, 0}, offsets = {0, 4}, positions = {40, 41, 41, 42, 42},
                         row_seq(5, 0), tree_base(5, 40), tree_path(static_cast<size_t>(rows * kMaxTreeDepth), 0);
    // node i's ancestors: path[depth] = node index at that depth.
    const int32_t paths[5][3] = {{0, 0, 0}, {0, 1, 0}, {0, 2, 0}, {0, 1, 3}, {0, 2, 4}};
    for (int r = 0; r < 5; ++r)
      for (int k = 0; k < 3; ++k) tree_path[r * kMaxTreeDepth + k] = paths[r][k];
    AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data(), tree_base.data(),
                       tree_path.data()};
    const auto q = random_vec(static_cast<size_t>(rows * heads * d), rng);
    AttentionParams p;
    p.num_heads = heads;
    p.scale = 1.f / std::sqrt(float(d));
    float* out = poisoned(q.size());
    gpu->attention(upload(q), rows, cache.device, meta, p, out);
    const auto got = download(out, q.size());
    std::vector<float> expect(q.size());
    ref->attention(q.data(), rows, cache.host.host(), meta, p, expect.data());
    EXPECT_LT(rel_l2(got, expect), 2e-3 * attention_operand_scale());
  }
}

// attention_from_qkv on decode steps (every row alone in its sequence) runs the prologue inside
// the decode kernel, which encodes the row's key into the cache and stages it back through the
// format's decoding: the output and cache bytes of the prologue kernel then the attention.
// Turbo (keys stored rotated) keeps the separate prologue: both ways are the composition there.
TEST_F(CudaKernels, DecodeKernelPrologueWritesAndReadsEveryKvFormatAsTheSeparateOps) {
  for (const KvFormat format : kFormats)
    for (const int64_t d : {64, 128}) {
      SCOPED_TRACE(name(format) + ", head_dim " + std::to_string(d));
      // 128 blocks, each sequence's its own (7 is prime to 128): no row reads a slot another
      // row's prologue writes in the same launch.
      const int64_t heads = 8, kv_heads = 2, blocks = 128;
      const int32_t bs = 16;
      FilledCache cache(*ref, *gpu, format, bs, kv_heads, d, blocks, rng);
      const std::vector<int32_t> positions = {350, 90, 700};
      std::vector<int32_t> tables, offsets = {0}, row_seq;
      for (int64_t r = 0; r < 3; ++r) {
        for (int b = 0; b <= positions[r] / bs; ++b)
          tables.push_back(static_cast<int32_t>((tables.size() * 7 + 3) % blocks));
        offsets.push_back(static_cast<int32_t>(tables.size()));
        row_seq.push_back(static_cast<int32_t>(r));
      }
      const int64_t rows = 3;
      const AttentionMeta meta{positions.data(), row_seq.data(), tables.data(), offsets.data()};
      const auto qkv = random_vec(static_cast<size_t>(rows * (heads + 2 * kv_heads) * d), rng);
      const RopeTable t = test_rope(d);
      const QkvPrologue p{heads, nullptr, nullptr, 1e-6f, 0.f, &t, positions.data()};
      AttentionParams params;
      params.num_heads = heads;
      params.scale = 1.f / std::sqrt(static_cast<float>(d));
      const size_t q_size = static_cast<size_t>(rows * heads * d), kv_size = static_cast<size_t>(rows * kv_heads * d);
      std::vector<float> outs[2];
      std::vector<uint8_t> ks[2], vs[2];
      for (int fused = 0; fused < 2; ++fused) {
        DeviceBytes bytes(*gpu);
        const PagedKv kv{bytes.copy(cache.host.k), bytes.copy(cache.host.v), bs, kv_heads, d, format};
        float* q = poisoned(q_size);
        float* out = poisoned(q_size);
        if (fused)
          gpu->attention_from_qkv(upload(qkv), rows, p, kv, meta, params, q, poisoned(kv_size), poisoned(kv_size), out);
        else
          gpu->Backend::attention_from_qkv(upload(qkv), rows, p, kv, meta, params, q, poisoned(kv_size),
                                           poisoned(kv_size), out);
        outs[fused] = download(out, q_size);
        ks[fused] = bytes.download(kv.k, cache.host.k.size());
        vs[fused] = bytes.download(kv.v, cache.host.v.size());
      }
      EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), q_size * sizeof(float))) << "attention";
      EXPECT_EQ(first_difference(ks[1], ks[0]), "") << "K";
      EXPECT_EQ(first_difference(vs[1], vs[0]), "") << "V";
      EXPECT_NE(ks[0], cache.host.k) << "no key written";
    }
}

// Draft trees move accepted tokens' K/V (kv::KvCache::copy_positions): a quantized token's code
// record and its param records (4-byte aligned spans of heads · 4 bytes), in one op: the result
// of the copies one by one, in order.
TEST_F(CudaKernels, CopyOnDeviceManyMovesWordAlignedSpans) {
  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(rng());
  DeviceBytes bytes(*gpu);
  auto* d = static_cast<uint8_t*>(bytes.copy(data));
  std::vector<uint8_t> expect = data;
  struct Move {
    size_t from, to, n;
  };
  // 8-byte param spans (2 heads of fp8), 256-byte code spans, a 16-byte aligned 512-byte span, a
  // word onto itself. No source is an earlier copy's destination (Backend::copy_on_device_many's
  // contract, which a tree's accepted branch meets: it moves tokens towards the front).
  const Move moves[] = {{1000, 8, 8}, {2048, 512, 256}, {1604, 1700, 8}, {3072, 2560, 512}, {16, 16, 4}};
  std::vector<Backend::DeviceCopy> copies;
  for (const Move& m : moves) {
    std::memmove(expect.data() + m.to, expect.data() + m.from, m.n);
    copies.push_back({d + m.to, d + m.from, m.n});
  }
  gpu->copy_on_device_many(copies);
  EXPECT_EQ(first_difference(bytes.download(d, data.size()), expect), "");
}

}  // namespace
}  // namespace tachyon::kernels
