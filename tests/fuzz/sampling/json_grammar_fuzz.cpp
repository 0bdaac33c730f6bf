// Fuzz target for the JSON grammar matcher (sampling/grammar.h), differential against
// nlohmann::json's parser:
//   - the matcher accepts a complete text  =>  nlohmann parses it, and it is an object;
//   - nlohmann parses an object whose whitespace runs and nesting are within the grammar's
//     limits and that has no surrounding whitespace beyond them  =>  the matcher accepts it;
//   - feeding in pieces (sizes from the input) reaches the same state as feeding whole, and
//     the matcher rejects at the same byte;
//   - token masks from a trie over slices of the input equal a brute-force check.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/grammar.h"
#include "sampling/token_mask.h"

namespace {

using namespace tachyon::sampling;

std::string_view g_input;  // the input under test, printed on failure

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "json_grammar_fuzz: %s; input (%zu bytes): ", what, g_input.size());
  for (char c : g_input.substr(0, 400)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F && u != '\\') std::fputc(c, stderr);
    else std::fprintf(stderr, "\\x%02x", u);
  }
  std::fputc('\n', stderr);
  std::abort();
}

// nlohmann refuses numbers that overflow a double (1e999); RFC 8259 and JSON.parse do not.
bool overflows_double(std::string_view text) {
  try {
    const auto parsed = nlohmann::json::parse(text.begin(), text.end());
    return parsed.is_discarded();
  } catch (const nlohmann::json::out_of_range& e) {
    return e.id == 406;
  } catch (const std::exception&) {
  }
  return false;
}

// Longest whitespace run outside strings, deepest nesting, and whether whitespace follows
// the last non-whitespace byte or precedes the first (assumes `text` is valid JSON).
void measure(std::string_view text, int& max_ws, int& max_depth, bool& trailing_ws) {
  bool in_string = false, escape = false;
  int ws = 0, depth = 0;
  max_ws = max_depth = 0;
  for (char c : text) {
    if (in_string) {
      if (escape) escape = false;
      else if (c == '\\') escape = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      max_ws = std::max(max_ws, ++ws);
      continue;
    }
    ws = 0;
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') max_depth = std::max(max_depth, ++depth);
    else if (c == '}' || c == ']') --depth;
  }
  trailing_ws = ws > 0 || (!text.empty() && text[0] != '{');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  g_input = text;
  const Grammar grammar = Grammar::json_object();
  GrammarMatcher whole(grammar);
  size_t rejected_at = text.size();
  MatcherState s = whole.initial_state();
  for (size_t i = 0; i < text.size(); ++i) {
    MatcherState next = s;
    if (!whole.step(next, static_cast<uint8_t>(text[i]))) {
      rejected_at = i;
      break;
    }
    s = next;
  }
  const bool accepted = rejected_at == text.size() && whole.is_complete(s);

  // nlohmann stops at a NUL byte as at the end of input; the matcher never accepts one.
  const bool parsed = text.find('\0') == std::string_view::npos && nlohmann::json::accept(text.begin(), text.end());
  bool is_object = false;
  if (parsed) is_object = nlohmann::json::parse(text.begin(), text.end()).is_object();
  if (accepted && !(parsed && is_object) && !overflows_double(text)) fail("the matcher accepted what nlohmann rejects");
  if (parsed && is_object) {
    int max_ws = 0, max_depth = 0;
    bool trailing = false;
    measure(text, max_ws, max_depth, trailing);
    if (max_ws <= grammar.max_whitespace && max_depth <= grammar.max_depth && !trailing && !accepted)
      fail("the matcher rejected a valid object within its limits");
  }

  // Incremental feeding: pieces of sizes taken from the input.
  GrammarMatcher pieces(grammar);
  size_t pos = 0, k = 0;
  bool ok = true;
  while (pos < text.size() && ok) {
    size_t n = 1 + static_cast<uint8_t>(text[k++ % text.size()]) % 9;
    n = std::min(n, text.size() - pos);
    if (!pieces.advance(text.substr(pos, n))) {
      ok = false;
      // the piece holds the rejected byte; feeding byte by byte from here rejects at it
      for (size_t i = pos; i < pos + n; ++i)
        if (!pieces.advance(text.substr(i, 1))) {
          if (i != rejected_at) fail("incremental feeding rejected at another byte");
          break;
        }
      break;
    }
    pos += n;
  }
  if (ok && !(pieces.state() == s)) fail("incremental feeding reached another state");

  // Masks: a vocabulary of the input's slices, checked at the state after the accepted prefix.
  if (size >= 4 && size < 512) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 128; ++b) tokens.emplace_back(1, static_cast<char>(b));
    for (size_t i = 0; i + 1 < text.size(); i += 1 + i % 3)
      tokens.emplace_back(text.substr(i, 1 + (static_cast<uint8_t>(text[i]) % 6)));
    const TokenVocabulary vocab(tokens);
    const MatcherState states[] = {whole.initial_state(), s};
    for (const MatcherState& st : states) {
      std::vector<uint64_t> trie((tokens.size() + 63) / 64, 0);
      vocab.fill_mask(whole, st, trie);
      for (size_t id = 0; id < tokens.size(); ++id) {
        const std::string& bytes = vocab.bytes(static_cast<int32_t>(id));
        MatcherState t = st;
        bool allowed = !bytes.empty();
        for (size_t j = 0; j < bytes.size() && allowed; ++j) allowed = whole.step(t, static_cast<uint8_t>(bytes[j]));
        if (allowed != (((trie[id >> 6] >> (id & 63)) & 1u) != 0)) fail("trie mask differs from brute force");
      }
    }
  }
  return 0;
}
