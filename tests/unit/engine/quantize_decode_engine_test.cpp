// `--quantize-decode int4` through the engine (demo model, CPU): the engine marks every generated
// token's row a decode row, so its greedy output is the bf16 prefill followed by --quantize's
// decode (checked against the two models run by hand); batching, overlapped steps, speculation
// (with accepted drafts) and the prefix cache leave the output unchanged; the prefix cache shares only the
// prompt blocks, whose KV bf16 wrote.
#include <gtest/gtest.h>

#include <chrono>

#include "demo_runs.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "spec/ngram.h"

namespace tachyon::engine {
namespace {

using namespace testing_demo;
using kernels::QuantizeMode;

constexpr int32_t kTokens = 48;

std::unique_ptr<model::Model> load(kernels::Backend& backend, QuantizeMode quantize, QuantizeMode decode) {
  model::LoadOptions options;
  options.quantize = quantize;
  options.quantize_decode = decode;
  return model::load_model(kDemo, backend, options);
}

struct Loaded {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> decode = load(*backend, QuantizeMode::None, QuantizeMode::Int4);
};
Loaded& loaded() {
  static Loaded l;
  return l;
}

// Greedy requests through one engine, one at a time or all at once; each one's tokens.
std::vector<std::vector<int32_t>> run(model::Model& m, const std::vector<std::vector<int32_t>>& ps, EngineConfig config,
                                      SpecUsage* usage = nullptr, EngineStats* stats = nullptr) {
  Engine engine(m, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<int32_t>> outs(ps.size());
  auto collect = [&](size_t i) {
    for (;;) {
      auto o = streams[i]->next(std::chrono::seconds(300));
      if (!o) throw std::runtime_error("the engine stalled");
      outs[i].insert(outs[i].end(), o->tokens.begin(), o->tokens.end());
      if (o->finish == FinishReason::None) continue;
      if (usage) usage->num_accepted += o->spec.num_accepted, usage->num_drafted += o->spec.num_drafted;
      return;
    }
  };
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest r;
    r.prompt = ps[i];
    r.sampling.temperature = 0;
    r.max_tokens = kTokens;
    streams.push_back(engine.submit(r));
    if (config.max_concurrent == 1) collect(i);
  }
  if (config.max_concurrent > 1)
    for (size_t i = 0; i < ps.size(); ++i) collect(i);
  if (stats) *stats = engine.stats();
  return outs;
}

// Greedy by hand: `prefill`'s logits for the prompt, then `decode`'s for each generated token, on
// one KV cache.
std::vector<int32_t> greedy_by_hand(const std::vector<int32_t>& prompt, QuantizeMode prefill, QuantizeMode decode) {
  auto backend = kernels::make_backend("cpu");
  auto first = load(*backend, prefill, QuantizeMode::None);
  auto rest = load(*backend, decode, QuantizeMode::None);
  kv::KvCache kv(*backend, first->kv_layout(128));
  const kv::SeqId seq = kv.add_sequence();
  const int64_t V = first->config().vocab_size;
  std::vector<int32_t> tokens, feed = prompt;
  int32_t position = 0;
  for (int32_t i = 0; i < kTokens; ++i) {
    kv.reserve(seq, position + static_cast<int32_t>(feed.size()));
    model::Batch batch;
    batch.add(seq, feed, position, model::LogitRows::Last);
    const auto logits = (i == 0 ? first : rest)->forward(batch, kv).logits;
    int32_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (logits[v] > logits[best]) best = static_cast<int32_t>(v);
    tokens.push_back(best);
    position += static_cast<int32_t>(feed.size());
    feed = {best};
  }
  return tokens;
}

std::vector<std::vector<int32_t>> some_prompts() {
  auto ps = prompts();
  ps.resize(8);  // code and chat, with and without repeated spans (prompt lookup drafts on those)
  return ps;
}

TEST(QuantizeDecodeEngine, GreedyOutputIsBf16PrefillThenInt4Decode) {
  const auto ps = some_prompts();
  const std::vector<std::vector<int32_t>> some = {ps[0], ps[1], ps[2], ps[3]};
  const auto outs = run(*loaded().decode, some, EngineConfig{.max_concurrent = 1, .num_blocks = 256});
  int differs_from_bf16 = 0;
  for (size_t i = 0; i < some.size(); ++i) {
    EXPECT_EQ(outs[i], greedy_by_hand(some[i], QuantizeMode::None, QuantizeMode::Int4)) << "prompt " << i;
    differs_from_bf16 += outs[i] != greedy_by_hand(some[i], QuantizeMode::None, QuantizeMode::None);
  }
  std::printf("%d of %zu outputs differ from bf16's\n", differs_from_bf16, some.size());
  EXPECT_GT(differs_from_bf16, 0) << "int4 decode rows gave bf16's tokens: the test cannot tell them apart";
}

TEST(QuantizeDecodeEngine, BatchingOverlapAndSpeculationKeepTheOutput) {
  const auto ps = some_prompts();
  const auto alone = run(*loaded().decode, ps, EngineConfig{.max_concurrent = 1, .num_blocks = 512});
  // All at once: prefill chunks and decode rows of other requests share forwards.
  EXPECT_EQ(run(*loaded().decode, ps, EngineConfig{.max_concurrent = 8, .num_blocks = 512}), alone);
  // Overlapped decode steps (issued before the last step's tokens are read) mark their rows too.
  EngineConfig overlapped{.max_concurrent = 8, .num_blocks = 512};
  overlapped.overlap_steps = EngineConfig::Overlap::On;
  EngineStats overlap_stats;
  EXPECT_EQ(run(*loaded().decode, ps, overlapped, nullptr, &overlap_stats), alone);
  EXPECT_GT(overlap_stats.overlapped_steps, 0u);
  // Prompt lookup: verify rows read the decode copies as plain decode rows do.
  auto ngram = spec::make_ngram_drafter({});
  EngineConfig config{.max_concurrent = 4, .num_blocks = 512};
  config.drafter = ngram.get();
  config.gates = false;  // verify on every step, also where it would not pay on this machine
  SpecUsage usage;
  EXPECT_EQ(run(*loaded().decode, ps, config, &usage), alone);
  EXPECT_GT(usage.num_accepted, 0);
  std::printf("--quantize-decode int4 with prompt lookup: %lld of %lld drafts accepted\n",
              static_cast<long long>(usage.num_accepted), static_cast<long long>(usage.num_drafted));
}

// A follow-up whose prompt is the first request's prompt and output: with the prefix cache it
// reuses the first prompt's blocks only (decode rows wrote the output's KV from the int4 copy),
// and gives the output it gives without the cache.
TEST(QuantizeDecodeEngine, PrefixCacheSharesPromptBlocksOnly) {
  const auto first = some_prompts()[0];
  EngineConfig config{.max_concurrent = 1, .num_blocks = 256};
  const auto out = run(*loaded().decode, {first}, config)[0];
  std::vector<int32_t> follow_up = first;
  follow_up.insert(follow_up.end(), out.begin(), out.end());
  EngineStats stats;
  const auto cached = run(*loaded().decode, {first, follow_up}, config, nullptr, &stats);
  config.prefix_cache = false;
  const auto uncached = run(*loaded().decode, {first, follow_up}, config);
  EXPECT_EQ(cached, uncached);
  const auto block = static_cast<uint64_t>(config.block_size);
  EXPECT_EQ(stats.prefix_cache_hit_tokens, first.size() / block * block) << "only the first prompt's full blocks";
}

}  // namespace
}  // namespace tachyon::engine
