// Token masks: the trie walk against a brute-force check of every token, on a synthetic
// vocabulary and on real ones (the demo model's, and Qwen3's 151k tokens when
// scripts/fetch_test_assets.sh has cached it, which also reports the per-token mask cost).
#include "sampling/token_mask.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/json_schema_grammar.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::sampling {
namespace {

std::vector<uint64_t> brute_force_mask(const GrammarMatcher& m, const MatcherState& state, const TokenVocabulary& v) {
  std::vector<uint64_t> bits((static_cast<size_t>(v.size()) + 63) / 64, 0);
  for (int32_t id = 0; id < v.size(); ++id) {
    const std::string& bytes = v.bytes(id);
    if (bytes.empty()) continue;
    MatcherState s = state;
    bool ok = true;
    for (char c : bytes)
      if (!(ok = m.step(s, static_cast<uint8_t>(c)))) break;
    if (ok) bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  return bits;
}

std::vector<uint64_t> trie_mask(const GrammarMatcher& m, const MatcherState& state, const TokenVocabulary& v) {
  std::vector<uint64_t> bits((static_cast<size_t>(v.size()) + 63) / 64, 0);
  v.fill_mask(m, state, bits);
  return bits;
}

// Every state reached by feeding `doc` byte by byte (the start state included).
std::vector<MatcherState> states_along(const GrammarMatcher& m, std::string_view doc) {
  std::vector<MatcherState> out = {m.initial_state()};
  MatcherState s = out[0];
  for (char c : doc) {
    if (!m.step(s, static_cast<uint8_t>(c))) break;
    out.push_back(s);
  }
  return out;
}

const char* kDoc =
    "{\"name\": \"caf\xC3\xA9 \\u00e9\\n\", \"n\": [-1.5e+3, 0, 42, true, false, null],\n  \"o\": {\"k\": "
    "{\"deep\": [[{}]]}, \"e\": \"\xF0\x9F\x98\x80\"}, \"s\": \"\\\"q\\\"\"}";

TEST(TokenMaskTest, SyntheticVocabularyMatchesBruteForce) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  const std::string alphabet = "{}[]\":, \n\t0123456789.eE+-\\utrfalsn\xC3\xA9\xF0\x9F\x98\x80";
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    tokens.push_back(t);
  }
  tokens.push_back("");              // a special token: never allowed
  tokens.push_back("\"}");           // duplicates keep their own ids
  tokens.push_back("\"}");
  tokens.push_back("    ");
  const TokenVocabulary vocab(tokens);
  const Grammar g = Grammar::json_object();
  const GrammarMatcher m(g);
  for (const MatcherState& s : states_along(m, kDoc)) ASSERT_EQ(trie_mask(m, s, vocab), brute_force_mask(m, s, vocab));

  // mask_logits along the document (ids 0..255 are the single bytes): exactly the allowed
  // logits survive, dense words (inside strings) and sparse ones alike, plus 5 ids past the vocabulary.
  auto shared = std::make_shared<const TokenVocabulary>(tokens);
  TokenConstraint c(std::make_shared<const Grammar>(g), shared, {});
  std::vector<float> logits(tokens.size() + 5);
  MatcherState state = m.initial_state();
  for (const char* p = kDoc; *p; ++p) {
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i);
    const size_t num_allowed = c.mask_logits(logits);
    const auto bits = brute_force_mask(m, state, *shared);
    size_t survivors = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const bool allowed = i < tokens.size() && ((bits[i >> 6] >> (i & 63)) & 1u);
      ASSERT_EQ(logits[i], allowed ? static_cast<float>(i) : -std::numeric_limits<float>::infinity()) << i;
      survivors += allowed;
    }
    ASSERT_EQ(survivors, num_allowed);
    ASSERT_TRUE(c.accept(static_cast<uint8_t>(*p)));
    ASSERT_TRUE(m.step(state, static_cast<uint8_t>(*p)));
  }
}

