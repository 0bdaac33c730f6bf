// Request parsing and validation of the four generation endpoints (src/server/parse_*.cpp).
#include <gtest/gtest.h>

#include "error_of.h"
#include "server/api_error.h"
#include "server/request.h"
#include "server/request_fields.h"

namespace tachyon::server {
namespace {

TEST(ChatRequest, ReadsMessagesSamplingAndStreamOptions) {
  const ParsedRequest r = parse_chat_request(R"({
    "model": "m", "messages": [{"role": "developer", "content": "be brief"},
                               {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
    "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7, "presence_penalty": 1,
    "frequency_penalty": -1, "logit_bias": {"12": -100, "3": 2.5}, "max_completion_tokens": 33,
    "stop": "END", "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 4,
    "response_format": {"type": "json_object"}})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "hi there");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.sampling.seed, 7u);
  ASSERT_EQ(r.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.sampling.logit_bias[0], (std::pair<int32_t, float>{12, -100.f}));
  EXPECT_EQ(r.max_tokens, 33);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 4);
  EXPECT_TRUE(r.json_object);
}

TEST(ChatRequest, AssistantToolCallsAndToolResultsBecomeTemplateMessages) {
  const ParsedRequest r = parse_chat_request(R"({"model": "m", "messages": [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "21C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "");
  // Arguments reach the template as an object, in the client's key order.
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(r.messages[2]["role"], "tool");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "c1");
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
}

TEST(ChatRequest, RejectsBadInputNamingTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"model": "m"})", "messages"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"messages": [{"role": "user", "content": "x"}]})", "model"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 2.5})", "temperature"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 0})", "n"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 129})", "n"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"})", "reasoning_effort"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}})",
       "stream_options"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "frobnicate": 1})", "frobnicate"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": ["a", ""]})", "stop"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content[0]"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(parse_chat_request, c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
  }
  EXPECT_EQ(error_of(parse_chat_request, "{\"model\": ").status(), 400);
  EXPECT_EQ(error_of(parse_chat_request, "[]").status(), 400);
}

TEST(CompletionRequest, PromptForms) {
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": "abc"})").prompt_text, "abc");
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": ["abc"]})").prompt_text, "abc");
  const ParsedRequest ids = parse_completion_request(R"({"model": "m", "prompt": [1, 2, 3], "echo": true, "logprobs": 2})");
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(ids.echo);
  EXPECT_EQ(ids.logprobs, 2);
  EXPECT_EQ(ids.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": [[4, 5]]})").prompt_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": "a", "suffix": "b"})").suffix, "b");
  EXPECT_EQ(error_of(parse_completion_request, R"({"model": "m", "prompt": "a", "suffix": "b", "echo": true})").param,
            "echo");
  EXPECT_EQ(error_of(parse_completion_request, R"({"model": "m", "prompt": ["a", "b"]})").param, "prompt");
  EXPECT_EQ(error_of(parse_completion_request, R"({"model": "m", "prompt": [-1]})").param, "prompt");
  EXPECT_EQ(error_of(parse_completion_request, R"({"model": "m", "prompt": ""})").param, "prompt");
  EXPECT_EQ(error_of(parse_completion_request, R"({"model": "m"})").param, "prompt");
}

TEST(ResponsesRequest, InputItemsBecomeMessages) {
  const ParsedRequest r = parse_responses_request(R"({"model": "m", "instructions": "sys", "input": [
    {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
    "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    "max_output_tokens": 9})");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "weather?");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(parse_responses_request(R"({"model": "m", "input": "hi"})").messages[0]["content"], "hi");
  EXPECT_EQ(parse_responses_request(R"({"model": "m", "input": "x", "previous_response_id": "r"})").previous_response_id,
            "r");
  EXPECT_EQ(error_of(parse_responses_request, R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})").param,
            "tools[0]");
}

