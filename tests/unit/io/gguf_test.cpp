// The GGUF reader: typed metadata and tensor infos of well-formed files (hand-built and the
// llama.cpp-written fixtures), and a clear refusal naming the field for every kind of damage.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "gguf_builder.h"
#include "io/model_resolve.h"

namespace tachyon::io {
namespace {

using testing::GgufBuilder;

std::string fixture(const std::string& name) { return std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/gguf/" + name; }

std::shared_ptr<const GgufFile> parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "test.gguf");
}

// Expects parse to throw a tachyon::Error whose message contains `needle`.
void expect_refused(const std::vector<uint8_t>& bytes, const std::string& needle) {
  try {
    parse(bytes);
    FAIL() << "accepted; expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

GgufBuilder small_model() {
  GgufBuilder b;
  b.str("general.architecture", "qwen3")
      .u32("qwen3.block_count", 2)
      .f32("qwen3.rope.freq_base", 1000000.0f)
      .boolean("tokenizer.ggml.add_bos_token", false)
      .strings("tokenizer.ggml.tokens", {"a", "b", "<|im_end|>"})
      .array<float>("tokenizer.ggml.scores", GgufValueType::F32, {0.5f, -1.0f, 0.0f})
      .array<int32_t>("tokenizer.ggml.token_type", GgufValueType::I32, {1, 1, 3});
  std::vector<uint8_t> f32(4 * 8 * 2, 0), q8(34 * 2, 0);
  b.tensor("token_embd.weight", GgmlType::F32, {8, 2}, f32).tensor("blk.0.ffn_up.weight", GgmlType::Q8_0, {32, 2}, q8);
  return b;
}

TEST(Gguf, ReadsTypedMetadataAndTensors) {
  const auto bytes = small_model().bytes();
  auto f = parse(bytes);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get("general.architecture").as_string(), "qwen3");
  EXPECT_EQ(f->get("qwen3.block_count").as_int(), 2);
  EXPECT_EQ(f->get("qwen3.block_count").as_u32(), 2u);
  EXPECT_EQ(f->get("qwen3.rope.freq_base").as_float(), 1e6);
  EXPECT_FALSE(f->get("tokenizer.ggml.add_bos_token").as_bool());
  EXPECT_EQ(f->get("tokenizer.ggml.tokens").as_strings(), (std::vector<std::string_view>{"a", "b", "<|im_end|>"}));
  EXPECT_EQ(f->get("tokenizer.ggml.scores").as_f32s(), (std::vector<float>{0.5f, -1.0f, 0.0f}));
  EXPECT_EQ(f->get("tokenizer.ggml.token_type").as_ints(), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(f->get("tokenizer.ggml.token_type").array_type(), GgufValueType::I32);
  EXPECT_EQ(f->find("missing.key"), nullptr);
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor& q = f->tensor("blk.0.ffn_up.weight");
  EXPECT_EQ(q.type, GgmlType::Q8_0);
  EXPECT_EQ(q.dims, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(q.num_bytes, 68u);
  EXPECT_EQ(q.offset % 32, 0u);
  EXPECT_EQ(q.data, bytes.data() + f->data_offset() + q.offset);
  EXPECT_EQ((q.data - bytes.data()) % 32, 0);
}

TEST(Gguf, WrongTypeAccessNamesTheKey) {
  const auto bytes = small_model().bytes();
  auto f = parse(bytes);
  try {
    (void)f->get("general.architecture").as_int();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("general.architecture"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)f->get("tokenizer.ggml.tokens").as_ints(), Error);
  EXPECT_THROW((void)f->get("qwen3.block_count").as_string(), Error);
  EXPECT_THROW((void)f->get("missing.key"), Error);
  EXPECT_THROW((void)f->tensor("output.weight"), Error);
}

TEST(Gguf, Version2AndCustomAlignment) {
  GgufBuilder b;
  b.version(2).alignment(64).u32("general.alignment", 64);
  b.tensor("a", GgmlType::F16, {4}, std::vector<uint8_t>(8, 1)).tensor("b", GgmlType::BF16, {4}, std::vector<uint8_t>(8, 2));
  const auto bytes = b.bytes();
  auto f = parse(bytes);
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensor("b").offset, 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
}

TEST(Gguf, RefusesBadMagicAndVersion) {
  auto bytes = small_model().bytes();
  auto bad = bytes;
  bad[0] = 'X';
  expect_refused(bad, "not a GGUF file");
  expect_refused(GgufBuilder().version(1).bytes(), "version 1");
  expect_refused(GgufBuilder().version(4).bytes(), "version 4");
  expect_refused(GgufBuilder().version(0x03000000).bytes(), "big-endian");
  expect_refused({'G', 'G', 'U'}, "not a GGUF file");
}

TEST(Gguf, RefusesEveryTruncation) {
  const auto bytes = small_model().bytes();
  auto f = parse(bytes);
  const size_t data_end = f->data_offset() + f->tensor("blk.0.ffn_up.weight").offset + 68;
  ASSERT_EQ(data_end, bytes.size());
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse(cut), Error) << "accepted a file cut to " << n << " of " << bytes.size() << " bytes";
  }
}

TEST(Gguf, RefusesTensorOutsideTheFileOrMisaligned) {
  GgufBuilder past;
  past.tensor("w", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  auto bytes = past.bytes();
  bytes.resize(bytes.size() - 4);
  expect_refused(bytes, "tensor 'w'");
  GgufBuilder misaligned;
  misaligned.tensor("w", GgmlType::F32, {4}, std::vector<uint8_t>(16), 8);
  expect_refused(misaligned.bytes(), "not a multiple of the alignment");
  GgufBuilder overlap;
  overlap.tensor("a", GgmlType::F32, {16}, std::vector<uint8_t>(64), 0).tensor("b", GgmlType::F32, {8}, std::vector<uint8_t>(32), 32);
  expect_refused(overlap.bytes(), "overlap");
}

TEST(Gguf, RefusesBadTensorInfos) {
  expect_refused(GgufBuilder().tensor("q", GgmlType::Q4_0, {16, 2}, std::vector<uint8_t>(18)).bytes(),
                 "not a multiple of its block of 32");
  expect_refused(GgufBuilder().tensor("z", GgmlType::F32, {0}, {}).bytes(), "tensor 'z' has dimension 0 of size 0");
  expect_refused(GgufBuilder().tensor("d", GgmlType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)).bytes(),
                 "5 dimensions");
  expect_refused(GgufBuilder().tensor("t", static_cast<GgmlType>(31), {4}, std::vector<uint8_t>(16)).bytes(),
                 "unknown ggml type 31");
  expect_refused(GgufBuilder().tensor("x", GgmlType::F32, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, {}).bytes(),
                 "63 bits");
  expect_refused(GgufBuilder()
                     .tensor("x", GgmlType::F32, {1}, std::vector<uint8_t>(4))
                     .tensor("x", GgmlType::F32, {1}, std::vector<uint8_t>(4))
                     .bytes(),
                 "tensor 'x' appears twice");
}

TEST(Gguf, RefusesBadMetadata) {
  expect_refused(GgufBuilder().u32("k", 1).u32("k", 2).bytes(), "'k' appears twice");
  expect_refused(GgufBuilder().u32("general.alignment", 48).bytes(), "not a power of two");
  expect_refused(GgufBuilder().u64("general.alignment", 32).bytes(), "expected u32");
  expect_refused(GgufBuilder().scalar("k", static_cast<GgufValueType>(13), uint32_t(0)).bytes(), "unknown value type 13");
  expect_refused(GgufBuilder().scalar("b", GgufValueType::Bool, uint8_t(2)).bytes(), "bool with byte value 2");
  // An array whose claimed length cannot fit the file.
  GgufBuilder huge;
  huge.array<uint32_t>("a", GgufValueType::U32, {1, 2});
  auto bytes = huge.bytes();
  const uint64_t claimed = uint64_t(1) << 61;
  // The count sits after magic, version, counts, key length + "a", type, element type.
  std::memcpy(bytes.data() + 4 + 4 + 16 + 8 + 1 + 4 + 4, &claimed, 8);
  expect_refused(bytes, "claims 2305843009213693952 elements");
  // A header claiming more entries than the file can hold.
  auto many = GgufBuilder().bytes();
  const uint64_t n = uint64_t(1) << 40;
  std::memcpy(many.data() + 16, &n, 8);
  expect_refused(many, "metadata entries");
}

TEST(Gguf, TypeTraitsFollowGgmlBlocks) {
  EXPECT_EQ(ggml_type_traits(uint32_t(GgmlType::Q4_K))->block_bytes, 144);
  EXPECT_EQ(ggml_type_traits(uint32_t(GgmlType::Q6_K))->block_bytes, 210);
  EXPECT_EQ(ggml_type_traits(uint32_t(GgmlType::Q5_0))->block_bytes, 22);
  EXPECT_FALSE(ggml_type_traits(4).has_value());
  EXPECT_EQ(ggml_type_name(GgmlType::IQ2_XS), "IQ2_XS");
  EXPECT_EQ(ggml_type_name(static_cast<GgmlType>(99)), "type 99");
}

// The llama.cpp-written fixtures parse, and their tensor bytes exactly fill the data section.
TEST(Gguf, ReadsLlamaCppFiles) {
  for (const char* name : {"demo-q4_k_m.gguf", "tiny256-q4_0.gguf", "tiny256-q6_k.gguf"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(is_gguf_file(fixture(name)));
    auto f = GgufFile::open(fixture(name));
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->get("general.architecture").as_string(), "qwen3");
    EXPECT_EQ(f->get("tokenizer.ggml.model").as_string(), "gpt2");
    EXPECT_EQ(f->get("tokenizer.ggml.tokens").array_size(), 8192u);
    uint64_t end = 0;
    for (const GgufTensor& t : f->tensors()) end = std::max(end, t.offset + t.num_bytes);
    EXPECT_LE(f->file_size() - (f->data_offset() + end), f->alignment());
    EXPECT_TRUE(f->find_tensor("blk.0.attn_q.weight"));
  }
  EXPECT_FALSE(is_gguf_file(fixture("tiny256-q4_0.reference.safetensors")));
}

// A .gguf path resolves as a GGUF model named after the file (what `serve` calls it).
TEST(Gguf, ResolvesAFileAsAGgufModelNamedAfterIt) {
  const ResolvedModel m = resolve_model(fixture("tiny256-q6_k.gguf"), ResolveOptions{});
  EXPECT_EQ(m.kind, ModelKind::Gguf);
  EXPECT_EQ(m.display_name, "tiny256-q6_k");
}

}  // namespace
}  // namespace tachyon::io
