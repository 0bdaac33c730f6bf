// Structured outputs in requests: the fields are read and compiled (with refusals naming the
// field and keyword), and forced / auto tool calls get a grammar, per tool-call family, that
// accepts a call the family's own output parser turns back into that call, and rejects
// arguments outside the tool's schema.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "sampling/cfg.h"
#include "sampling/grammar.h"
#include "server/api_error.h"
#include "server/request.h"
#include "server/structured_output.h"

namespace tachyon::server {
namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
    "hour": {"type": "integer", "minimum": 0, "maximum": 23}, "label": {"type": "string"}},
    "required": ["hour"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
    "tz": {"enum": ["UTC", "CET"]}}, "required": ["tz"], "additionalProperties": false}}}])";

ParsedRequest chat(const std::string& extra) {
  return parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])" + extra + "}");
}

bool matches(const ConstrainedOutput& out, std::string_view text, bool* complete = nullptr) {
  sampling::GrammarMatcher m(*out.grammar);
  const bool ok = m.advance(text);
  if (complete) *complete = m.is_complete();
  return ok;
}

struct FamilyCase {
  chat::ParserFamily family;
  const char* call;     // the model's part of a call to set_alarm(hour=7, label="wake")
  const char* bad;      // the same call with hour out of range
};

TEST(StructuredOutputTest, ForcedToolCallsInEveryFamilyParseBackToTheCall) {
  const FamilyCase cases[] = {
      {chat::ParserFamily::kHermes,
       "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"hour\": 7, \"label\": \"wake\"}}\n</tool_call>",
       "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"hour\": 24"},
      {chat::ParserFamily::kLlama3, "{\"name\": \"set_alarm\", \"parameters\": {\"hour\": 7, \"label\": \"wake\"}}",
       "{\"name\": \"set_alarm\", \"parameters\": {\"hour\": 30"},
      {chat::ParserFamily::kDeepseekV3, "set_alarm\n```json\n{\"hour\": 7, \"label\": \"wake\"}\n```",
       "set_alarm\n```json\n{\"hour\": -1"},
      {chat::ParserFamily::kGemma, "```tool_code\nset_alarm(hour=7, label=\"wake\")\n```",
       "```tool_code\nset_alarm(hour=25"},
      {chat::ParserFamily::kHarmony, "{\"hour\": 7, \"label\": \"wake\"}", "{\"hour\": 99"},
  };
  for (const FamilyCase& c : cases) {
    SCOPED_TRACE(chat::parser_family_name(c.family));
    chat::ParserOptions options;
    options.family = c.family;
    // Harmony names the tool in special tokens: a forced call names one.
    const std::string choice = c.family == chat::ParserFamily::kHarmony
                                   ? R"({"type": "function", "function": {"name": "set_alarm"}})"
                                   : R"("required")";
    const ParsedRequest request = chat(std::string(", \"tools\": ") + kTools + ", \"tool_choice\": " + choice);
    const ConstrainedOutput out = build_output_grammar(request, options);
    ASSERT_TRUE(out.grammar);
    bool complete = false;
    EXPECT_TRUE(matches(out, c.call, &complete));
    EXPECT_TRUE(complete);
    EXPECT_FALSE(matches(out, c.bad));
    const chat::ParsedMessage parsed = chat::parse_output(options, out.prefix + c.call);
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << out.prefix + c.call;
    EXPECT_EQ(parsed.tool_calls[0].name, "set_alarm");
    EXPECT_EQ(Json::parse(parsed.tool_calls[0].arguments), Json::parse(R"({"hour": 7, "label": "wake"})"));
  }
}

TEST(StructuredOutputTest, HarmonyRequiredWithSeveralToolsIsRefused) {
  chat::ParserOptions options;
  options.family = chat::ParserFamily::kHarmony;
  const ParsedRequest request = chat(std::string(", \"tools\": ") + kTools + ", \"tool_choice\": \"required\"");
  EXPECT_THROW(build_output_grammar(request, options), ApiError);
}

