#include "sampling/number_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "base/error.h"
#include "sampling/cfg.h"

namespace tachyon::sampling {

namespace {

constexpr int kMaxSignificantDigits = 15;

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : " ") + alts[i];
  return out + " )";
}

// --- integers ---------------------------------------------------------------------------------

// Digit strings of equal length, a <= b, as a GBNF expression.
std::string digits_range(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  const size_t rest = a.size() - 1;
  auto tail = [&](const std::string& expr) { return expr.empty() ? std::string() : " " + expr; };
  if (a[0] == b[0]) return fmt::format("\"{}\"", a[0]) + tail(digits_range(a.substr(1), b.substr(1)));
  const bool low_full = std::all_of(a.begin() + 1, a.end(), [](char c) { return c == '0'; });
  const bool high_full = std::all_of(b.begin() + 1, b.end(), [](char c) { return c == '9'; });
  const std::string any_rest = rest ? fmt::format(" [0-9]{{{}}}", rest) : "";
  if (low_full && high_full) return fmt::format("[{}-{}]", a[0], b[0]) + any_rest;
  std::vector<std::string> alts;
  alts.push_back(fmt::format("\"{}\"", a[0]) + tail(digits_range(a.substr(1), std::string(rest, '9'))));
  if (b[0] - a[0] >= 2) alts.push_back(fmt::format("[{}-{}]", static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)) + any_rest);
  alts.push_back(fmt::format("\"{}\"", b[0]) + tail(digits_range(std::string(rest, '0'), b.substr(1))));
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

long long pow10(size_t n) {
  long long v = 1;
  for (size_t i = 0; i < n; ++i) v *= 10;
  return v;
}

size_t digit_count(long long v) { return std::to_string(v).size(); }