TEST(TokenMaskTest, ConstraintMasksLogitsAndAllowsEndOnlyWhenComplete) {
  // ids: 0 "{", 1 "}", 2 "\"a\"", 3 ":", 4 "1", 5 "" (EOS), 6 " ", 7 "x"
  auto vocab = std::make_shared<const TokenVocabulary>(
      std::vector<std::string>{"{", "}", "\"a\"", ":", "1", "", " ", "x"});
  auto grammar = std::make_shared<const Grammar>(Grammar::json_object());
  TokenConstraint c(grammar, vocab, {5});
  std::vector<float> logits(10, 1.f);  // two ids past the vocabulary
  EXPECT_EQ(c.mask_logits(logits), 1u);  // "{" (no whitespace before the object)
  EXPECT_EQ(logits[0], 1.f);
  for (int id : {1, 2, 3, 4, 5, 6, 7, 8, 9}) EXPECT_TRUE(std::isinf(logits[id]) && logits[id] < 0) << id;
  EXPECT_FALSE(c.accept(5));  // EOS before the object is complete
  EXPECT_FALSE(c.accept(7));
  for (int id : {0, 6, 2, 3, 6, 4}) ASSERT_TRUE(c.accept(id));
  EXPECT_FALSE(c.is_complete());
  ASSERT_TRUE(c.accept(1));
  EXPECT_TRUE(c.is_terminal());
  std::vector<float> after(8, 0.f);
  EXPECT_EQ(c.mask_logits(after), 1u);  // only EOS
  EXPECT_EQ(after[5], 0.f);
  EXPECT_TRUE(c.accept(5));
}

TEST(TokenMaskTest, SnapshotRestoresTheStateAndItsMask) {
  // ids as above: 0 "{", 1 "}", 2 "\"a\"", 3 ":", 4 "1", 5 "" (EOS), 6 " ", 7 "x"
  auto vocab = std::make_shared<const TokenVocabulary>(
      std::vector<std::string>{"{", "}", "\"a\"", ":", "1", "", " ", "x"});
  auto grammar = std::make_shared<const Grammar>(Grammar::json_object());
  TokenConstraint c(grammar, vocab, {5});
  ASSERT_TRUE(c.accept(0));
  const TokenConstraint::Snapshot after_brace = c.snapshot();
  std::vector<float> before(8, 0.f);
  const size_t allowed_after_brace = c.mask_logits(before);
  for (int id : {2, 3, 4, 1}) ASSERT_TRUE(c.accept(id));  // a draft walked to the end
  EXPECT_TRUE(c.is_terminal());
  c.restore(after_brace);  // the draft was rejected after "{"
  EXPECT_FALSE(c.is_complete());
  EXPECT_FALSE(c.is_allowed(4));  // a number cannot be a key
  EXPECT_TRUE(c.is_allowed(2));
  std::vector<float> again(8, 0.f);
  EXPECT_EQ(c.mask_logits(again), allowed_after_brace);  // the mask follows the restored state
  EXPECT_EQ(again, before);
}

TEST(TokenMaskTest, MasksAreCachedPerState) {
  std::vector<std::string> tokens = {"{", "\"", "a", "b", "\":", "1", "}"};
  auto vocab = std::make_shared<const TokenVocabulary>(tokens);
  TokenConstraint c(std::make_shared<const Grammar>(Grammar::json_object()), vocab, {});
  for (int id : {0, 1}) {
    c.allowed();
    ASSERT_TRUE(c.accept(id));
  }
  for (int i = 0; i < 10; ++i) {  // inside the key: the same state again and again
    c.allowed();
    ASSERT_TRUE(c.accept(i % 2 ? 2 : 3));
  }
  EXPECT_GE(c.stats().cache_hits, 9u);
}

