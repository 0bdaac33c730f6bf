// The context-free grammar engine: GBNF parsing and the pushdown matcher against brute
// force (std::regex over every short string, a hand-written checker for a recursive
// grammar), refusals that name what is wrong, and the plain-string fast path.
#include <gtest/gtest.h>

#include <functional>
#include <regex>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/cfg_runtime.h"
#include "sampling/grammar.h"
#include "sampling/regex_grammar.h"
#include "sampling/utf8_ranges.h"

namespace tachyon::sampling {
namespace {

struct Run {
  bool alive = true, complete = false;
};

Run run(CfgRuntime& rt, std::string_view text) {
  uint32_t s = rt.initial();
  for (char c : text)
    if ((s = rt.step(s, static_cast<uint8_t>(c))) == CfgRuntime::kDead) return {false, false};
  return {true, rt.is_complete(s)};
}

bool accepts(std::string_view gbnf, std::string_view text) {
  CfgRuntime rt(Cfg::parse_gbnf(gbnf));
  return run(rt, text).complete;
}

// Every string over `alphabet` up to `max_len` bytes.
void for_each_string(std::string_view alphabet, size_t max_len, const std::function<void(const std::string&)>& f) {
  std::vector<std::string> level = {""};
  f("");
  for (size_t len = 1; len <= max_len; ++len) {
    std::vector<std::string> next;
    for (const auto& s : level)
      for (char c : alphabet) next.push_back(s + c), f(next.back());
    level = std::move(next);
  }
}

void check_regex_brute_force(const std::string& pattern, std::string_view alphabet, size_t max_len) {
  SCOPED_TRACE(pattern);
  const std::regex re(pattern, std::regex::ECMAScript);
  CfgRuntime rt(Cfg::parse_gbnf(regex_grammar(pattern)));
  // A prefix is alive exactly when some string (up to max_len + 2) that extends it matches.
  std::set<std::string> viable;
  for_each_string(alphabet, max_len + 2, [&](const std::string& s) {
    if (!std::regex_match(s, re)) return;
    for (size_t k = 0; k <= s.size(); ++k) viable.insert(s.substr(0, k));
  });
  for_each_string(alphabet, max_len, [&](const std::string& s) {
    const Run r = run(rt, s);
    ASSERT_EQ(r.complete, std::regex_match(s, re)) << "'" << s << "'";
    ASSERT_EQ(r.alive, viable.contains(s)) << "'" << s << "'";
  });
}

TEST(CfgGrammarTest, RegularLanguagesMatchStdRegexOnEveryShortString) {
  for (const char* pattern : {"a*b", "(ab|a)*", "a{2,3}b?", "(a|b)+c", "[ab]{0,2}(c|)a", "a?a?a?aaa", "(a*)(b*)a",
                              "[^a]b*", "((a|b)c?){1,3}", "a{2,}", "(?:ab){1}c*", "\\d*a", "[a-c]+", "(aa|a)(aa|a)"})
    check_regex_brute_force(pattern, "abc1", 6);
}

// Balanced brackets of two kinds with letters inside: recursion the regex cannot express.
bool balanced(std::string_view s) {
  std::string stack;
  for (char c : s) {
    if (c == '(' || c == '[') stack.push_back(c);
    else if (c == ')' || c == ']') {
      if (stack.empty() || stack.back() != (c == ')' ? '(' : '[')) return false;
      stack.pop_back();
    }
  }
  return stack.empty() && !s.empty();
}

TEST(CfgGrammarTest, RecursiveGrammarMatchesAHandWrittenChecker) {
  const std::string gbnf = "root ::= item+\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\" | [x]\n";
  CfgRuntime rt(Cfg::parse_gbnf(gbnf));
  for_each_string("()[]x", 7, [&](const std::string& s) {
    const bool ok = balanced(s);
    ASSERT_EQ(run(rt, s).complete, ok) << s;
  });
  EXPECT_TRUE(run(rt, std::string(300, '(') + std::string(300, ')')).complete);
  // Beyond the stack bound the path is dropped, never a crash.
  EXPECT_FALSE(run(rt, std::string(5000, '(')).alive);
}

TEST(CfgGrammarTest, GbnfSyntax) {
  const char* g = R"(# a comment
root ::= greeting ws name
  ( "!" | "?" )?   # continued on the next line
greeting ::= "hi" | "hello"
  | "hey"
ws ::= [ \t]+
name ::= [A-Z] [a-z]{1,3} ("-" [A-Z] [a-z]*)?
)";
  EXPECT_TRUE(accepts(g, "hi Bob"));
  EXPECT_TRUE(accepts(g, "hey\tAnna-Lee!"));
  EXPECT_TRUE(accepts(g, "hello Al?"));
  EXPECT_FALSE(accepts(g, "hello Alice"));  // 4 lowercase letters
  EXPECT_FALSE(accepts(g, "hi bob"));
  EXPECT_TRUE(accepts("root ::= [^\"\\\\]+", "a b c"));
  EXPECT_FALSE(accepts("root ::= [^\"\\\\]+", "a\"b"));
  EXPECT_TRUE(accepts("root ::= \"\\x41\\u00e9\\n\"", "A\xC3\xA9\n"));
  EXPECT_TRUE(accepts("root ::= .{3}", "a\xC3\xA9\xF0\x9F\x98\x80"));  // 3 code points
  EXPECT_FALSE(accepts("root ::= .{3}", "ab\xC3"));
  EXPECT_FALSE(accepts("root ::= .", "\xED\xA0\x80"));  // a surrogate is not UTF-8
  EXPECT_TRUE(accepts("root ::= [\\u0100-\\U0001F600]", "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(accepts("root ::= [\\u0100-\\U0001F600]", "\xF0\x9F\x98\x81"));
}

TEST(CfgGrammarTest, ErrorsNameWhatIsWrong) {
  auto error_of = [](std::string_view g) -> std::string {
    try {
      Cfg::parse_gbnf(g);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("root ::= a\na ::= a \"x\" | \"y\"").find("rule 'a' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= undefined-rule").find("'undefined-rule' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"x").find("unterminated string literal"), std::string::npos);
  EXPECT_NE(error_of("root ::= [b-a]").find("end before its start"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"x\"{3,2}").find("maximum below its minimum"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"x\"\nroot ::= \"y\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"x\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"x\"{99999}").find("repetition count"), std::string::npos);
  EXPECT_NE(error_of("root ::= " + std::string(5000, '(') + "\"x\"" + std::string(5000, ')')).find("nested deeper"),
            std::string::npos);
  // Left recursion through rules that match the empty string, defined in any order.
  EXPECT_NE(error_of("root ::= a \"x\"\na ::= b b\nb ::= c\nc ::= \"\" | root").find("left-recursive"),
            std::string::npos);
}

TEST(CfgGrammarTest, RegexRefusalsNameTheConstruct) {
  auto error_of = [](std::string_view re) -> std::string {
    try {
      regex_grammar(re);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(error_of("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(error_of("\\bword").find("word boundaries"), std::string::npos);
  EXPECT_NE(error_of("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(error_of("a$b").find("'$'"), std::string::npos);
  EXPECT_NE(error_of("a**").find("quantifier after a quantifier"), std::string::npos);
  EXPECT_NE(error_of("(ab").find("unterminated group"), std::string::npos);
}

TEST(CfgGrammarTest, TerminalOnlyWhenNothingMayFollow) {
  CfgRuntime rt(Cfg::parse_gbnf("root ::= [0-9]+ | \"x\""));
  uint32_t s = rt.step(rt.initial(), '7');
  EXPECT_TRUE(rt.is_complete(s));
  EXPECT_FALSE(rt.is_terminal(s));
  s = rt.step(rt.initial(), 'x');
  EXPECT_TRUE(rt.is_terminal(s));
  // The terminal configuration has no leaves: interned once under its empty key, found again the
  // second time. Under make test-asan this also checks that the empty key is built without handing
  // memcpy a null pointer (UBSan found it there).
  EXPECT_EQ(rt.step(rt.initial(), 'x'), s);
  EXPECT_EQ(rt.step(rt.step(rt.initial(), '7'), 'x'), CfgRuntime::kDead);
}

TEST(CfgGrammarTest, PlainStringFastPathEngagesInsideJsonStringsOnly) {
  CfgRuntime rt(Cfg::parse_gbnf(
      "root ::= \"\\\"\" char* \"\\\"\"\nchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\/bfnrt]\n"));
  const uint32_t start = rt.initial();
  EXPECT_FALSE(rt.absorbs_plain_string(start));  // before the opening quote
  const uint32_t inside = rt.step(start, '"');
  EXPECT_TRUE(rt.absorbs_plain_string(inside));
  EXPECT_FALSE(rt.absorbs_plain_string(rt.step(inside, '\\')));  // within an escape
  // A string limited to letters does not absorb every plain byte.
  CfgRuntime letters(Cfg::parse_gbnf("root ::= \"\\\"\" [a-z]* \"\\\"\""));
  EXPECT_FALSE(letters.absorbs_plain_string(letters.step(letters.initial(), '"')));
}

TEST(CfgGrammarTest, Utf8SequencesCoverExactlyTheRange) {
  // Every code point (surrogates excluded) is matched by exactly the sequences of its range.
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {{0x41, 0x5A}, {0x7F0, 0x812}, {0xD7F0, 0xE010},
                                                             {0xFFF0, 0x10030}};
  const auto seqs = utf8_sequences(ranges);
  for (uint32_t cp = 0; cp < 0x10100; ++cp) {
    std::string bytes;
    append_utf8(cp, bytes);
    bool matched = false;
    for (const auto& seq : seqs) {
      if (seq.size() != bytes.size()) continue;
      bool all = true;
      for (size_t i = 0; i < seq.size(); ++i) {
        const auto b = static_cast<uint8_t>(bytes[i]);
        all = all && b >= seq[i].first && b <= seq[i].second;
      }
      matched = matched || all;
    }
    bool expected = false;
    for (const auto& [lo, hi] : ranges) expected = expected || (cp >= lo && cp <= hi);
    if (cp >= 0xD800 && cp <= 0xDFFF) expected = false;
    ASSERT_EQ(matched, expected) << std::hex << cp;
  }
}

TEST(CfgGrammarTest, RulesSegmentAfterALiteralInAGrammar) {
  Grammar g;
  g.then_literal("</think>\n\n").then_rules(Cfg::parse_gbnf("root ::= \"ok\" [0-9]*"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.advance("</think>\n\nok1"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_terminal());
  EXPECT_FALSE(m.advance("x"));
  Grammar bad;
  bad.then_rules(Cfg::parse_gbnf("root ::= \"a\"")).then_literal("b");
  EXPECT_THROW(GrammarMatcher{bad}, Error);
}

}  // namespace
}  // namespace tachyon::sampling