TEST(ChoicesRequest, NAndBestOf) {
  EXPECT_EQ(parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 4})").n, 4);
  EXPECT_EQ(parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})").n, 1);
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": "a", "n": 3, "best_of": 3})").n, 3);
  const ApiError best_of = error_of(parse_completion_request, R"({"model": "m", "prompt": "a", "best_of": 2})");
  EXPECT_EQ(best_of.param, "best_of");
  EXPECT_NE(std::string(best_of.what()).find("best_of"), std::string::npos);
}

TEST(ResponsesRequest, LogprobsStoreAndReasoningEffort) {
  const ParsedRequest r = parse_responses_request(R"({"model": "m", "input": "x", "store": false,
    "include": ["message.output_text.logprobs"], "top_logprobs": 3, "reasoning": {"effort": "minimal"}})");
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_FALSE(r.store);
  EXPECT_EQ(r.reasoning_effort, "minimal");
  EXPECT_EQ(parse_responses_request(R"({"model": "m", "input": "x", "include": ["message.output_text.logprobs"]})")
                .logprobs,
            0);
  const ParsedRequest plain = parse_responses_request(R"({"model": "m", "input": "x"})");
  EXPECT_EQ(plain.logprobs, -1);
  EXPECT_TRUE(plain.store);
  EXPECT_EQ(error_of(parse_responses_request, R"({"model": "m", "input": "x", "include": ["frob"]})").param,
            "include[0]");
  EXPECT_EQ(error_of(parse_responses_request, R"({"model": "m", "input": "x", "reasoning": {"effort": "huge"}})").param,
            "reasoning.effort");
  EXPECT_EQ(parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                   "reasoning_effort": "low"})").reasoning_effort,
            "low");
}

TEST(MessagesRequest, AnthropicBlocksBecomeTemplateMessages) {
  const ParsedRequest r = parse_messages_request(R"({"model": "m", "max_tokens": 50,
    "system": [{"type": "text", "text": "be brief"}],
    "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""},
                                        {"type": "text", "text": "checking"},
                                        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "21C"}]},
                                   {"type": "text", "text": "thanks"}]}],
    "stop_sequences": ["\n\n"], "temperature": 0, "top_k": 5,
    "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "thinking": {"type": "disabled"}})");
  ASSERT_EQ(r.messages.size(), 5u);
  EXPECT_EQ(r.messages[0]["content"], "be brief");
  EXPECT_EQ(r.messages[2]["content"], "checking");
  EXPECT_EQ(r.messages[2]["reasoning_content"], "hmm");
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(r.messages[3]["role"], "tool");
  EXPECT_EQ(r.messages[3]["content"], "21C");
  EXPECT_EQ(r.messages[4]["content"], "thanks");
  EXPECT_EQ(r.max_tokens, 50);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_EQ(r.tools[0]["function"]["parameters"]["type"], "object");
}

TEST(MessagesRequest, CountTokensNeedsNoMaxTokensAndTakesNoSampling) {
  const ParsedRequest r = parse_count_tokens_request(R"({"model": "m", "system": "s",
      "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(r.messages.size(), 2u);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(error_of(parse_count_tokens_request, R"({"model": "m", "max_tokens": 3,
      "messages": [{"role": "user", "content": "x"}]})").param, "max_tokens");
}

TEST(MessagesRequest, PrefillAndErrors) {
  EXPECT_TRUE(parse_messages_request(R"({"model": "m", "max_tokens": 5, "messages": [
      {"role": "user", "content": "x"}, {"role": "assistant", "content": "def"}]})")
                  .continue_final_message);
  EXPECT_EQ(error_of(parse_messages_request, R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})").param,
            "max_tokens");
  EXPECT_EQ(error_of(parse_messages_request, R"({"model": "m", "max_tokens": 5, "messages": []})").param, "messages");
  EXPECT_EQ(error_of(parse_messages_request, R"({"model": "m", "max_tokens": 5, "temperature": 1.5,
      "messages": [{"role": "user", "content": "x"}]})").param, "temperature");
  EXPECT_EQ(error_of(parse_messages_request, R"({"model": "m", "max_tokens": 5, "messages": [
      {"role": "user", "content": [{"type": "image", "source": {}}]}]})").param, "messages[0].content[0]");
  EXPECT_EQ(error_of(parse_messages_request, R"({"model": "m", "max_tokens": 5, "foo": 1,
      "messages": [{"role": "user", "content": "x"}]})").param, "foo");
}

}  // namespace
}  // namespace tachyon::server