// A real tokenizer: token bytes, masks against brute force along a document, and every
// token of the tokenized document allowed in turn. Prints the per-token mask cost.
void check_real_vocabulary(const std::string& path, bool report) {
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not cached (scripts/fetch_test_assets.sh)";
  const auto tok = tokenizer::Tokenizer::from_path(path);
  const std::vector<std::string> bytes = tokenizer::token_byte_strings(tok);
  ASSERT_EQ(bytes.size(), tok.vocab_size());
  // Bytes concatenate to the decoded text (byte-level pieces of one character included).
  const std::string sample = std::string(kDoc) + " \xE4\xBD\xA0\xE5\xA5\xBD def f(x):\n    return x";
  const std::vector<int32_t> ids = tok.encode(sample, false);
  std::string joined;
  for (int32_t id : ids) joined += bytes[static_cast<size_t>(id)];
  EXPECT_EQ(joined, sample);

  const auto t0 = std::chrono::steady_clock::now();
  auto vocab = std::make_shared<const TokenVocabulary>(bytes);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const Grammar g = Grammar::json_object();
  const GrammarMatcher m(g);
  const auto states = states_along(m, kDoc);
  for (size_t i = 0; i < states.size(); i += report ? 7 : 1)
    ASSERT_EQ(trie_mask(m, states[i], *vocab), brute_force_mask(m, states[i], *vocab)) << "state " << i;

  // Decode the document as a model would: mask, then the document's next token.
  const std::vector<int32_t> doc_ids = tok.encode(kDoc, false);
  double cold_us = 0, max_us = 0;
  std::vector<float> logits(static_cast<size_t>(vocab->size()));
  uint64_t total_masks = 0, total_hits = 0, total_nodes = 0;
  double total_us = 0;
  const int repeats = report ? 5 : 1;
  for (int r = 0; r < repeats; ++r) {
    TokenConstraint c(std::make_shared<const Grammar>(g), vocab, {});
    for (size_t i = 0; i < doc_ids.size(); ++i) {
      std::fill(logits.begin(), logits.end(), 0.f);
      const auto s = std::chrono::steady_clock::now();
      c.mask_logits(logits);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count();
      total_us += us;
      max_us = std::max(max_us, us);
      if (r == 0 && i == 0) cold_us = us;
      ASSERT_EQ(logits[static_cast<size_t>(doc_ids[i])], 0.f) << "token " << i << " '" << bytes[doc_ids[i]] << "' masked";
      ASSERT_TRUE(c.accept(doc_ids[i]));
    }
    EXPECT_TRUE(c.is_complete());
    total_masks += c.stats().masks, total_hits += c.stats().cache_hits, total_nodes += c.stats().nodes_visited;
  }
  if (report) {
    const double misses = static_cast<double>(total_masks - total_hits);
    std::printf("[mask cost] %s: %d tokens, %zu trie nodes, trie built in %.1f ms; %zu-token JSON document x%d: "
                "%.1f us/token mean (mask + apply to logits), %.0f us max, %.0f us first; cache hits %.0f%%, "
                "%.0f nodes visited per miss\n",
                path.c_str(), vocab->size(), vocab->num_nodes(), build_ms, doc_ids.size(), repeats,
                total_us / static_cast<double>(total_masks), max_us, cold_us,
                100.0 * static_cast<double>(total_hits) / static_cast<double>(total_masks),
                misses > 0 ? static_cast<double>(total_nodes) / misses : 0.0);
    {  // A cached mask: what is left is writing -inf into the logits.
      TokenConstraint c(std::make_shared<const Grammar>(g), vocab, {});
      ASSERT_TRUE(c.accept(doc_ids[0]));
      c.mask_logits(logits);
      const int n = 50;
      const auto s0 = std::chrono::steady_clock::now();
      for (int k = 0; k < n; ++k) c.mask_logits(logits);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0).count() / n;
      std::printf("[mask cost]   cached mask applied to %zu logits: %.0f us\n", logits.size(), us);
    }
    // Uncached cost per state kind: the worst (inside a string) and a narrow one.
    for (const char* prefix : {"{\"name\": \"ab", "{\"name\": 12", "{\"name\": \"x\""}) {
      MatcherState s = m.initial_state();
      for (const char* p = prefix; *p; ++p) ASSERT_TRUE(m.step(s, static_cast<uint8_t>(*p)));
      std::vector<uint64_t> bits((static_cast<size_t>(vocab->size()) + 63) / 64);
      const int n = 20;
      size_t nodes = 0;
      const auto s0 = std::chrono::steady_clock::now();
      for (int k = 0; k < n; ++k) {
        std::fill(bits.begin(), bits.end(), 0);
        nodes = vocab->fill_mask(m, s, bits);
      }
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s0).count() / n;
      std::printf("[mask cost]   uncached mask after '%s': %.0f us, %zu nodes visited\n", prefix, us, nodes);
    }
  }
}