// 0 <= lo <= hi; `after(len)` is appended to the integers of each length.
std::string nonneg_range(long long lo, long long hi, const std::function<std::string(size_t)>& after = {}) {
  std::vector<std::string> alts;
  for (size_t len = digit_count(lo); len <= digit_count(hi); ++len) {
    const long long x = std::max(lo, len == 1 ? 0LL : pow10(len - 1));
    const long long y = std::min(hi, pow10(len) - 1);
    if (x <= y) alts.push_back(digits_range(std::to_string(x), std::to_string(y)) + (after ? after(len) : ""));
  }
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Every integer >= lo >= 0.
std::string nonneg_at_least(long long lo) {
  if (lo == 0) return "( \"0\" | [1-9] [0-9]* )";
  const size_t len = digit_count(lo);
  return fmt::format("( {} | [1-9] [0-9]{{{},}} )", nonneg_range(lo, pow10(len) - 1), len);
}

// --- fractions --------------------------------------------------------------------------------

// A bound on the digits after the point: 0.s >= 0.digits (lower) or 0.s <= 0.digits (upper),
// strict when exclusive. `digits` has no trailing zeros ("" is 0).
struct FractionBound {
  std::string digits;
  bool exclusive = false;
};
using OptBound = std::optional<FractionBound>;

// A lower bound of 0 inclusive holds for every fraction: drop it.
OptBound normalize_lower(OptBound lo) {
  if (lo && lo->digits.empty() && !lo->exclusive) return std::nullopt;
  return lo;
}

bool empty_fraction_ok(const OptBound& lo, const OptBound& hi) {
  return !lo && (!hi || !hi->digits.empty() || !hi->exclusive);
}

std::optional<std::string> any_length_fraction(const OptBound& lo, const OptBound& hi, int max_len);

// Digit strings of length 1..max_len within the bounds; nullopt when there are none.
std::optional<std::string> nonempty_fraction(const OptBound& lo, const OptBound& hi, int max_len) {
  if (max_len <= 0) return std::nullopt;
  if (hi && hi->digits.empty() && hi->exclusive) return std::nullopt;  // below 0
  struct Branch {
    char from, to;
    OptBound lo, hi;
  };
  auto same = [](const OptBound& a, const OptBound& b) {
    return a.has_value() == b.has_value() && (!a || (a->digits == b->digits && a->exclusive == b->exclusive));
  };
  std::vector<Branch> branches;
  for (char c = '0'; c <= '9'; ++c) {
    OptBound next_lo, next_hi;
    if (lo) {
      const char d = lo->digits.empty() ? '0' : lo->digits[0];
      if (c < d) continue;
      if (c == d) next_lo = normalize_lower(FractionBound{lo->digits.empty() ? "" : lo->digits.substr(1), lo->exclusive});
    }
    if (hi) {
      const char d = hi->digits.empty() ? '0' : hi->digits[0];
      if (c > d) continue;
      if (c == d) next_hi = FractionBound{hi->digits.empty() ? "" : hi->digits.substr(1), hi->exclusive};
    }
    if (!branches.empty() && branches.back().to == c - 1 && same(branches.back().lo, next_lo) &&
        same(branches.back().hi, next_hi)) {
      branches.back().to = c;
    } else {
      branches.push_back({c, c, next_lo, next_hi});
    }
  }
  std::vector<std::string> alts;
  for (const Branch& b : branches) {
    const std::optional<std::string> tail = any_length_fraction(b.lo, b.hi, max_len - 1);
    if (!tail) continue;
    const std::string head = b.from == b.to ? fmt::format("\"{}\"", b.from) : fmt::format("[{}-{}]", b.from, b.to);
    alts.push_back(tail->empty() ? head : head + " " + *tail);
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

// Digit strings of length 0..max_len within the bounds ("" matches only the empty string).
std::optional<std::string> any_length_fraction(const OptBound& lo, const OptBound& hi, int max_len) {
  if (!lo && !hi) return max_len > 0 ? fmt::format("[0-9]{{0,{}}}", max_len) : std::string();
  const bool empty_ok = empty_fraction_ok(lo, hi);
  const std::optional<std::string> some = nonempty_fraction(lo, hi, max_len);
  if (some) return empty_ok ? "( " + *some + " )?" : *some;
  if (empty_ok) return std::string();
  return std::nullopt;
}

// What follows the whole part: nothing, or "." and 1..max_len digits within the bounds.
std::optional<std::string> fraction_part(const OptBound& lo, const OptBound& hi, int max_len) {
  const bool empty_ok = empty_fraction_ok(lo, hi);
  const std::optional<std::string> some = nonempty_fraction(lo, hi, max_len);
  if (some) return empty_ok ? " ( \".\" " + *some + " )?" : " \".\" " + *some;
  if (empty_ok) return std::string();
  return std::nullopt;
}

// --- magnitudes -------------------------------------------------------------------------------

// Fraction digits allowed after a whole part of `whole_digits` digits (0 for the whole part 0).
int fraction_digits_after(size_t whole_digits, int max_fraction_digits) {
  return std::min(max_fraction_digits, kMaxSignificantDigits - static_cast<int>(whole_digits));
}

// Non-negative numbers m with lo <= m <= hi (strict where exclusive; hi absent: below 10^15).
std::optional<std::string> magnitude_range(const NumberBound& lo, const NumberBound* hi, int max_fraction) {
  if (hi && (compare(lo.value, hi->value) > 0 || (compare(lo.value, hi->value) == 0 && (lo.exclusive || hi->exclusive))))
    return std::nullopt;
  const long long a = std::stoll(lo.value.whole);
  const long long b = hi ? std::stoll(hi->value.whole) : kMaxNumberWhole;
  auto digits_of = [](long long whole) { return whole == 0 ? size_t{0} : digit_count(whole); };
  const OptBound lo_fraction = normalize_lower(FractionBound{lo.value.fraction, lo.exclusive});
  const OptBound hi_fraction = hi ? OptBound(FractionBound{hi->value.fraction, hi->exclusive}) : std::nullopt;
  std::vector<std::string> alts;
  auto whole_then = [&](long long whole, const OptBound& flo, const OptBound& fhi) {
    const std::optional<std::string> frac =
        fraction_part(flo, fhi, fraction_digits_after(digits_of(whole), max_fraction));
    if (frac) alts.push_back(fmt::format("\"{}\"{}", whole, *frac));
  };
  if (hi && a == b) {
    whole_then(a, lo_fraction, hi_fraction);
  } else {
    whole_then(a, lo_fraction, std::nullopt);
    const long long mid_lo = a + 1, mid_hi = b - 1;
    if (mid_lo <= mid_hi) {
      alts.push_back(nonneg_range(mid_lo, mid_hi, [&](size_t len) {
        const int n = fraction_digits_after(len, max_fraction);
        return n > 0 ? fmt::format(" ( \".\" [0-9]{{1,{}}} )?", n) : std::string();
      }));
    }
    if (hi) whole_then(b, std::nullopt, hi_fraction);
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

Decimal absolute(Decimal d) {
  d.negative = false;
  return d;
}

void check_bound(const NumberBound* b) {
  if (b && b->value.whole.size() > 15) throw Error("a bound beyond 10^15 is not supported on a number");
}

// --- exact scaled arithmetic for multiples ------------------------------------------------------

__extension__ typedef __int128 Wide;  // scaled bounds reach 10^30

Wide scaled(const Decimal& d, size_t scale) {
  Wide v = 0;
  const std::string digits = d.whole + d.fraction + std::string(scale - d.fraction.size(), '0');
  for (char c : digits) v = v * 10 + (c - '0');
  return d.negative ? -v : v;
}

Wide floor_div(Wide a, Wide b) {  // b > 0
  Wide q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

Wide ceil_div(Wide a, Wide b) {  // b > 0
  Wide q = a / b;
  if (a % b != 0 && a > 0) ++q;
  return q;
}

std::string scaled_text(Wide v, size_t scale) {
  const bool negative = v < 0;
  if (negative) v = -v;
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  if (digits.size() <= scale) digits.insert(0, scale + 1 - digits.size(), '0');
  std::string whole = digits.substr(0, digits.size() - scale), fraction = digits.substr(digits.size() - scale);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  const std::string text = whole + (fraction.empty() ? "" : "." + fraction);
  return (negative && text != "0" ? "-" : "") + text;
}

}  // namespace

Decimal decimal_from_json(const nlohmann::ordered_json& number) {
  if (!number.is_number()) throw Error("not a number");
  const std::string text = number.dump();
  size_t i = 0;
  Decimal d;
  if (text[i] == '-') d.negative = true, ++i;
  std::string digits;
  long long point = -1;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') point = static_cast<long long>(digits.size());
    else digits += text[i];
  }
  if (point < 0) point = static_cast<long long>(digits.size());
  if (i < text.size()) point += std::stoll(text.substr(i + 1));
  if (point <= 0) {
    d.whole = "0";
    d.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else {
    if (static_cast<size_t>(point) > digits.size()) digits.append(static_cast<size_t>(point) - digits.size(), '0');
    d.whole = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
  }
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size() - 1));
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.whole == "0" && d.fraction.empty()) d.negative = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int magnitude = 0;
  if (a.whole.size() != b.whole.size()) {
    magnitude = a.whole.size() < b.whole.size() ? -1 : 1;
  } else if (int c = a.whole.compare(b.whole); c != 0) {
    magnitude = c < 0 ? -1 : 1;
  } else {
    const size_t n = std::max(a.fraction.size(), b.fraction.size());
    const std::string fa = a.fraction + std::string(n - a.fraction.size(), '0');
    const std::string fb = b.fraction + std::string(n - b.fraction.size(), '0');
    if (int f = fa.compare(fb); f != 0) magnitude = f < 0 ? -1 : 1;
  }
  return a.negative ? -magnitude : magnitude;
}

size_t significant_digits(const Decimal& d) {
  if (d.whole != "0") return d.whole.size() + d.fraction.size();
  const size_t first = d.fraction.find_first_not_of('0');
  return first == std::string::npos ? 0 : d.fraction.size() - first;
}

std::string integer_range_gbnf(const long long* lo, const long long* hi) {
  std::vector<std::string> alts;
  // Negative values: "-" and a magnitude in [-hi', -lo] (hi' = min(hi, -1)).
  if (!lo || *lo < 0) {
    const long long neg_hi = hi ? std::min(*hi, -1LL) : -1LL;
    if (!lo || *lo <= neg_hi) alts.push_back("\"-\" " + (lo ? nonneg_range(-neg_hi, -*lo) : nonneg_at_least(-neg_hi)));
  }
  const long long pos_lo = lo ? std::max(*lo, 0LL) : 0LL;
  if (!hi || *hi >= pos_lo) alts.push_back(hi ? nonneg_range(pos_lo, *hi) : nonneg_at_least(pos_lo));
  if (alts.empty()) throw Error("an empty integer range");
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::optional<std::string> decimal_range_gbnf(const NumberBound* lo, const NumberBound* hi, int max_fraction_digits) {
  check_bound(lo);
  check_bound(hi);
  max_fraction_digits = std::clamp(max_fraction_digits, 0, kMaxSignificantDigits);
  std::vector<std::string> alts;
  // Negative numbers: "-" and a magnitude above |hi| (or above 0: never "-0") up to |lo|.
  if (!lo || lo->value.negative) {
    const NumberBound smallest =
        hi && hi->value.negative ? NumberBound{absolute(hi->value), hi->exclusive} : NumberBound{Decimal{}, true};
    const std::optional<NumberBound> largest =
        lo ? std::optional<NumberBound>(NumberBound{absolute(lo->value), lo->exclusive}) : std::nullopt;
    if (auto m = magnitude_range(smallest, largest ? &*largest : nullptr, max_fraction_digits))
      alts.push_back("\"-\" " + *m);
  }
  // Zero and up.
  if (!hi || !hi->value.negative) {
    const NumberBound smallest = lo && !lo->value.negative ? *lo : NumberBound{Decimal{}, false};
    if (auto m = magnitude_range(smallest, hi, max_fraction_digits)) alts.push_back(*m);
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

std::optional<std::string> multiples_gbnf(const Decimal& step, const NumberBound& lo, const NumberBound& hi,
                                          size_t max_count) {
  check_bound(&lo);
  check_bound(&hi);
  if (step.negative || significant_digits(step) == 0) throw Error("a step that is not positive");
  if (step.whole.size() > 15 || step.fraction.size() > 15) throw Error("a step beyond 15 digits is not supported");
  const size_t scale = std::max({step.fraction.size(), lo.value.fraction.size(), hi.value.fraction.size()});
  const Wide s = scaled(step, scale), a = scaled(lo.value, scale), b = scaled(hi.value, scale);
  const Wide first = lo.exclusive ? floor_div(a, s) + 1 : ceil_div(a, s);
  const Wide last = hi.exclusive ? ceil_div(b, s) - 1 : floor_div(b, s);
  if (last < first) return std::nullopt;
  if (last - first + 1 > static_cast<Wide>(max_count))
    throw Error("more than {} multiples between the bounds are not supported", max_count);
  std::vector<std::string> alts;
  for (Wide k = first; k <= last; ++k) alts.push_back(gbnf_literal(scaled_text(k * s, scale)));
  return alternatives(alts);
}

}  // namespace tachyon::sampling
