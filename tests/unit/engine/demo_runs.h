// The demo model loaded once per test binary, the prompt set the speculation tests share, and
// helpers that run greedy requests through an Engine to their end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/json.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::engine::testing_demo {

inline const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

struct Demo {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model = model::load_model(kDemo, *backend);
};
inline Demo& demo() {
  static Demo d;
  return d;
}

// 50 prompts: real code/chat token ids from the demo's golden file, spliced with random ids
// and repeated spans so that prompt lookup finds matches on some and none on others.
inline std::vector<std::vector<int32_t>> prompts() {
  const auto golden = io::Checkpoint::open_file(kDemo + "/golden.safetensors");
  auto ids = [&](const std::string& name) {
    const auto& t = golden.get(name);
    const auto* p = static_cast<const int64_t*>(t.data);
    return std::vector<int32_t>(p, p + t.num_elements());
  };
  const auto code = ids("code.input_ids"), chat = ids("chat.input_ids");
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 50; ++i) {
    std::vector<int32_t> p = (i % 2) ? chat : code;
    for (int j = 0; j < i % 7; ++j) p.push_back(static_cast<int32_t>(rng() % 8000));
    if (i % 3 == 0) p.insert(p.end(), p.begin(), p.begin() + static_cast<long>(p.size() / 2));  // repetition
    out.push_back(p);
  }
  return out;
}

// Runs every prompt greedily through a fresh engine (max_concurrent 1: one at a time, else all
// submitted at once) and returns each one's generated tokens. Adds the requests' speculation
// usage to `usage_total`, copies the engine's stats to `stats` and each request's usage to
// `usages` when given. `sampled` (when given) replaces greedy decoding: prompt i is drawn with
// those parameters and the seed sampled->seed + i.
inline std::vector<std::vector<int32_t>> run_all(const std::vector<std::vector<int32_t>>& ps, EngineConfig config,
                                                 int32_t max_tokens, SpecUsage* usage_total = nullptr,
                                                 EngineStats* stats = nullptr, float repetition_penalty = 1.f,
                                                 std::vector<SpecUsage>* usages = nullptr,
                                                 const SamplingParams* sampled = nullptr) {
  if (usages) usages->assign(ps.size(), {});
  Engine engine(*demo().model, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<int32_t>> outs(ps.size());
  auto collect = [&](size_t i) {
    for (;;) {
      auto o = streams[i]->next(std::chrono::seconds(300));
      EXPECT_TRUE(o.has_value());
      if (!o) return;
      outs[i].insert(outs[i].end(), o->tokens.begin(), o->tokens.end());
      if (o->finish != FinishReason::None) {
        if (usages) (*usages)[i] = o->spec;
        if (usage_total) {
          usage_total->num_drafted += o->spec.num_drafted;
          usage_total->num_accepted += o->spec.num_accepted;
          usage_total->num_steps += o->spec.num_steps;
        }
        return;
      }
    }
  };
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest r;
    r.prompt = ps[i];
    r.sampling.temperature = 0;
    r.sampling.repetition_penalty = repetition_penalty;
    if (sampled) {
      r.sampling = *sampled;
      r.sampling.seed = sampled->seed.value_or(0) + i;
    }
    r.max_tokens = max_tokens;
    streams.push_back(engine.submit(r));
    if (config.max_concurrent == 1) collect(i);  // alone: one at a time
  }
  if (config.max_concurrent > 1)
    for (size_t i = 0; i < ps.size(); ++i) collect(i);
  if (stats) *stats = engine.stats();
  return outs;
}

// One greedy request through `engine` to its end: its speculation usage (its tokens appended
// to `tokens` when given).
inline SpecUsage run_one(Engine& engine, std::vector<int32_t> prompt, int32_t max_tokens,
                         std::vector<int32_t>* tokens = nullptr) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = 0;
  request.max_tokens = max_tokens;
  auto stream = engine.submit(request);
  for (;;) {
    auto out = stream->next(std::chrono::seconds(300));
    if (!out) throw std::runtime_error("the engine stalled");
    if (tokens) tokens->insert(tokens->end(), out->tokens.begin(), out->tokens.end());
    if (out->finish != FinishReason::None) return out->spec;
  }
}

// The plain engine's greedy outputs for prompts(), stored in tests/fixtures/spec/demo_greedy.json
// (written by spec_equivalence_tests, see spec_equivalence_test.cpp): `case_name` "greedy" is
// every prompt at 128 tokens, "penalty" the first 12 at 64 tokens with repetition penalty 1.3.
// Greedy decoding to n tokens gives the first n tokens of a longer run, so `max_tokens` may cut.
inline const std::string kGoldenPath = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/spec/demo_greedy.json";
inline std::vector<std::vector<int32_t>> stored_plain_outputs(const std::string& case_name, size_t num_prompts,
                                                              int32_t max_tokens) {
  const Json golden = parse_json(read_file(kGoldenPath), kGoldenPath);
  const Json& entry = golden.at(case_name);
  if (max_tokens > entry.at("max_tokens").get<int32_t>())
    throw std::runtime_error("the stored outputs are shorter than " + std::to_string(max_tokens) + " tokens");
  auto outs = entry.at("outputs").get<std::vector<std::vector<int32_t>>>();
  if (outs.size() < num_prompts) throw std::runtime_error("the stored outputs cover fewer prompts");
  outs.resize(num_prompts);
  for (auto& o : outs)
    if (static_cast<int32_t>(o.size()) > max_tokens) o.resize(static_cast<size_t>(max_tokens));
  return outs;
}

}  // namespace tachyon::engine::testing_demo
