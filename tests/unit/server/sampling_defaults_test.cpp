// generation_config.json defaults meet each API's request (src/server/sampling_defaults.cpp):
// a field the request leaves out takes the model's value, one it sets wins.
#include <gtest/gtest.h>

#include "server/request.h"
#include "server/sampling_defaults.h"

namespace tachyon::server {
namespace {

// Qwen3-8B's generation_config.json, plus the two fields it does not set.
const SamplingDefaults kQwen3{.temperature = 0.6f, .top_p = 0.95f, .min_p = 0.05f, .repetition_penalty = 1.1f,
                              .top_k = 20};

TEST(SamplingDefaults, FillTheFieldsARequestLeavesOut) {
  const engine::SamplingParams p = apply_sampling_defaults(
      parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": 3})"), kQwen3);
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_EQ(p.seed, 3u);
}

TEST(SamplingDefaults, TheRequestsOwnValuesWinInEveryApi) {
  // Greedy by request (temperature 0) must stay greedy whatever the model's default.
  const engine::SamplingParams chat = apply_sampling_defaults(
      parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                             "top_p": 1, "top_k": -1, "min_p": 0, "repetition_penalty": 1})"),
      kQwen3);
  EXPECT_FLOAT_EQ(chat.temperature, 0.f);
  EXPECT_FLOAT_EQ(chat.top_p, 1.f);
  EXPECT_EQ(chat.top_k, 0);
  EXPECT_FLOAT_EQ(chat.min_p, 0.f);
  EXPECT_FLOAT_EQ(chat.repetition_penalty, 1.f);

  const engine::SamplingParams completion =
      apply_sampling_defaults(parse_completion_request(R"({"model": "m", "prompt": "x", "temperature": 1.5})"), kQwen3);
  EXPECT_FLOAT_EQ(completion.temperature, 1.5f);
  EXPECT_FLOAT_EQ(completion.top_p, 0.95f);

  const engine::SamplingParams responses =
      apply_sampling_defaults(parse_responses_request(R"({"model": "m", "input": "x", "top_p": 0.5})"), kQwen3);
  EXPECT_FLOAT_EQ(responses.top_p, 0.5f);
  EXPECT_FLOAT_EQ(responses.temperature, 0.6f);

  const engine::SamplingParams messages = apply_sampling_defaults(
      parse_messages_request(R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}],
                                 "top_k": 5})"),
      kQwen3);
  EXPECT_EQ(messages.top_k, 5);
  EXPECT_FLOAT_EQ(messages.temperature, 0.6f);
  EXPECT_FLOAT_EQ(messages.repetition_penalty, 1.1f);
}

TEST(SamplingDefaults, NoDefaultsLeaveTheEnginesNeutralValues) {
  const engine::SamplingParams p =
      apply_sampling_defaults(parse_completion_request(R"({"model": "m", "prompt": "x"})"), SamplingDefaults{});
  const engine::SamplingParams neutral;
  EXPECT_FLOAT_EQ(p.temperature, neutral.temperature);
  EXPECT_FLOAT_EQ(p.top_p, neutral.top_p);
  EXPECT_EQ(p.top_k, neutral.top_k);
  EXPECT_FLOAT_EQ(p.min_p, neutral.min_p);
  EXPECT_FLOAT_EQ(p.repetition_penalty, neutral.repetition_penalty);
  EXPECT_TRUE(SamplingDefaults{}.empty());
  EXPECT_FALSE(kQwen3.empty());
}

}  // namespace
}  // namespace tachyon::server