// A JSON Schema grammar (the pushdown automaton) on the demo model's vocabulary: masks equal
// brute force at every state along a document, the plain-string bitset engages inside
// unbounded strings (a fraction of the trie is walked) and not where the grammar narrows the
// characters, and the document's own tokens are allowed in turn until the grammar is terminal.
TEST(TokenMaskTest, SchemaGrammarMasksMatchBruteForceAndUseThePlainStringPath) {
  const std::string dir = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/tokenizer.json";
  const auto tok = tokenizer::Tokenizer::from_path(dir);
  auto vocab = std::make_shared<const TokenVocabulary>(tokenizer::token_byte_strings(tok));
  const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
      "tags": {"type": "array", "items": {"enum": ["a\"b", "c"]}, "maxItems": 3},
      "n": {"type": "integer", "minimum": -5, "maximum": 300}}, "required": ["name", "code", "n"],
      "additionalProperties": false})");
  auto grammar = std::make_shared<Grammar>();
  grammar->then_rules(Cfg::parse_gbnf(json_schema_to_gbnf(schema)));
  const GrammarMatcher m(*grammar);
  const std::string doc = R"({"name": "héllo wörld \"quoted\" text", "code": "AB123", "tags": ["a\"b", "c"], "n": 250})";
  size_t plain_states = 0;
  for (const MatcherState& s : states_along(m, doc)) {
    std::vector<uint64_t> bits((static_cast<size_t>(vocab->size()) + 63) / 64, 0);
    const size_t visited = vocab->fill_mask(m, s, bits);
    ASSERT_EQ(bits, brute_force_mask(m, s, *vocab));
    if (m.in_string_content(s)) {
      ++plain_states;
      EXPECT_LT(visited, vocab->num_nodes() / 2);
    }
  }
  EXPECT_GE(plain_states, 10u);  // inside "name"'s value; never inside the pattern-bound "code"
  TokenConstraint c(grammar, vocab, {0});
  for (int32_t id : tok.encode(doc, false)) ASSERT_TRUE(c.accept(id)) << vocab->bytes(id);
  EXPECT_TRUE(c.is_terminal());
}

TEST(TokenMaskTest, DemoModelVocabulary) {
  check_real_vocabulary(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/tokenizer.json", false);
}

TEST(TokenMaskTest, Qwen3VocabularyAndMaskCost) {
  check_real_vocabulary(std::string(TACHYON_SOURCE_DIR) + "/.cache/npm-assets/tokenizers/qwen3/tokenizer.json", true);
}

TEST(TokenMaskTest, Llama3Vocabulary) {
  check_real_vocabulary(std::string(TACHYON_SOURCE_DIR) + "/.cache/npm-assets/tokenizers/llama3_1/tokenizer.json",
                        false);
}

}  // namespace
}  // namespace tachyon::sampling

namespace tachyon::sampling {
namespace {

// A grammar token reference (<|end|>) allows the special token and neither its text spelled
// in ordinary tokens nor a byte-level token for a lone 0xFF (which could start its bytes).
TEST(TokenMaskTest, TokenReferencesMatchOnlyTheSpecialToken) {
  // ids: 0 "a", 1 "<|", 2 "end", 3 "|>", 4 <|end|> (special), 5 "\xFF", 6 "<|end|>" (text)
  auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{
      "a", "<|", "end", "|>", special_token_bytes("<|end|>"), "\xFF", "<|end|>"});
  auto grammar = std::make_shared<Grammar>();
  grammar->then_rules(Cfg::parse_gbnf("root ::= \"a\" <|end|> \"a\""));
  TokenConstraint c(grammar, vocab, {});
  ASSERT_TRUE(c.accept(0));
  std::vector<float> logits(7, 0.f);
  EXPECT_EQ(c.mask_logits(logits), 1u);
  EXPECT_EQ(logits[4], 0.f);
  for (int id : {1, 5, 6}) EXPECT_FALSE(c.is_allowed(id)) << id;
  ASSERT_TRUE(c.accept(4));
  ASSERT_TRUE(c.accept(0));
  EXPECT_TRUE(c.is_complete());
  // Text rules never take the special token (0xFF is not UTF-8).
  auto text = std::make_shared<Grammar>();
  text->then_rules(Cfg::parse_gbnf("root ::= .*"));
  TokenConstraint free_text(text, vocab, {});
  EXPECT_TRUE(free_text.is_allowed(6));
  EXPECT_FALSE(free_text.is_allowed(4));
  EXPECT_FALSE(free_text.is_allowed(5));
  EXPECT_THROW(Cfg::parse_gbnf("root ::= <|end"), Error);
}

}  // namespace
}  // namespace tachyon::sampling
