// ggml block types repacked into tachyon's weight formats give the values of llama.cpp's own
// dequantizer (gguf-py's quants.py, run by tools/make_gguf_quant_blocks.py on random block bytes):
// bit for bit for the Symmetric ones, within one f32 rounding of the product for the Affine
// ones (fma vs ggml's d·q − m). Refused types are named with the supported list.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "kernels/weight_dequant.h"
#include "model/sources/gguf_repack.h"

namespace tachyon {
namespace {

const std::string kDir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/gguf/";

TEST(GgufRepack, MatchesGgufPyDequantizer) {
  const auto file = io::GgufFile::open(kDir + "quant_blocks.gguf");
  const auto expected = io::Checkpoint::open_file(kDir + "quant_blocks.expected.safetensors");
  for (const char* name : {"Q8_0", "Q4_0", "Q5_0", "Q6_K", "Q4_1", "Q5_1", "Q4_K", "Q5_K"}) {
    SCOPED_TRACE(name);
    const io::GgufTensor& t = file->tensor(name);
    EXPECT_EQ(io::ggml_type_name(t.type), name);
    const int64_t rows = t.dims[1], cols = t.dims[0];
    const model::HostTensor h = model::repack_ggml_rows(t.type, t.data, rows, cols, t.name);
    const auto* want = static_cast<const float*>(expected.get(name).data);
    const bool affine = h.weight.format == kernels::WeightFormat::Affine;
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float got = kernels::dequantize_element(h.weight, r, c), w = want[r * cols + c];
        if (!affine) {
          ASSERT_EQ(got, w) << "row " << r << " col " << c;
          continue;
        }
        // One rounding of s·q (≤ |w| + |bias| in magnitude) apart.
        const int64_t g = r * (cols / h.weight.quant.group) + c / h.weight.quant.group;
        const float bias = kernels::load_scale_value(h.weight.quant.biases, h.weight.quant.scale_dtype, g);
        const double bound = std::ldexp(std::abs(double(w)) + std::abs(double(bias)), -23);
        ASSERT_LE(std::abs(double(got) - double(w)), bound) << "row " << r << " col " << c;
        worst = std::max(worst, std::abs(double(got) - double(w)));
      }
    std::printf("%s -> %s: worst |delta| %.3g\n", name, model::repacked_format_name(t.type).c_str(), worst);
  }
}

TEST(GgufRepack, FormatsAreTheDocumentedOnes) {
  const auto file = io::GgufFile::open(kDir + "quant_blocks.gguf");
  auto repacked = [&](const char* name) {
    const io::GgufTensor& t = file->tensor(name);
    return model::repack_ggml_rows(t.type, t.data, t.dims[1], t.dims[0], t.name);
  };
  const auto q4k = repacked("Q4_K");
  EXPECT_EQ(q4k.weight.format, kernels::WeightFormat::Affine);
  EXPECT_EQ(q4k.weight.quant.bits, 4);
  EXPECT_EQ(q4k.weight.quant.group, 32);
  EXPECT_EQ(q4k.weight.quant.scale_dtype, DType::F32);
  const auto q6k = repacked("Q6_K");
  EXPECT_EQ(q6k.weight.format, kernels::WeightFormat::Symmetric);
  EXPECT_EQ(q6k.weight.quant.bits, 8);
  EXPECT_EQ(q6k.weight.quant.group, 16);
  const auto q40 = repacked("Q4_0");
  EXPECT_EQ(q40.weight.format, kernels::WeightFormat::Symmetric);
  EXPECT_EQ(q40.weight.quant.bits, 4);
  EXPECT_EQ(q40.weight.quant.scale_dtype, DType::F16);
  EXPECT_EQ(repacked("Q5_0").weight.quant.bits, 8);
  EXPECT_EQ(repacked("Q5_1").weight.format, kernels::WeightFormat::Affine);
}

// Widening (mixed-type fused weights) and row permutation keep every value.
TEST(GgufRepack, WideningAndPermutationAreExact) {
  const auto file = io::GgufFile::open(kDir + "quant_blocks.gguf");
  for (const char* name : {"Q8_0", "Q4_0", "Q5_0", "Q6_K", "Q4_1", "Q4_K", "Q5_K"}) {
    SCOPED_TRACE(name);
    const io::GgufTensor& t = file->tensor(name);
    const int64_t rows = t.dims[1], cols = t.dims[0];
    const model::HostTensor h = model::repack_ggml_rows(t.type, t.data, rows, cols, t.name);
    const model::HostTensor wide = model::widen_to_affine8(h, 16);
    const model::HostTensor perm = model::permute_rows(h, {2, 0, 1});
    const model::HostTensor dense = model::to_dense_f32(h);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float v = kernels::dequantize_element(h.weight, r, c);
        ASSERT_EQ(kernels::dequantize_element(wide.weight, r, c), v) << r << "," << c;
        ASSERT_EQ(kernels::dequantize_element(perm.weight, (r + 1) % 3, c), v) << r << "," << c;
        ASSERT_EQ(static_cast<const float*>(dense.weight.data)[r * cols + c], v);
      }
    // Q6_K's and Q5_0's codes q in [−32, 31] widen to q + 32 (6 bits: the CPU int8 mode's compact
    // codes); Q8_0's to q + 128.
    uint32_t widest = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) widest = std::max(widest, kernels::code_at(wide.weight, r, c));
    if (std::string(name) == "Q6_K" || std::string(name) == "Q5_0") {
      EXPECT_LT(widest, 64u);
    }
  }
}

