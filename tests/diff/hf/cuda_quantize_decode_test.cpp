// `--quantize-decode int8|int4` on the CUDA backend (the CPU side: tests/unit/model/
// quantize_decode_test.cpp): on the demo model, prompt rows give the bf16 model's logits bit for
// bit, decode rows those of the --quantize model continuing from the bf16 model's prompt KV, and
// a forward mixing a verify chain, a prefill chunk and a decode row gives each row its bits
// alone. Skips when no GPU is visible.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "model_runner.h"

#include "../../unit/model/quantize_decode_runs.h"

namespace tachyon::testing {
namespace {

using kernels::QuantizeMode;

const std::string& kDemo = kQuantizeDecodeDemo;


bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

class CudaQuantizeDecode : public ::testing::TestWithParam<QuantizeMode> {};

TEST_P(CudaQuantizeDecode, PromptRowsBf16DecodeRowsQuantizedEachRowByItsKind) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto backend = kernels::make_cuda_backend();
  auto plain = load_demo(*backend, QuantizeMode::None, QuantizeMode::None);
  auto quantized = load_demo(*backend, GetParam(), QuantizeMode::None);
  auto decode = load_demo(*backend, QuantizeMode::None, GetParam());
  const int64_t V = plain->config().vocab_size;
  const auto golden = io::Checkpoint::open_file(kDemo + "/golden.safetensors");
  const std::vector<int32_t> ids = read_ids(golden, "code.input_ids"), chat = read_ids(golden, "chat.input_ids");
  const auto P = static_cast<int32_t>(ids.size());
  const std::vector<int32_t> chain = {17, 4242, 99, 7};

  kv::KvCache kv(*backend, plain->kv_layout(256)), ref_kv(*backend, plain->kv_layout(256));
  const kv::SeqId seq = kv.add_sequence(), ref = ref_kv.add_sequence();
  const auto prompt_logits = forward_marking_decode_rows(*decode, kv, seq, ids, 0, P);
  const auto bf16_prompt = forward_marking_decode_rows(*plain, ref_kv, ref, ids, 0, P);
  EXPECT_TRUE(same_bits(prompt_logits.data(), bf16_prompt.data(), bf16_prompt.size())) << "prompt rows: bf16";

  // A verify chain as one forward, next to a prefill chunk of another sequence and alone.
  const auto chain_ref = forward_marking_decode_rows(*quantized, ref_kv, ref, chain, P, P);
  const kv::SeqId other = kv.add_sequence();
  kv.reserve(seq, P + static_cast<int32_t>(chain.size()));
  kv.reserve(other, static_cast<int32_t>(chat.size()));
  model::Batch mixed;
  mixed.add(seq, chain, P, model::LogitRows::All);
  mixed.mark_decode_rows(P);
  mixed.add(other, chat, 0, model::LogitRows::All);
  const auto together = decode->forward(mixed, kv).logits;
  ASSERT_EQ(together.size(), (chain.size() + chat.size()) * static_cast<size_t>(V));
  EXPECT_TRUE(same_bits(together.data(), chain_ref.data(), chain_ref.size())) << "decode rows: the quantized copy";
  kv::KvCache alone_kv(*backend, plain->kv_layout(256));
  const kv::SeqId alone = alone_kv.add_sequence();
  const auto chat_alone = forward_marking_decode_rows(*plain, alone_kv, alone, chat, 0, 1 << 30);
  EXPECT_TRUE(same_bits(together.data() + chain_ref.size(), chat_alone.data(), chat_alone.size()))
      << "prefill rows beside decode rows: bf16, as alone";
  // Engaged: bf16 decode rows on the same tokens differ.
  kv::KvCache bf16_kv(*backend, plain->kv_layout(256));
  const kv::SeqId b = bf16_kv.add_sequence();
  forward_marking_decode_rows(*plain, bf16_kv, b, ids, 0, P);
  const auto chain_plain = forward_marking_decode_rows(*plain, bf16_kv, b, chain, P, P);
  EXPECT_FALSE(same_bits(together.data(), chain_plain.data(), chain_plain.size()));
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaQuantizeDecode, ::testing::Values(QuantizeMode::Int8, QuantizeMode::Int4),
                         [](const auto& info) { return std::string(kernels::quantize_mode_name(info.param)); });

}  // namespace
}  // namespace tachyon::testing