TEST(StructuredOutputTest, AutoToolChoiceHoldsWrittenCallsToTheirSchema) {
  chat::ParserOptions options;
  options.family = chat::ParserFamily::kHermes;
  const ParsedRequest request = chat(std::string(", \"tools\": ") + kTools);
  const ConstrainedOutput out = build_output_grammar(request, options);
  ASSERT_TRUE(out.grammar);
  bool complete = false;
  EXPECT_TRUE(matches(out, "Let me see. <tool_ <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}"
                           "\n</tool_call> done",
                      &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(matches(out, "plain text, no call", &complete));
  EXPECT_TRUE(complete);
  EXPECT_FALSE(matches(out, "x <tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"PST\""));
  EXPECT_FALSE(matches(out, "<tool_call>\n{\"name\": \"other\""));
  // The parser opens a call at "<tool_call>" whatever follows: text never holds the marker.
  EXPECT_FALSE(matches(out, "x <tool_call> {\"name\": \"get_time\", \"arguments\": {\"tz\": \"PST\"}}"));
  EXPECT_FALSE(matches(out, "<tool_call><tool_call>"));
}

// The grammar's bytes for model output: special tokens as a TokenVocabulary gives them
// (cfg.h special_token_bytes), everything else as text.
std::string grammar_bytes(std::string text, const std::vector<std::string_view>& specials) {
  for (std::string_view special : specials) {
    const std::string marked = sampling::special_token_bytes(special);
    for (size_t at = text.find(special); at != std::string::npos; at = text.find(special, at + marked.size()))
      text.replace(at, special.size(), marked);
  }
  return text;
}

struct AutoCase {
  chat::ParserFamily family;
  std::string call;   // text, a call to get_time(tz="UTC"), as the output parser reads it
  std::string bad;    // a call with arguments outside the schema
  std::string plain;  // a text answer
  std::string spelled;  // a call's opener written as ordinary text
  std::vector<std::string_view> specials;
};

// tool_choice auto in the families whose calls are bare JSON (llama3) or special tokens
// (deepseek_v3, harmony): text stays free, a call is held to its schema and parses back.
TEST(StructuredOutputTest, AutoToolChoiceInEveryFamily) {
  const std::vector<std::string_view> deepseek = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                                                  "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
  const std::vector<std::string_view> harmony = {"<|channel|>", "<|message|>", "<|end|>", "<|start|>",
                                                 "<|constrain|>", "<|call|>", "<|return|>"};
  const AutoCase cases[] = {
      {chat::ParserFamily::kLlama3, " {\"name\": \"get_time\", \"parameters\": {\"tz\": \"UTC\"}}",
       "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"PST\"", "It is noon.", "x <|python_tag|>", {}},
      {chat::ParserFamily::kDeepseekV3,
       "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"UTC\"}"
       "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"PST\"",
       "It is noon.", "x <｜tool▁calls▁begin｜>", deepseek},
      {chat::ParserFamily::kHarmony,
       "<|channel|>analysis<|message|>Need the time.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time "
       "<|constrain|>json<|message|>{\"tz\": \"UTC\"}<|call|>",
       "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz\": \"PST\"",
       "<|channel|>final<|message|>It is noon.<|return|>", "<|channel|>final<|message|>a <|call|>", harmony},
  };
  for (const AutoCase& c : cases) {
    SCOPED_TRACE(chat::parser_family_name(c.family));
    chat::ParserOptions options;
    options.family = c.family;
    const ConstrainedOutput out = build_output_grammar(chat(std::string(", \"tools\": ") + kTools), options);
    ASSERT_TRUE(out.grammar);
    EXPECT_TRUE(out.prefix.empty());
    bool complete = false;
    const std::vector<std::string_view>& specials = c.specials;
    EXPECT_TRUE(matches(out, grammar_bytes(c.call, specials), &complete));
    EXPECT_TRUE(complete);
    EXPECT_FALSE(matches(out, grammar_bytes(c.bad, specials)));
    EXPECT_TRUE(matches(out, grammar_bytes(c.plain, specials), &complete));
    EXPECT_TRUE(complete);
    // The opener spelled in ordinary tokens would start a call the grammar did not check.
    EXPECT_FALSE(matches(out, c.spelled));
    const chat::ParsedMessage parsed = chat::parse_output(options, c.call);
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << c.call;
    EXPECT_EQ(parsed.tool_calls[0].name, "get_time");
    EXPECT_EQ(Json::parse(parsed.tool_calls[0].arguments), Json::parse(R"({"tz": "UTC"})"));
  }
}

TEST(StructuredOutputTest, ResponseFormatsAndExtensionFieldsCompile) {
  auto with = [](const std::string& extra) {
    const ParsedRequest r = chat(", " + extra);
    chat::ParserOptions options;
    return build_output_grammar(r, options);
  };
  const ConstrainedOutput schema = with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
      "additionalProperties": false}}})");
  EXPECT_TRUE(matches(schema, "{\"a\": 12}"));
  EXPECT_FALSE(matches(schema, "{\"b\""));
  EXPECT_TRUE(matches(with(R"("guided_choice": ["yes", "no"])"), "no"));
  EXPECT_FALSE(matches(with(R"("guided_choice": ["yes", "no"])"), "maybe"));
  EXPECT_TRUE(matches(with(R"("guided_regex": "[0-9]{3}")"), "123"));
  EXPECT_TRUE(matches(with(R"("grammar": "root ::= \"ok\"")"), "ok"));
  EXPECT_TRUE(matches(with(R"("structured_outputs": {"json": {"type": "boolean"}})"), "true"));
  EXPECT_TRUE(matches(with(R"("guided_json": "{\"type\": \"null\"}")"), "null"));
  EXPECT_TRUE(matches(with(R"("response_format": {"type": "json_object", "schema": {"const": 1}})"), "1"));
  // A prompt that opened <think> gets it closed before the answer.
  chat::ParserOptions reasoning;
  reasoning.starts_in_reasoning = true;
  const ConstrainedOutput closed = build_output_grammar(chat(R"(, "guided_choice": ["a"])"), reasoning);
  EXPECT_TRUE(matches(closed, "</think>\n\na"));
}

TEST(StructuredOutputTest, RefusalsNameTheFieldAndKeyword) {
  auto error_of = [](const std::string& extra) -> std::string {
    try {
      chat(", " + extra);
    } catch (const ApiError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
      {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}}}})")
                .find("'multipleOf' at #/properties/n"),
            std::string::npos);
  EXPECT_NE(error_of(R"("guided_regex": "a", "guided_choice": ["a"])").find("give one structured-output field"),
            std::string::npos);
  EXPECT_NE(error_of(R"("grammar": "root ::= nope")").find("'grammar'"), std::string::npos);
  EXPECT_NE(error_of(R"("guided_choice": [1])").find("non-empty array of strings"), std::string::npos);
  EXPECT_NE(error_of(R"("response_format": {"type": "xml"})").find("'xml' is not supported"), std::string::npos);
}

TEST(StructuredOutputTest, CompiledGrammarsAreCached) {
  const auto before = engine::GrammarCache::shared().stats();
  const std::string extra = R"(, "guided_json": {"type": "object", "properties": {"cache_probe": {"type": "string"}}})";
  const ParsedRequest a = chat(extra), b = chat(extra);
  const auto after = engine::GrammarCache::shared().stats();
  EXPECT_EQ(after.misses - before.misses, 1u);
  EXPECT_EQ(after.hits - before.hits, 1u);
  EXPECT_EQ(a.output_constraint->cfg, b.output_constraint->cfg);
}

}  // namespace
}  // namespace tachyon::server
