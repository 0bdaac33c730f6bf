// `--quantize-decode int8|int4` (model::LoadOptions::quantize_decode) on the demo model, CPU
// backend: prompt rows compute with the bf16 weights (their logits are the plain model's, bit for
// bit), decode rows (model::Batch::decode_rows) with the quantized copies (their logits are those
// of the `--quantize` model continuing from the plain model's prompt KV, bit for bit), and a row's
// bits depend on its kind only, not on the rows that share its forward.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "../../diff/hf/model_runner.h"
#include "base/error.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "model/sources/packed_source.h"

#include "quantize_decode_runs.h"

namespace tachyon::testing {
namespace {

using kernels::QuantizeMode;

const std::string& kDemo = kQuantizeDecodeDemo;


int32_t argmax(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = static_cast<int32_t>(i);
  return best;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// The prompt, then every generated token but the last (each one's row is fed the token before).
std::vector<int32_t> all_tokens_of(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end() - 1);
  return all;
}

// Three models on one CPU backend (so they can share a KV cache): bf16 as stored, --quantize
// MODE and --quantize-decode MODE.
struct Models {
  explicit Models(QuantizeMode mode)
      : plain(load_demo(*backend, QuantizeMode::None, QuantizeMode::None)),
        quantized(load_demo(*backend, mode, QuantizeMode::None)),
        decode(load_demo(*backend, QuantizeMode::None, mode)) {}
  std::unique_ptr<kv::KvCache> cache() { return std::make_unique<kv::KvCache>(*backend, plain->kv_layout(256)); }
  int64_t vocab() const { return plain->config().vocab_size; }
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> plain, quantized, decode;
};

class QuantizeDecode : public ::testing::TestWithParam<QuantizeMode> {
 protected:
  static Models& models(QuantizeMode mode) {
    static std::map<QuantizeMode, std::unique_ptr<Models>> loaded;
    auto& m = loaded[mode];
    if (!m) m = std::make_unique<Models>(mode);
    return *m;
  }
  static std::vector<int32_t> prompt(const std::string& name) {
    return read_ids(io::Checkpoint::open_file(kDemo + "/golden.safetensors"), name + ".input_ids");
  }
};

TEST_P(QuantizeDecode, PromptRowsReadBf16AndDecodeRowsReadTheQuantizedCopy) {
  Models& m = models(GetParam());
  const int64_t V = m.vocab();
  EXPECT_TRUE(m.decode->has_decode_weights());
  EXPECT_FALSE(m.plain->has_decode_weights());
  EXPECT_FALSE(m.quantized->has_decode_weights());
  const std::vector<int32_t> ids = prompt("code");
  const auto P = static_cast<int32_t>(ids.size());
  constexpr int kSteps = 12;

  // --quantize-decode: the prompt, then greedy decode rows one at a time.
  const auto kv_cache = m.cache();
  kv::KvCache& kv = *kv_cache;
  const kv::SeqId seq = kv.add_sequence();
  const std::vector<float> prompt_logits = forward_marking_decode_rows(*m.decode, kv, seq, ids, 0, P);
  std::vector<int32_t> tokens = {argmax(prompt_logits.data() + (P - 1) * V, V)};
  std::vector<float> decode_logits;
  for (int i = 0; i < kSteps; ++i) {
    const auto row = forward_marking_decode_rows(*m.decode, kv, seq, {tokens.back()}, P + i, P);
    decode_logits.insert(decode_logits.end(), row.begin(), row.end());
    tokens.push_back(argmax(row.data(), V));
  }

  // The reference: the bf16 model's prompt, then the --quantize model's decode rows on that KV.
  const auto ref_kv_cache = m.cache();
  kv::KvCache& ref_kv = *ref_kv_cache;
  const kv::SeqId ref = ref_kv.add_sequence();
  const std::vector<float> bf16_prompt = forward_marking_decode_rows(*m.plain, ref_kv, ref, ids, 0, P);
  ASSERT_EQ(prompt_logits.size(), bf16_prompt.size());
  EXPECT_TRUE(same_bits(prompt_logits.data(), bf16_prompt.data(), bf16_prompt.size()))
      << "prompt rows must compute with the weights as stored";
  std::vector<float> ref_logits;
  for (int i = 0; i < kSteps; ++i) {
    const auto row = forward_marking_decode_rows(*m.quantized, ref_kv, ref, {tokens[static_cast<size_t>(i)]}, P + i, P);
    ref_logits.insert(ref_logits.end(), row.begin(), row.end());
    EXPECT_EQ(argmax(row.data(), V), tokens[static_cast<size_t>(i) + 1]) << "step " << i;
  }
  EXPECT_TRUE(same_bits(decode_logits.data(), ref_logits.data(), ref_logits.size()))
      << "decode rows must compute with --quantize's weights";

  // ... and not with bf16's: the plain model's decode rows on the same tokens differ.
  const auto bf16_kv_cache = m.cache();
  kv::KvCache& bf16_kv = *bf16_kv_cache;
  const kv::SeqId b = bf16_kv.add_sequence();
  forward_marking_decode_rows(*m.plain, bf16_kv, b, ids, 0, P);
  std::vector<float> bf16_logits;
  for (int i = 0; i < kSteps; ++i) {
    const auto row = forward_marking_decode_rows(*m.plain, bf16_kv, b, {tokens[static_cast<size_t>(i)]}, P + i, P);
    bf16_logits.insert(bf16_logits.end(), row.begin(), row.end());
  }
  EXPECT_FALSE(same_bits(decode_logits.data(), bf16_logits.data(), bf16_logits.size()));

  // Without the flag, marking rows changes nothing: the plain model's rows read bf16 either way.
  const auto plain_cache = m.cache();
  const kv::SeqId marked = plain_cache->add_sequence(), unmarked = plain_cache->add_sequence();
  const auto with_marks = forward_marking_decode_rows(*m.plain, *plain_cache, marked, all_tokens_of(ids, tokens), 0, P);
  const auto without = forward_marking_decode_rows(*m.plain, *plain_cache, unmarked, all_tokens_of(ids, tokens), 0, 1 << 30);
  EXPECT_TRUE(same_bits(with_marks.data(), without.data(), without.size()));

  // A preempted request recomputes prompt and output in one chunk: the same bits per row.
  const kv::SeqId again = kv.add_sequence();
  const std::vector<float> recomputed = forward_marking_decode_rows(*m.decode, kv, again, all_tokens_of(ids, tokens), 0, P);
  EXPECT_TRUE(same_bits(recomputed.data(), prompt_logits.data(), prompt_logits.size()));
  EXPECT_TRUE(same_bits(recomputed.data() + prompt_logits.size(), decode_logits.data(), decode_logits.size()));
}

// Batch invariance within the mode: a decode row, a verify chain and a prefill chunk in one
// forward give each row the bits it gets alone.
TEST_P(QuantizeDecode, RowBitsDependOnTheRowKindNotOnBatchMates) {
  Models& m = models(GetParam());
  const std::vector<int32_t> a = prompt("code"), c = prompt("chat");
  const std::vector<int32_t> b(c.begin(), c.begin() + static_cast<long>(c.size() / 2));
  const auto Pa = static_cast<int32_t>(a.size()), Pc = static_cast<int32_t>(c.size());
  const std::vector<int32_t> chain = {17, 4242, 99};  // a committed token and two drafts
  const std::vector<int32_t> one = {2024};

  // Alone: each sequence's step in a forward of its own.
  const auto solo_cache = m.cache();
  kv::KvCache& solo = *solo_cache;
  const kv::SeqId sa = solo.add_sequence(), sb = solo.add_sequence(), sc = solo.add_sequence();
  forward_marking_decode_rows(*m.decode, solo, sa, a, 0, Pa);
  forward_marking_decode_rows(*m.decode, solo, sc, c, 0, Pc);
  const auto la = forward_marking_decode_rows(*m.decode, solo, sa, chain, Pa, Pa);
  const auto lb = forward_marking_decode_rows(*m.decode, solo, sb, b, 0, 1 << 30);  // all prompt rows
  const auto lc = forward_marking_decode_rows(*m.decode, solo, sc, one, Pc, Pc);

  // Together: [a's chain: decode][b's prompt: prefill][c's row: decode] in one forward.
  const auto mixed_cache = m.cache();
  kv::KvCache& mixed = *mixed_cache;
  const kv::SeqId ma = mixed.add_sequence(), mb = mixed.add_sequence(), mc = mixed.add_sequence();
  forward_marking_decode_rows(*m.decode, mixed, ma, a, 0, Pa);
  forward_marking_decode_rows(*m.decode, mixed, mc, c, 0, Pc);
  mixed.reserve(ma, Pa + 3);
  mixed.reserve(mb, static_cast<int32_t>(b.size()));
  mixed.reserve(mc, Pc + 1);
  model::Batch batch;
  batch.add(ma, chain, Pa, model::LogitRows::All);
  batch.mark_decode_rows(Pa);
  batch.add(mb, b, 0, model::LogitRows::All);
  batch.add(mc, one, Pc, model::LogitRows::All);
  batch.mark_decode_rows(Pc);
  ASSERT_EQ(batch.decode_rows.size(), chain.size() + b.size() + 1);
  EXPECT_EQ(batch.decode_rows[chain.size()], 0);
  const std::vector<float> together = m.decode->forward(batch, mixed).logits;
  ASSERT_EQ(together.size(), la.size() + lb.size() + lc.size());
  EXPECT_TRUE(same_bits(together.data(), la.data(), la.size()));
  EXPECT_TRUE(same_bits(together.data() + la.size(), lb.data(), lb.size()));
  EXPECT_TRUE(same_bits(together.data() + la.size() + lb.size(), lc.data(), lc.size()));
}

// Each matmul weight keeps its stored bf16 form and gets --quantize's form as its decode copy:
// the 24 linear layers in the mode's format, the tied embedding / LM head as int8 g64.
TEST_P(QuantizeDecode, DecodeCopiesHaveQuantizesFormats) {
  std::map<std::string, int> stored, copies;
  model::LoadOptions options;
  options.quantize_decode = GetParam();
  options.on_weight = [&](const std::string&, const kernels::Weight& w) { stored[model::format_name(w)] += 1; };
  options.on_decode_weight = [&](const std::string&, const kernels::Weight& w) { copies[model::format_name(w)] += 1; };
  auto backend = kernels::make_backend("cpu");
  model::load_model(kDemo, *backend, options);
  EXPECT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored["BF16"], 24 + 1 + 6 * 4 + 1);  // linear layers, embedding, norms, final norm
  const std::string linear = GetParam() == QuantizeMode::Int8 ? "I8" : "Affine 4-bit g64 F16";
  EXPECT_EQ(copies[linear], 24);
  EXPECT_EQ(copies["Symmetric 8-bit g64 F16"], 1);
  EXPECT_EQ(copies.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Modes, QuantizeDecode, ::testing::Values(QuantizeMode::Int8, QuantizeMode::Int4),
                         [](const auto& info) { return std::string(kernels::quantize_mode_name(info.param)); });

// Refused by name: fp8 (not a decode format), both options at once, a checkpoint with no float
// matmul weight to copy.
TEST(QuantizeDecodeOptions, BadCombinationsAreRefusedByName) {
  auto backend = kernels::make_backend("cpu");
  auto message = [&](const std::string& dir, QuantizeMode quantize, QuantizeMode decode) -> std::string {
    try {
      model::LoadOptions options;
      options.quantize = quantize;
      options.quantize_decode = decode;
      model::load_model(dir, *backend, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  EXPECT_NE(message(kDemo, QuantizeMode::None, QuantizeMode::Fp8).find("--quantize-decode fp8: expected int8 or int4"),
            std::string::npos);
  EXPECT_NE(message(kDemo, QuantizeMode::Int8, QuantizeMode::Int4).find("--quantize int8 and --quantize-decode int4"),
            std::string::npos);
  const std::string mlx = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/quant/mlx_qwen3";
  const std::string got = message(mlx, QuantizeMode::None, QuantizeMode::Int8);
  EXPECT_NE(got.find("--quantize-decode int8"), std::string::npos) << got;
  EXPECT_NE(got.find("is quantized already (mlx)"), std::string::npos) << got;
}

}  // namespace
}  // namespace tachyon::testing
