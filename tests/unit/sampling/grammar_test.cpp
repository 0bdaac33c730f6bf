// The byte-level grammar matcher: JSON corpora (valid and invalid), incremental feeding,
// limits, and literal / choice segments (forced tool calls).
#include "sampling/grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace tachyon::sampling {
namespace {

bool accepts(const Grammar& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.advance(text) && m.is_complete();
}

const std::vector<std::string> kValid = {
    "{}",
    "{\"a\":1}",
    "{ \"a\" : 1 }",
    "{\"a\": [1, 2, 3],\n  \"b\": {\"c\": null}}",
    "{\"t\":true,\"f\":false,\"n\":null}",
    "{\"n\": [0, -0, 1.5, -2.25e10, 3E-2, 4e+7, 10, 0.0001, 123456789012345678901234567890]}",
    "{\"s\": \"plain \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"}",
    "{\"utf8\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xED\x9F\xBF \xEF\xBF\xBD \xF4\x8F\xBF\xBF\"}",
    "{\"\": \"\", \"k\": []}",
    "{\"deep\": [[[[{\"x\": [[]]}]]]]}",
    "{\"a\":{\"b\":{\"c\":{\"d\":[{}, {}, [], \"\"]}}}}",
    "{\r\n\t\"tabbed\":\t1\r\n}",
};

const std::vector<std::string> kInvalid = {
    "",                        // incomplete
    " {}",                     // the answer starts at its '{'
    "[1, 2]",                  // top level must be an object
    "\"s\"",
    "1",
    "{",
    "{\"a\"}",
    "{\"a\":}",
    "{\"a\" 1}",
    "{'a': 1}",
    "{a: 1}",
    "{\"a\":01}",
    "{\"a\":1.}",
    "{\"a\":.5}",
    "{\"a\":-}",
    "{\"a\":+1}",
    "{\"a\":1e}",
    "{\"a\":1e+}",
    "{\"a\":tru}",
    "{\"a\":True}",
    "{\"a\":NaN}",
    "{\"a\":1,}",
    "{,}",
    "{\"a\":[1,]}",
    "{\"a\":[,1]}",
    "{\"a\":[1 2]}",
    "{\"a\":1}}",
    "{\"a\":1} ",              // nothing may follow the object, not even whitespace
    "{\"a\":1}{}",
    "{\"a\":\"\x01\"}",        // control character in a string
    "{\"a\":\"\\q\"}",         // bad escape
    "{\"a\":\"\\u12G4\"}",     // bad hex
    "{\"a\":\"\\uD800\"}",     // a high surrogate alone
    "{\"a\":\"\\uD800x\"}",
    "{\"a\":\"\\uD800\\u0041\"}",  // not followed by a low one
    "{\"a\":\"\\udc00\"}",     // a low surrogate alone
    "{\"a\":\"\xC0\x80\"}",    // overlong UTF-8
    "{\"a\":\"\xED\xA0\x80\"}",  // UTF-16 surrogate in UTF-8
    "{\"a\":\"\xF4\x90\x80\x80\"}",  // above U+10FFFF
    "{\"a\":\"\x80\"}",        // stray continuation byte
    "{\"a\":\"\xE2\x82\"}",    // truncated sequence
    "{\"a\":[}",
    "{\"a\":{]}",
    "{\"a\":\"unterminated}",
    "{\"a\":1]",
    "{\"a\"::1}",
    "{\xC3\xA9:1}",
};

TEST(GrammarTest, AcceptsValidJsonObjects) {
  const Grammar g = Grammar::json_object();
  for (const auto& text : kValid) EXPECT_TRUE(accepts(g, text)) << text;
}

TEST(GrammarTest, RejectsInvalidJson) {
  const Grammar g = Grammar::json_object();
  for (const auto& text : kInvalid) EXPECT_FALSE(accepts(g, text)) << text;
}

TEST(GrammarTest, ByteByByteFeedingEqualsWholeFeeding) {
  const Grammar g = Grammar::json_object();
  for (const auto& text : kValid) {
    for (size_t split = 0; split <= text.size(); ++split) {
      GrammarMatcher whole(g), pieces(g);
      ASSERT_TRUE(whole.advance(text));
      ASSERT_TRUE(pieces.advance(text.substr(0, split)));
      ASSERT_TRUE(pieces.advance(text.substr(split)));
      EXPECT_EQ(whole.state(), pieces.state()) << text << " split at " << split;
    }
    GrammarMatcher m(g);
    for (size_t i = 0; i < text.size(); ++i) {
      ASSERT_TRUE(m.advance(text.substr(i, 1))) << text << " at " << i;
      EXPECT_EQ(m.is_complete(), i + 1 == text.size()) << text << " at " << i;
    }
  }
}

TEST(GrammarTest, RejectedAdvanceLeavesStateUnchanged) {
  const Grammar g = Grammar::json_object();
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance("{\"a\": "));
  const MatcherState before = m.state();
  EXPECT_FALSE(m.advance("1x"));
  EXPECT_EQ(m.state(), before);
  EXPECT_TRUE(m.advance("1}"));
  EXPECT_TRUE(m.is_terminal());
}

