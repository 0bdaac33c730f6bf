// Output parsers per family. Every case is checked one-shot, byte by byte, and split into
// two and three pieces at every possible boundary: the concatenated deltas must equal the
// one-shot result (so no partial tag or JSON fragment ever reached a content delta, since
// deltas cannot be taken back), every delta must be valid UTF-8, and tool calls must come
// out complete and once.
#include "chat/parsers/output_parser.h"

#include <gtest/gtest.h>

#include "base/json.h"
#include "chat/chat_template.h"

namespace tachyon::chat {
namespace {

struct Expected {
  std::string content;
  std::string reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments JSON
};

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

void expect_message(const ParseDelta& got, const Expected& want, const std::string& how) {
  EXPECT_EQ(got.content, want.content) << how;
  EXPECT_EQ(got.reasoning_content, want.reasoning) << how;
  ASSERT_EQ(got.tool_calls.size(), want.calls.size()) << how;
  for (size_t i = 0; i < want.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, want.calls[i].first) << how;
    EXPECT_EQ(Json::parse(got.tool_calls[i].arguments), Json::parse(want.calls[i].second)) << how;
    EXPECT_EQ(got.tool_calls[i].id.rfind("call_", 0), 0u) << how;
  }
}

ParseDelta run_pieces(const ParserOptions& options, const std::vector<std::string_view>& pieces) {
  auto parser = make_output_parser(options);
  ParseDelta all;
  for (auto piece : pieces) {
    ParseDelta d = parser->feed(piece);
    EXPECT_TRUE(valid_utf8(d.content) && valid_utf8(d.reasoning_content)) << "delta splits a character";
    all.append(std::move(d));
  }
  all.append(parser->finish());
  return all;
}

void check_streaming(const ParserOptions& options, const std::string& text, const Expected& want) {
  ParsedMessage m = parse_output(options, text);
  expect_message(ParseDelta{m.content, m.reasoning_content, m.tool_calls}, want, "one shot");
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
  expect_message(run_pieces(options, bytes), want, "byte by byte");
  std::string_view t = text;
  for (size_t i = 0; i <= t.size(); ++i) {
    expect_message(run_pieces(options, {t.substr(0, i), t.substr(i)}), want, "split at " + std::to_string(i));
    if (::testing::Test::HasFailure()) return;
  }
  for (size_t i = 0; i <= t.size(); i += 3)
    for (size_t j = i; j <= t.size(); ++j) {
      expect_message(run_pieces(options, {t.substr(0, i), t.substr(i, j - i), t.substr(j)}), want,
                     "split at " + std::to_string(i) + "," + std::to_string(j));
      if (::testing::Test::HasFailure()) return;
    }
}

ParserOptions family(ParserFamily f, bool starts_in_reasoning = false) {
  ParserOptions o;
  o.family = f;
  o.reasoning = f != ParserFamily::kHarmony;
  o.starts_in_reasoning = starts_in_reasoning;
  return o;
}

TEST(chat_hermes_parser, ReasoningContentAndTwoCalls) {
  check_streaming(family(ParserFamily::kHermes),
                  "<think>\nThe user wants weather 東京.\n</think>\n\nLet me check 🎉.\n<tool_call>\n"
                  "{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>\n"
                  "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
                  {"Let me check 🎉.", "The user wants weather 東京.",
                   {{"get_weather", R"({"location": "Paris", "unit": "c"})"}, {"get_time", "{}"}}});
}

TEST(chat_hermes_parser, PlainTextWithAngleBracketsStaysContent) {
  check_streaming(family(ParserFamily::kHermes), "a < b and <tool> is not <tool_call or <think> later\n",
                  {"a < b and <tool> is not <tool_call or <think> later\n", "", {}});
}

TEST(chat_hermes_parser, InvalidCallJsonIsReturnedAsContent) {
  check_streaming(family(ParserFamily::kHermes), "x<tool_call>{\"name\": broken}</tool_call>y",
                  {"x<tool_call>{\"name\": broken}</tool_call>y", "", {}});
}

TEST(chat_hermes_parser, UnclosedCallAtEndStillParses) {
  check_streaming(family(ParserFamily::kHermes), "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n",
                  {"", "", {{"f", R"({"a": [1, 2]})"}}});
}

TEST(chat_hermes_parser, PromptOpenedThink) {
  check_streaming(family(ParserFamily::kHermes, true), "\nstep 1\nstep 2\n\n</think>\n\nAnswer: 42",
                  {"Answer: 42", "step 1\nstep 2", {}});
  check_streaming(family(ParserFamily::kHermes, true), "still thinking <b", {"", "still thinking <b", {}});
}

TEST(chat_hermes_parser, ReasoningOffKeepsThinkTags) {
  ParserOptions o = family(ParserFamily::kHermes);
  o.reasoning = false;
  check_streaming(o, "<think>x</think>y", {"<think>x</think>y", "", {}});
}

TEST(chat_llama3_parser, JsonCall) {
  check_streaming(family(ParserFamily::kLlama3),
                  "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
                  {"", "", {{"get_weather", R"({"location": "Paris"})"}}});
}

TEST(chat_llama3_parser, PythonTagJsonCallsSeparatedBySemicolons) {
  check_streaming(family(ParserFamily::kLlama3),
                  "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}<|eom_id|>",
                  {"", "", {{"a", R"({"x": 1})"}, {"b", "{}"}}});
}

TEST(chat_llama3_parser, BuiltinToolAndCode) {
  check_streaming(family(ParserFamily::kLlama3), "<|python_tag|>brave_search.call(query=\"weather in Paris\")",
                  {"", "", {{"brave_search", R"({"query": "weather in Paris"})"}}});
  check_streaming(family(ParserFamily::kLlama3), "<|python_tag|>print(2 + 2)",
                  {"", "", {{"python", R"j({"code": "print(2 + 2)"})j"}}});
}

TEST(chat_llama3_parser, TextAndNonCallJsonStayContent) {
  check_streaming(family(ParserFamily::kLlama3), "The answer is {42}.", {"The answer is {42}.", "", {}});
  check_streaming(family(ParserFamily::kLlama3), "{\"answer\": 42}", {"{\"answer\": 42}", "", {}});
}

TEST(chat_deepseek_v3_parser, TwoCallsInSpecialTokens) {
  check_streaming(family(ParserFamily::kDeepseekV3),
                  "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                  "{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
                  "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
                  {"Let me check.", "", {{"get_weather", R"({"location": "Paris"})"}, {"get_time", "{}"}}});
}

TEST(chat_deepseek_v3_parser, V31StyleAndPlainText) {
  check_streaming(family(ParserFamily::kDeepseekV3),
                  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"x\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                  {"", "", {{"search", R"({"q": "x"})"}}});
  check_streaming(family(ParserFamily::kDeepseekV3), "plain ｜ text <｜", {"plain ｜ text <｜", "", {}});
}

TEST(chat_gemma_parser, ToolCodeBlock) {
  check_streaming(family(ParserFamily::kGemma),
                  "Sure.\n```tool_code\nget_weather(location=\"Paris\", days=3, metric=True, tags=['a', \"b\"])\n```\n",
                  {"Sure.", "", {{"get_weather", R"({"location": "Paris", "days": 3, "metric": true, "tags": ["a", "b"]})"}}});
}

TEST(chat_gemma_parser, OtherCodeBlocksStayContent) {
  check_streaming(family(ParserFamily::kGemma), "```python\nprint(1)\n```", {"```python\nprint(1)\n```", "", {}});
  check_streaming(family(ParserFamily::kGemma), "```tool_code\nnot a call(\n```", {"```tool_code\nnot a call(\n```", "", {}});
}

TEST(chat_harmony_parser, AnalysisThenToolCall) {
  check_streaming(family(ParserFamily::kHarmony),
                  "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                  "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>",
                  {"", "Need the weather.", {{"get_weather", R"({"location": "Paris"})"}}});
}

TEST(chat_harmony_parser, AnalysisThenFinal) {
  check_streaming(family(ParserFamily::kHarmony),
                  "<|channel|>analysis<|message|>2+2 is 4 <easy>.<|end|><|start|>assistant<|channel|>final<|message|>"
                  "It is 4 — 四.<|return|>",
                  {"It is 4 — 四.", "2+2 is 4 <easy>.", {}});
}

TEST(chat_harmony_parser, RecipientBeforeChannelAndPreamble) {
  check_streaming(family(ParserFamily::kHarmony),
                  "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.lookup"
                  "<|channel|>commentary json<|message|>{\"id\": 7}<|call|>",
                  {"Checking.", "", {{"lookup", R"({"id": 7})"}}});
}

// Render an assistant turn with the real template, then parse what the template wrote:
// the parser must recover the same calls (the format models are trained on).
void check_round_trip(const std::string& template_name, ParserFamily f, const std::string& prefix_end) {
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/chat_templates/";
  auto tpl = ChatTemplate::from_string(read_file(dir + template_name + ".jinja"), "<s>", "</s>");
  auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"Paris\"}"}},
      {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]}])");
  if (template_name == "qwen3") messages[1]["content"] = "";
  std::string prompt = tpl.render(messages, nullptr, false, {{"current_date", "2025-06-28"}});
  size_t at = prompt.rfind(prefix_end);
  ASSERT_NE(at, std::string::npos) << prompt;
  std::string generated = prompt.substr(at + prefix_end.size());
  ParsedMessage m = parse_output(detect_parser(tpl.source()), generated);
  EXPECT_EQ(detect_parser(tpl.source()).family, f);
  ASSERT_EQ(m.tool_calls.size(), 2u) << generated;
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(m.tool_calls[0].arguments), Json::parse(R"({"location": "Paris"})"));
  EXPECT_EQ(m.tool_calls[1].name, "get_time");
}