namespace tachyon::server {
namespace {

TEST(RequestBody, NestingDepthIsBoundedBeforeParsing) {
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": "[[[{{{"}]})"), 3u);
  EXPECT_EQ(json_nesting_depth(R"("\"[")"), 0u);
  std::string deep = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function",
      "function": {"name": "f", "parameters": )";
  for (int i = 0; i < 100; ++i) deep += R"({"a": )";
  deep += "1" + std::string(100, '}') + "}}]}";
  const ApiError e = error_of(parse_chat_request, deep);
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("deeper"), std::string::npos);
  // Unbalanced and truncated input is measured without reading past the end.
  EXPECT_EQ(json_nesting_depth("[[[[\"\\"), 4u);
}

TEST(RequestBody, ArrayLengthIsBoundedBeforeParsing) {
  EXPECT_EQ(json_longest_array(R"({"a": [1, 2, [3, 4, 5, {"b": "x,y,z,[1,2]"}]], "c": []})"), 4u);
  EXPECT_EQ(json_longest_array(R"([ "a" , "b" ])"), 2u);
  EXPECT_EQ(json_longest_array(R"({"a": [ ]})"), 0u);
  EXPECT_EQ(json_longest_array("[1,2,3"), 3u);  // truncated input is measured too
  // A prompt of token ids at the limit is accepted; one more id is a 400 naming the limit.
  auto prompt_of = [](size_t n) {
    std::string ids = "1";
    ids.reserve(2 * n);
    for (size_t i = 1; i < n; ++i) ids += ",1";
    return R"({"model": "m", "prompt": [)" + ids + "]}";
  };
  EXPECT_EQ(parse_completion_request(prompt_of(kMaxJsonArrayItems)).prompt_ids->size(), kMaxJsonArrayItems);
  const ApiError e = error_of(parse_completion_request, prompt_of(kMaxJsonArrayItems + 1));
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("more than 262144 items"), std::string::npos) << e.what();
  std::string many_messages = R"({"model": "m", "messages": [)";
  for (size_t i = 0; i <= kMaxJsonArrayItems; ++i) many_messages += R"({"role":"user","content":"x"},)";
  many_messages.back() = ']';
  many_messages += "}";
  EXPECT_EQ(error_of(parse_chat_request, many_messages).status(), 400);
}

}  // namespace
}  // namespace tachyon::server

namespace tachyon::server {
namespace {

TEST(ChatRequest, PflashOverrideIsReadAndValidated) {
  const auto r = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"pflash":"always"})");
  EXPECT_EQ(r.pflash, engine::PflashMode::Always);
  EXPECT_FALSE(parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})").pflash.has_value());
  EXPECT_EQ(parse_completion_request(R"({"model":"m","prompt":"x","pflash":"off"})").pflash, engine::PflashMode::Off);
  EXPECT_EQ(parse_responses_request(R"({"model":"m","input":"hi","pflash":"auto"})").pflash, engine::PflashMode::Auto);
  EXPECT_EQ(parse_messages_request(
                R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"pflash":"always"})")
                .pflash,
            engine::PflashMode::Always);
  const ApiError bad =
      error_of(parse_chat_request, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"pflash":"maybe"})");
  EXPECT_EQ(bad.status(), 400);
  EXPECT_EQ(bad.param, "pflash");
  EXPECT_NE(std::string(bad.what()).find("maybe"), std::string::npos) << bad.what();
  EXPECT_EQ(error_of(parse_chat_request, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"pflash":true})")
                .status(),
            400);
}

