// Ollama's /api/chat and /api/generate bodies (src/server/parse_ollama.cpp), with the fields
// and examples of Ollama's docs/api.md.
#include <gtest/gtest.h>

#include "error_of.h"
#include "server/api_error.h"
#include "server/ollama_request.h"
#include "server/request_fields.h"
#include "server/sampling_defaults.h"

namespace tachyon::server {
namespace {

ApiError chat_error(const std::string& body) { return error_of(parse_ollama_chat_request, body); }
ApiError generate_error(const std::string& body) { return error_of(parse_ollama_generate_request, body); }

TEST(OllamaChat, StreamsByDefaultAndMapsTheOptions) {
  const OllamaRequest o = parse_ollama_chat_request(R"({
    "model": "llama3.2", "messages": [{"role": "user", "content": "why is the sky blue?"}],
    "options": {"num_predict": 100, "temperature": 0.8, "top_k": 20, "top_p": 0.9, "min_p": 0.05,
                "repeat_penalty": 1.2, "presence_penalty": 1.5, "frequency_penalty": 1.0, "seed": 42,
                "stop": ["\n", "user:"], "num_ctx": 1024, "repeat_last_n": 33, "num_gpu": 1, "num_thread": 8,
                "mirostat": 0, "typical_p": 1, "use_mmap": true}})");
  const ParsedRequest& r = o.request;
  EXPECT_FALSE(o.load_only);
  EXPECT_EQ(r.endpoint, Endpoint::OllamaChat);
  EXPECT_EQ(r.model, "llama3.2");
  EXPECT_TRUE(r.stream);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "why is the sky blue?");
  EXPECT_EQ(r.max_tokens, 100);
  EXPECT_EQ(r.max_context, 1024);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, 1.0f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n", "user:"}));
  EXPECT_TRUE(r.template_kwargs.empty());
}

TEST(OllamaChat, ModelDefaultsFillTheOptionsLeftOut) {
  const SamplingDefaults qwen3{.temperature = 0.6f, .top_p = 0.95f, .repetition_penalty = 1.1f, .top_k = 20};
  const engine::SamplingParams p = apply_sampling_defaults(
      parse_ollama_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                    "options": {"temperature": 0, "repeat_penalty": 1}})")
          .request,
      qwen3);
  EXPECT_FLOAT_EQ(p.temperature, 0.f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.f);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 20);
}

TEST(OllamaChat, ToolCallsWithObjectArgumentsAndToolResults) {
  const OllamaRequest o = parse_ollama_chat_request(R"({
    "model": "m", "stream": false,
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "messages": [{"role": "user", "content": "weather in Tokyo?"},
                 {"role": "assistant", "content": "", "thinking": "look it up",
                  "tool_calls": [{"function": {"index": 0, "name": "get_weather", "arguments": {"city": "Tokyo"}}}]},
                 {"role": "tool", "content": "11 degrees", "tool_name": "get_weather"}]})");
  const ParsedRequest& r = o.request;
  EXPECT_FALSE(r.stream);
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.tools[0]["function"]["name"], "get_weather");
  ASSERT_EQ(r.messages.size(), 3u);
  const OrderedJson& call = r.messages[1]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], (OrderedJson{{"city", "Tokyo"}}));
  EXPECT_EQ(r.messages[1]["reasoning_content"], "look it up");
  EXPECT_EQ(r.messages[2]["role"], "tool");
  EXPECT_EQ(r.messages[2]["name"], "get_weather");
  EXPECT_FALSE(r.continue_final_message);
}

TEST(OllamaChat, ThinkFormatAndLogprobs) {
  const OllamaRequest off = parse_ollama_chat_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "think": false, "format": "json",
          "logprobs": true, "top_logprobs": 3, "keep_alive": "5m"})");
  EXPECT_EQ(off.think, false);
  EXPECT_EQ(off.request.template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(off.request.json_object);
  EXPECT_EQ(off.request.logprobs, 3);
  EXPECT_FALSE(off.unload);

  const OllamaRequest high = parse_ollama_chat_request(
      R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "think": "max",
          "format": {"type": "object", "properties": {"age": {"type": "integer"}}}})");
  EXPECT_EQ(high.think, true);
  EXPECT_EQ(high.request.template_kwargs["enable_thinking"], true);
  EXPECT_EQ(high.request.template_kwargs["reasoning_effort"], "high");
  EXPECT_TRUE(high.request.output_constraint);  // the schema itself is enforced

  const OllamaRequest unset = parse_ollama_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_FALSE(unset.think.has_value());
  EXPECT_EQ(unset.request.logprobs, -1);
}

TEST(OllamaChat, NoMessagesLoadsAndKeepAliveZeroUnloads) {
  const OllamaRequest load = parse_ollama_chat_request(R"({"model": "m", "messages": []})");
  EXPECT_TRUE(load.load_only);
  EXPECT_FALSE(load.unload);
  EXPECT_TRUE(parse_ollama_chat_request(R"({"model": "m"})").load_only);
  for (const char* keep_alive : {"0", "\"0\"", "\"0s\"", "\"0m\""})
    EXPECT_TRUE(parse_ollama_chat_request(fmt::format(R"({{"model": "m", "keep_alive": {}}})", keep_alive)).unload)
        << keep_alive;
  for (const char* keep_alive : {"-1", "\"5m\"", "\"0.5h\"", "300"})
    EXPECT_FALSE(parse_ollama_chat_request(fmt::format(R"({{"model": "m", "keep_alive": {}}})", keep_alive)).unload)
        << keep_alive;
}

