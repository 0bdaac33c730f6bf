#include "chat/jinja/operators.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "chat/jinja/error.h"

namespace tachyon::chat::jinja {

namespace {

[[noreturn]] void type_error(const std::string& message) { throw TemplateError(ErrorKind::kType, message); }

int64_t checked(bool overflow, int64_t v) {
  if (overflow) throw TemplateError(ErrorKind::kOverflow, "integer result too large");
  return v;
}

template <typename Op>
int64_t checked_op(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = op(x, y, &r);
  return checked(overflow, r);
}

}  // namespace

int64_t negate_int(int64_t v) { return checked(v == std::numeric_limits<int64_t>::min(), -v); }

// Python arithmetic on int/float/bool.
Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (is_python_int(a) && is_python_int(b)) {
    int64_t x = python_int(a), y = python_int(b);
    if (op == "+") return Value(checked_op([](int64_t a, int64_t b, int64_t* o) { return __builtin_add_overflow(a, b, o); }, x, y));
    if (op == "-") return Value(checked_op([](int64_t a, int64_t b, int64_t* o) { return __builtin_sub_overflow(a, b, o); }, x, y));
    if (op == "*") return Value(checked_op([](int64_t a, int64_t b, int64_t* o) { return __builtin_mul_overflow(a, b, o); }, x, y));
    if (op == "/") {
      if (y == 0) throw TemplateError(ErrorKind::kZeroDivision, "division by zero");
      return Value(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw TemplateError(ErrorKind::kZeroDivision, "integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) checked(true, 0);
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {
        if (e & 1) checked(__builtin_mul_overflow(result, base, &result), 0);
        if (e > 1) checked(__builtin_mul_overflow(base, base, &base), 0);
      }
      return Value(result);
    }
  }
  double x = a.to_double(), y = b.to_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) throw TemplateError(ErrorKind::kZeroDivision, "float division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw TemplateError(ErrorKind::kZeroDivision, "float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value(m);
    return Value(std::floor(x / y));
  }
  if (op == "**") {
    if (x == 0 && y < 0) throw TemplateError(ErrorKind::kZeroDivision, "0.0 cannot be raised to a negative power");
    double r = std::pow(x, y);
    if (std::isinf(r) && !std::isinf(x)) throw TemplateError(ErrorKind::kOverflow, "Numerical result out of range");
    return Value(r);
  }
  type_error("unsupported operand");
}

int compare_values(const Value& a, const Value& b, const std::string& op) {
  if (a.is_number() && b.is_number()) {
    if (is_python_int(a) && is_python_int(b)) {
      int64_t x = python_int(a), y = python_int(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    double x = a.to_double(), y = b.to_double();
    if (std::isnan(x) || std::isnan(y)) return 2;  // unordered
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.as_list()->is_tuple == b.as_list()->is_tuple) {
    auto& x = a.as_list()->items;
    auto& y = b.as_list()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return compare_values(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  std::string sym = op == "<" ? "<" : op == "<=" ? "<=" : op == ">" ? ">" : ">=";
  type_error(fmt::format("'{}' not supported between instances of '{}' and '{}'", sym, a.type_name(), b.type_name()));
}

}  // namespace tachyon::chat::jinja
