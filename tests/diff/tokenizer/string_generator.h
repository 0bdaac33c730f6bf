// Seeded generator of adversarial tokenizer inputs for the differential test: random
// Unicode across planes, code, long whitespace runs, digits, prose with contractions,
// special-token strings embedded in text (whole, partial, doubled), invalid-looking
// sequences (literal byte-token names, U+FFFD, lone combining marks, ZWJ chains, controls)
// and, when `allow_invalid_utf8`, strings with real invalid UTF-8 bytes.
// The same seed gives the same strings.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tachyon::tokenizer::testing {

class StringGenerator {
 public:
  StringGenerator(uint64_t seed, std::vector<std::string> special_strings)
      : rng_(seed), specials_(std::move(special_strings)) {}

  // One input; `invalid_utf8` says whether it holds invalid UTF-8 on purpose.
  std::string next(bool* invalid_utf8);

 private:
  size_t uniform(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  char32_t random_code_point();
  void append_fragment(std::string& out);
  void append_random_unicode(std::string& out, size_t n);
  void append_code(std::string& out);
  void append_whitespace(std::string& out);
  void append_digits(std::string& out);
  void append_prose(std::string& out);
  void append_special(std::string& out);
  void append_odd(std::string& out);

  std::mt19937_64 rng_;
  std::vector<std::string> specials_;
};

}  // namespace tachyon::tokenizer::testing