TEST(chat_parser_round_trip, Qwen3Template) { check_round_trip("qwen3", ParserFamily::kHermes, "<|im_start|>assistant\n"); }
TEST(chat_parser_round_trip, DeepseekV3Template) {
  check_round_trip("deepseek_v3", ParserFamily::kDeepseekV3, "<｜Assistant｜>");
}
TEST(chat_parser_round_trip, GptOssTemplate) {
  check_round_trip("gpt_oss", ParserFamily::kHarmony, "<|end|><|start|>assistant");
}

TEST(chat_parser_detection, FromTemplatesAndModelType) {
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/chat_templates/";
  EXPECT_EQ(detect_parser(read_file(dir + "qwen3.jinja")).family, ParserFamily::kHermes);
  EXPECT_EQ(detect_parser(read_file(dir + "llama3_1.jinja")).family, ParserFamily::kLlama3);
  EXPECT_EQ(detect_parser(read_file(dir + "gemma3.jinja")).family, ParserFamily::kGemma);
  EXPECT_EQ(detect_parser(read_file(dir + "deepseek_v3.jinja")).family, ParserFamily::kDeepseekV3);
  EXPECT_EQ(detect_parser(read_file(dir + "gpt_oss.jinja")).family, ParserFamily::kHarmony);
  EXPECT_FALSE(detect_parser(read_file(dir + "gpt_oss.jinja")).reasoning);
  EXPECT_EQ(detect_parser("{{ messages }}", "qwen3_moe").family, ParserFamily::kHermes);
  EXPECT_EQ(detect_parser("{{ messages }}", "gpt_oss").family, ParserFamily::kHarmony);
  EXPECT_EQ(detect_parser("{{ messages }}").family, ParserFamily::kPlain);
  for (auto f : {ParserFamily::kPlain, ParserFamily::kHermes, ParserFamily::kLlama3, ParserFamily::kDeepseekV3,
                 ParserFamily::kGemma, ParserFamily::kHarmony})
    EXPECT_EQ(parser_family_from_name(parser_family_name(f)), f);
  EXPECT_THROW(parser_family_from_name("nope"), Error);
}

TEST(chat_parser_detection, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

TEST(chat_parsed_message, Json) {
  ParsedMessage m = parse_output(family(ParserFamily::kHermes),
                                 "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>");
  Json j = m.to_json();
  EXPECT_TRUE(j["content"].is_null());
  EXPECT_TRUE(j["reasoning_content"].is_null());
  EXPECT_EQ(j["tool_calls"][0]["type"], "function");
  EXPECT_EQ(j["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(j["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
}

}  // namespace
}  // namespace tachyon::chat