TEST(GgufRepack, RefusesUnsupportedTypesByName) {
  const auto file = io::GgufFile::open(kDir + "quant_blocks.gguf");
  for (const char* name : {"Q2_K", "IQ4_NL"}) {
    const io::GgufTensor& t = file->tensor(name);
    try {
      model::repack_ggml_rows(t.type, t.data, t.dims[1], t.dims[0], t.name);
      FAIL() << name << " accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("tensor '") + name + "' has GGUF type " + name), std::string::npos) << m;
      EXPECT_NE(m.find("supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K"), std::string::npos)
          << m;
    }
  }
}

// ggml's MXFP4 block {e, qs[16]}: element j in qs[j]'s low nibble, j + 16 in its high nibble, value
// kvalues[code] · 2^(e − 128) with ggml's table of doubled e2m1 values. Repacked into Mxfp4 with the
// codes in pairwise order and the same e8m0 byte: every element equal, over every code and a
// normal, a tiny and a large exponent.
TEST(GgufRepack, Mxfp4BlocksKeepEveryValue) {
  constexpr int kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const uint8_t exponents[] = {128, 1, 200};
  std::vector<uint8_t> blocks;
  for (uint8_t e : exponents) {
    blocks.push_back(e);
    for (int j = 0; j < 16; ++j) blocks.push_back(static_cast<uint8_t>((j & 15) | ((15 - j) << 4)));
  }
  const model::HostTensor t = model::repack_ggml_rows(io::GgmlType::MXFP4, blocks.data(), 3, 32, "experts");
  EXPECT_EQ(t.weight.format, kernels::WeightFormat::Mxfp4);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 32; ++c) {
      const int code = c < 16 ? c : 15 - (c - 16);
      const float want = static_cast<float>(kValues[code]) * std::ldexp(1.f, exponents[r] - 128);
      EXPECT_EQ(kernels::dequantize_element(t.weight, r, c), want) << "row " << r << " column " << c;
    }
  blocks[0] = 255;  // e8m0 NaN
  try {
    model::repack_ggml_rows(io::GgmlType::MXFP4, blocks.data(), 3, 32, "blk.0.ffn_up_exps.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_up_exps.weight': block 0 has the e8m0 scale 255"),
              std::string::npos)
        << e.what();
  }
}

TEST(GgufRepack, RefusesNonFiniteScales) {
  std::vector<uint8_t> block(34, 1);
  block[0] = 0x00;
  block[1] = 0x7c;  // f16 +inf
  try {
    model::repack_ggml_rows(io::GgmlType::Q8_0, block.data(), 1, 32, "blk.0.attn_q.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.0.attn_q.weight': block 0 has a non-finite scale"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tachyon
