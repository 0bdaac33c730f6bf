// The KV cache in each storage format (kernels/kv_format.h): its bytes per block are what it
// allocates and reads, a draft branch's move carries each token's codes with its scales, and a
// format the head dimension cannot hold is refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "kernels/kv_quant.h"
#include "kv/kv_cache.h"

namespace tachyon::kv {
namespace {

using kernels::KvFormat;

constexpr KvFormat kFormats[] = {KvFormat::F32, KvFormat::BF16, KvFormat::F16, KvFormat::FP8,
                                 KvFormat::Int8, KvFormat::Int4, KvFormat::Turbo};

TEST(KvCacheFormat, BytesPerBlockFollowTheFormat) {
  KvLayout l{.num_layers = 2, .num_kv_heads = 2, .head_dim = 64, .block_size = 4, .num_blocks = 6};
  EXPECT_EQ(l.bytes_per_block(), size_t{2 * 2 * 4 * 2 * 64 * 4});  // f32: layers × (K, V) × slots × heads × dim × 4
  l.format = KvFormat::BF16;
  EXPECT_EQ(l.bytes_per_block(), size_t{2 * 2 * 4 * 2 * 64 * 2});
  l.format = KvFormat::Int8;  // codes 4·2·64 = 512, then 8 (slot, head) params of 8 bytes: 576 per tensor
  EXPECT_EQ(l.bytes_per_block(), size_t{2 * 2 * 576});
  l.format = KvFormat::Turbo;  // K: 512 + 8·4 = 544; V: 4·2·32 = 256 + 8·8 = 320
  EXPECT_EQ(l.bytes_per_block(), size_t{2 * (544 + 320)});
  l.shared_kv = true;  // MLA latents: bf16 whatever the lossy format, one tensor
  EXPECT_EQ(l.storage_format(), KvFormat::BF16);
  EXPECT_EQ(l.bytes_per_block(), size_t{2 * 4 * 2 * 64 * 2});
}

TEST(KvCacheFormat, UnsupportedHeadDimensionIsRefusedByName) {
  auto backend = kernels::make_backend("cpu");
  const KvLayout l{.num_layers = 1, .num_kv_heads = 1, .head_dim = 96, .block_size = 4, .num_blocks = 2,
                   .format = KvFormat::Turbo};
  try {
    KvCache kv(*backend, l);
    FAIL() << "turbo with head_dim 96 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("turbo"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("96"), std::string::npos) << e.what();
  }
}

class KvCacheFormats : public ::testing::TestWithParam<KvFormat> {};

// copy_positions moves a token's code records and param records in every layer: the moved
// positions decode to the values of their sources, and nothing else changes.
TEST_P(KvCacheFormats, CopyPositionsMovesCodesWithTheirScales) {
  auto backend = kernels::make_backend("cpu");
  const int64_t heads = 2, d = 64;
  const KvLayout layout{.num_layers = 2, .num_kv_heads = heads, .head_dim = d, .block_size = 4, .num_blocks = 6,
                        .format = GetParam()};
  KvCache kv(*backend, layout);
  auto seq = kv.add_sequence();
  ASSERT_TRUE(kv.reserve(seq, 12));
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> k(static_cast<size_t>(12 * heads * d)), v(k.size());
  std::vector<int32_t> positions(12), row_seq(12, 0), offsets = {0, 3};
  for (int32_t p = 0; p < 12; ++p) positions[p] = p;
  const kernels::AttentionMeta meta{positions.data(), row_seq.data(), kv.block_table(seq).data(), offsets.data()};
  for (int64_t l = 0; l < 2; ++l) {
    for (auto& x : k) x = nd(rng);
    for (auto& x : v) x = nd(rng);
    backend->write_kv(k.data(), v.data(), 12, kv.layer(l), meta);
  }
  // Every (layer, tensor, position, head)'s decoded values.
  auto decoded = [&] {
    std::vector<std::vector<float>> all;
    for (int64_t l = 0; l < 2; ++l) {
      const kernels::PagedKv p = kv.layer(l);
      for (int t = 0; t < 2; ++t) {
        const kernels::KvTensorLayout tl = t ? p.v_layout() : p.k_layout();
        const auto* base = static_cast<const uint8_t*>(t ? p.v : p.k);
        for (int32_t pos = 0; pos < 12; ++pos)
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t slot = int64_t{kv.block_table(seq)[pos / 4]} * 4 + pos % 4;
            std::vector<float> x(static_cast<size_t>(d));
            kernels::kv_dequantize(tl.codec, base + tl.code_offset(slot, h), base + tl.param_offset(slot, h), d, x.data());
            all.push_back(std::move(x));
          }
      }
    }
    return all;
  };
  const auto before = decoded();
  const std::vector<std::pair<int32_t, int32_t>> moves = {{7, 5}, {9, 6}, {10, 7}};
  kv.copy_positions(seq, moves);
  auto want = before;
  for (const auto& [from, to] : moves)
    for (int64_t lt = 0; lt < 4; ++lt)
      for (int64_t h = 0; h < heads; ++h) want[(lt * 12 + to) * heads + h] = want[(lt * 12 + from) * heads + h];
  EXPECT_EQ(decoded(), want);
  EXPECT_NE(want, before);
}

INSTANTIATE_TEST_SUITE_P(Formats, KvCacheFormats, ::testing::ValuesIn(kFormats),
                         [](const auto& info) { return std::string(kernels::kv_format_name(info.param)); });

}  // namespace
}  // namespace tachyon::kv