TEST(ChatRequest, SpeculativeOverrideIsReadAndValidated) {
  const auto r = parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"speculative":{"enabled":false,"num_speculative_tokens":3}})");
  EXPECT_EQ(r.speculate, false);
  EXPECT_EQ(r.num_speculative_tokens, 3);
  const auto c = parse_completion_request(R"({"model":"m","prompt":"x","speculative":{"num_speculative_tokens":2}})");
  EXPECT_FALSE(c.speculate.has_value());
  EXPECT_EQ(c.num_speculative_tokens, 2);
  const ApiError unknown =
      error_of(parse_chat_request, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"speculative":{"k":2}})");
  EXPECT_EQ(unknown.status(), 400);
  EXPECT_NE(std::string(unknown.what()).find("speculative.k"), std::string::npos) << unknown.what();
  const ApiError range = error_of(
      parse_chat_request, R"({"model":"m","messages":[{"role":"user","content":"hi"}],"speculative":{"num_speculative_tokens":99}})");
  EXPECT_EQ(range.status(), 400);
  EXPECT_NE(std::string(range.what()).find("num_speculative_tokens"), std::string::npos) << range.what();
  // The same extension in the Responses and Anthropic Messages bodies.
  const auto resp = parse_responses_request(R"({"model":"m","input":"hi","speculative":{"enabled":false}})");
  EXPECT_EQ(resp.speculate, false);
  const auto msg = parse_messages_request(
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"speculative":{"num_speculative_tokens":6}})");
  EXPECT_EQ(msg.num_speculative_tokens, 6);
  EXPECT_EQ(error_of(parse_messages_request,
                     R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"speculative":{"k":1}})")
                .status(),
            400);
}

}  // namespace
}  // namespace tachyon::server

namespace tachyon::server {
namespace {

TEST(ToolChoice, ForcedChoicesAreReadAndCheckedAgainstTools) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}},
                                         {"type": "function", "function": {"name": "g"}}])";
  const std::string msgs = R"("model": "m", "messages": [{"role": "user", "content": "x"}])";
  ParsedRequest r = parse_chat_request("{" + msgs + ", " + tools + R"(, "tool_choice": "required"})");
  EXPECT_EQ(r.tool_choice, ToolChoice::Required);
  r = parse_chat_request("{" + msgs + ", " + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "g"}}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::Named);
  EXPECT_EQ(r.tool_name, "g");
  EXPECT_EQ(error_of(parse_chat_request, "{" + msgs + ", " + tools +
                                             R"(, "tool_choice": {"type": "function", "function": {"name": "h"}}})")
                .param,
            "tool_choice");
  EXPECT_EQ(error_of(parse_chat_request, "{" + msgs + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})")
                .status(),
            400);
  // Responses: the flat {"type": "function", "name": X} shape.
  r = parse_responses_request(R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f"}],
                                  "tool_choice": {"type": "function", "name": "f"}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::Named);
  EXPECT_EQ(r.tool_name, "f");
  // Anthropic: any and tool.
  const std::string anth = R"("model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                              "tools": [{"name": "f", "input_schema": {"type": "object"}}])";
  EXPECT_EQ(parse_messages_request("{" + anth + R"(, "tool_choice": {"type": "any"}})").tool_choice, ToolChoice::Required);
  r = parse_messages_request("{" + anth + R"(, "tool_choice": {"type": "tool", "name": "f"}})");
  EXPECT_EQ(r.tool_choice, ToolChoice::Named);
  EXPECT_EQ(r.tool_name, "f");
  EXPECT_EQ(error_of(parse_messages_request, "{" + anth + R"(, "tool_choice": {"type": "tool", "name": "z"}})").status(),
            400);
}

}  // namespace
}  // namespace tachyon::server
