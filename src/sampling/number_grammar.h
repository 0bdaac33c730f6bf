// JSON numbers in a range, and multiples, as exact GBNF expressions (JSON Schema's minimum /
// maximum / exclusive* with any decimal bounds, and multipleOf).
//
// Bounds are taken as decimals: a JSON number's shortest round-trip text (0.1 is 0.1, not
// 0.1000000000000000055...). Written numbers have no exponent, no leading zeros, never "-0",
// and at most 15 significant digits below 10^15: distinct decimals of 15 digits or fewer
// are distinct doubles and rounding keeps their order, so a validator that compares doubles
// (ajv, Python's jsonschema) agrees with the decimal comparison, exclusive bounds included.
//
//   NumberBound lo{decimal_from_json(0.5), /*exclusive=*/true};
//   decimal_range_gbnf(&lo, nullptr, 2)   // "0.51", "3", "12.25"; never "0.5", "0.501"
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tachyon::sampling {

// A decimal number: digits before and after the point. Canonical: no leading zeros in
// `whole` ("0" for values below 1), no trailing zeros in `fraction`, zero never negative.
struct Decimal {
  bool negative = false;
  std::string whole = "0";
  std::string fraction;
  bool operator==(const Decimal&) const = default;
};

// The decimal a JSON number stands for (its shortest round-trip text); throws Error when
// `number` is not a number.
Decimal decimal_from_json(const nlohmann::ordered_json& number);
// <0, 0, >0 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);
// Significant digits of |d| (0 for zero).
size_t significant_digits(const Decimal& d);

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

// Magnitudes below this are written; bounds must lie below it too.
constexpr long long kMaxNumberWhole = 1'000'000'000'000'000LL;  // 10^15

// Numbers v with lo <= v <= hi (< / > where exclusive; either side open when null), with at
// most `max_fraction_digits` digits after the point (0..15). nullopt when no such number
// exists. Bounds must be below 10^15 in magnitude (throws Error otherwise).
std::optional<std::string> decimal_range_gbnf(const NumberBound* lo, const NumberBound* hi, int max_fraction_digits);

// Integers in [lo, hi] (either side open when null) as a GBNF expression, no leading
// zeros, "-0" never; throws Error when the range is empty.
std::string integer_range_gbnf(const long long* lo, const long long* hi);

// The multiples of `step` (> 0) within [lo, hi] (both required), listed as alternatives in
// their shortest form; nullopt when there are none, throws Error when there are more than
// `max_count`.
std::optional<std::string> multiples_gbnf(const Decimal& step, const NumberBound& lo, const NumberBound& hi,
                                          size_t max_count);

}  // namespace tachyon::sampling
