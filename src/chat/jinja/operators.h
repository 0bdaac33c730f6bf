// Python's operators on template values: arithmetic on int/float/bool with Python's
// rounding and overflow rules (int64 instead of unbounded ints: overflow is an
// OverflowError), and ordering comparisons. Internal to the interpreter.
#pragma once

#include <cstdint>
#include <string>

#include "chat/jinja/value.h"

namespace tachyon::chat::jinja {

inline bool is_python_int(const Value& v) { return v.is_int() || v.is_bool(); }
inline int64_t python_int(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

// a op b for op in + - * / // % ** with both operands numbers.
Value arithmetic(const std::string& op, const Value& a, const Value& b);
// -1, 0, 1, or 2 for unordered (NaN); TypeError for types Python cannot order.
int compare_values(const Value& a, const Value& b, const std::string& op);
// Negation with overflow check.
int64_t negate_int(int64_t v);

}  // namespace tachyon::chat::jinja