TEST(OllamaChat, AFinalAssistantMessageIsContinued) {
  const OllamaRequest o = parse_ollama_chat_request(
      R"({"model": "m", "messages": [{"role": "USER", "content": "x"}, {"role": "assistant", "content": "Sure,"}]})");
  EXPECT_EQ(o.request.messages[0]["role"], "user");
  EXPECT_TRUE(o.request.continue_final_message);
}

TEST(OllamaChat, RefusesWhatItCannotHonour) {
  const auto base = [](const std::string& extra) {
    return R"({"model": "m", "messages": [{"role": "user", "content": "x"}])" + extra + "}";
  };
  EXPECT_EQ(chat_error(base(R"(, "options": {"mirostat": 2})")).param, "options.mirostat");
  EXPECT_EQ(chat_error(base(R"(, "options": {"typical_p": 0.7})")).param, "options.typical_p");
  EXPECT_EQ(chat_error(base(R"(, "options": {"temperature": "hot"})")).param, "options.temperature");
  EXPECT_EQ(chat_error(base(R"(, "options": {"top_p": 0})")).param, "options.top_p");
  EXPECT_EQ(chat_error(base(R"(, "options": {"num_predict": 0})")).param, "options.num_predict");
  EXPECT_EQ(chat_error(base(R"(, "options": {"num_ctx": 0})")).param, "options.num_ctx");
  EXPECT_EQ(chat_error(base(R"(, "options": {"frobnicate": 1})")).param, "options.frobnicate");
  EXPECT_EQ(chat_error(base(R"(, "format": "yaml")")).param, "format");
  EXPECT_EQ(chat_error(base(R"(, "format": {"type": "integer", "multipleOf": 2})")).param, "format");
  EXPECT_EQ(chat_error(base(R"(, "think": "very")")).param, "think");
  EXPECT_EQ(chat_error(base(R"(, "keep_alive": true)")).param, "keep_alive");
  EXPECT_EQ(chat_error(base(R"(, "colour": 1)")).param, "colour");
  EXPECT_EQ(chat_error(R"({"messages": []})").param, "model");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": "hi"})").param, "messages");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})").param,
            "messages[0].images");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"function":
                          {"name": "f", "arguments": [1]}}]}]})")
                .param,
            "messages[0].tool_calls[0].function");
  EXPECT_EQ(chat_error("{\"model\": ").status(), 400);
}

TEST(OllamaGenerate, PromptSystemRawAndLoad) {
  const OllamaRequest o = parse_ollama_generate_request(
      R"({"model": "m", "prompt": "Why is the sky blue?", "system": "Be terse.", "stream": false,
          "options": {"seed": 123, "stop": "\n\n"}})");
  EXPECT_EQ(o.request.endpoint, Endpoint::OllamaGenerate);
  EXPECT_FALSE(o.request.stream);
  ASSERT_EQ(o.request.messages.size(), 2u);
  EXPECT_EQ(o.request.messages[0], (OrderedJson{{"role", "system"}, {"content", "Be terse."}}));
  EXPECT_EQ(o.request.messages[1], (OrderedJson{{"role", "user"}, {"content", "Why is the sky blue?"}}));
  EXPECT_EQ(o.request.stop, (std::vector<std::string>{"\n\n"}));

  const OllamaRequest raw = parse_ollama_generate_request(R"({"model": "m", "prompt": "[INST] hi [/INST]", "raw": true})");
  EXPECT_TRUE(raw.request.messages.is_null());
  EXPECT_EQ(raw.request.prompt_text, "[INST] hi [/INST]");

  EXPECT_TRUE(parse_ollama_generate_request(R"({"model": "m"})").load_only);
  const OllamaRequest unload = parse_ollama_generate_request(R"({"model": "m", "prompt": "", "keep_alive": 0})");
  EXPECT_TRUE(unload.load_only && unload.unload);
  // Empty values of the refused fields are what some clients always send.
  EXPECT_FALSE(parse_ollama_generate_request(R"({"model": "m", "prompt": "x", "suffix": "", "template": "",
                                                "context": [], "images": []})")
                   .load_only);
}

TEST(OllamaGenerate, RefusesSuffixTemplateContextAndImages) {
  EXPECT_EQ(generate_error(R"({"model": "m", "prompt": "x", "suffix": "y"})").param, "suffix");
  EXPECT_EQ(generate_error(R"({"model": "m", "prompt": "x", "template": "{{ .Prompt }}"})").param, "template");
  EXPECT_EQ(generate_error(R"({"model": "m", "prompt": "x", "context": [1, 2, 3]})").param, "context");
  EXPECT_EQ(generate_error(R"({"model": "m", "prompt": "x", "images": ["aGk="]})").param, "images");
  EXPECT_EQ(generate_error(R"({"model": "m", "prompt": "x", "tools": []})").param, "tools");
}

TEST(OllamaModelName, ModelOrTheOlderName) {
  EXPECT_EQ(read_ollama_model_name(OrderedJson{{"model", "a"}}), "a");
  EXPECT_EQ(read_ollama_model_name(OrderedJson{{"name", "b"}}), "b");
  EXPECT_THROW(read_ollama_model_name(OrderedJson::object()), ApiError);
}

}  // namespace
}  // namespace tachyon::server