TEST(GrammarTest, WhitespaceRunsAreBounded) {
  Grammar g = Grammar::json_object();
  g.max_whitespace = 4;
  EXPECT_TRUE(accepts(g, "{    \"a\"    :    1    }"));
  EXPECT_FALSE(accepts(g, "{     }"));
  EXPECT_FALSE(accepts(g, "{\"a\":     1}"));
  EXPECT_TRUE(accepts(g, "{\"a\":\"          \"}"));  // spaces inside strings are content
  // The limit applies to every run, so padding forever is impossible.
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance("{\"a\": [1,"));
  EXPECT_TRUE(m.advance("\n\n\n\n"));
  EXPECT_FALSE(m.advance("\n"));
  EXPECT_FALSE(m.advance(" "));
}

TEST(GrammarTest, DepthIsBounded) {
  Grammar g = Grammar::json_object();
  g.max_depth = 3;
  EXPECT_TRUE(accepts(g, "{\"a\":[{}]}"));
  EXPECT_FALSE(accepts(g, "{\"a\":[[{}]]}"));
  g.max_depth = 128;
  std::string deep = "{\"a\":";
  for (int i = 0; i < 126; ++i) deep += "[";
  for (int i = 0; i < 126; ++i) deep += "]";
  deep += "}";
  EXPECT_TRUE(accepts(g, deep));  // the 128-bit container stack, both words
  std::string too_deep = "{\"a\":" + std::string(128, '[') + std::string(128, ']') + "}";
  EXPECT_FALSE(accepts(g, too_deep));  // 129 levels
  std::string mixed = "{\"a\":";  // objects and arrays alternate across both stack words
  for (int i = 0; i < 100; ++i) mixed += i % 2 ? "{\"k\":" : "[";
  mixed += "0";
  for (int i = 99; i >= 0; --i) mixed += i % 2 ? "}" : "]";
  mixed += "}";
  EXPECT_TRUE(accepts(g, mixed));
}

// The engine's submit checks a request's grammar with validate (no automaton built on the
// HTTP thread): it refuses what the matcher's constructor refuses, and accepts what it accepts.
TEST(GrammarTest, ValidateRefusesWhatTheMatcherRefuses) {
  EXPECT_NO_THROW(GrammarMatcher::validate(Grammar::json_object()));
  Grammar literal;
  literal.then_literal("<tool_call>").then_json_object();
  EXPECT_NO_THROW(GrammarMatcher::validate(literal));
  Grammar deep = Grammar::json_object();
  deep.max_depth = 0;
  Grammar spaced = Grammar::json_object();
  spaced.max_whitespace = 256;
  Grammar no_rules;
  no_rules.segments.push_back({.kind = GrammarSegment::Kind::Rules});
  for (const Grammar* g : {&deep, &spaced, &no_rules}) {
    EXPECT_THROW(GrammarMatcher::validate(*g), Error);
    EXPECT_THROW(GrammarMatcher{*g}, Error);
  }
}

Grammar tool_call_grammar(std::vector<std::string> names) {
  Grammar g;
  std::vector<std::string> alternatives;
  for (const auto& n : names) alternatives.push_back(json_escape(n) + "\", \"arguments\": ");
  g.then_literal("<tool_call>\n{\"name\": \"").then_choice(alternatives).then_json_object().then_literal(
      "}\n</tool_call>");
  return g;
}

TEST(GrammarTest, ForcedToolCallAcceptsOnlyDeclaredNames) {
  const Grammar g = tool_call_grammar({"get", "get_weather", "search"});
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"ge\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get\", \"arguments\": []}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>\n"));
  EXPECT_FALSE(accepts(g, "Sure! <tool_call>"));
  GrammarMatcher m(g);
  ASSERT_TRUE(m.advance("<tool_call>\n{\"name\": \"get"));
  EXPECT_FALSE(m.is_complete());
  EXPECT_TRUE(m.advance("_weather\""));
}

TEST(GrammarTest, ChoiceRejectsPrefixAlternatives) {
  Grammar g;
  EXPECT_THROW(g.then_choice({"ab", "a"}), Error);
  EXPECT_THROW(g.then_choice({}), Error);
  g.then_choice({"b\"", "a\"", "a\""});  // sorted and deduplicated
  EXPECT_EQ(g.segments[0].alternatives, (std::vector<std::string>{"a\"", "b\""}));
}

TEST(GrammarTest, JsonEscape) {
  EXPECT_EQ(json_escape("a\"b\\c\n\x01"), "a\\\"b\\\\c\\n\\u0001");
  EXPECT_EQ(json_escape("caf\xC3\xA9"), "caf\xC3\xA9");
}

TEST(GrammarTest, StateHashAndEqualityAreBytewise) {
  const Grammar g = Grammar::json_object();
  GrammarMatcher a(g), b(g);
  ASSERT_TRUE(a.advance("{\"x\": \"ab"));
  ASSERT_TRUE(b.advance("{\"y\": \"cd"));
  EXPECT_EQ(a.state(), b.state());
  EXPECT_EQ(MatcherStateHash()(a.state()), MatcherStateHash()(b.state()));
  ASSERT_TRUE(b.advance("\\"));
  EXPECT_NE(a.state(), b.state());
}

}  // namespace
}  // namespace tachyon::sampling
