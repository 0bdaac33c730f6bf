// Jinja2's tests (`x is defined`, `x is string`, ...).
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

using TestFn = std::function<bool(Interpreter&, const Value&, CallArgs&)>;

const Value& arg0(CallArgs& a, const char* test) {
  if (a.positional.empty() && a.keyword.empty())
    throw TemplateError(ErrorKind::kType, fmt::format("test '{}' takes 1 argument", test));
  return a.positional.empty() ? a.keyword[0].second : a.positional[0];
}

bool order(Interpreter& in, const char* op, const Value& x, const Value& y) {
  // Reuse the interpreter's comparison via a tiny expression-free path.
  CallArgs none;
  (void)in;
  (void)none;
  x.require_defined();
  y.require_defined();
  if (x.is_number() && y.is_number()) {
    double a = x.to_double(), b = y.to_double();
    std::string o = op;
    return o == "<" ? a < b : o == "<=" ? a <= b : o == ">" ? a > b : a >= b;
  }
  if (x.is_string() && y.is_string()) {
    int c = x.as_string().compare(y.as_string());
    std::string o = op;
    return o == "<" ? c < 0 : o == "<=" ? c <= 0 : o == ">" ? c > 0 : c >= 0;
  }
  throw TemplateError(ErrorKind::kType, fmt::format("'{}' not supported between instances of '{}' and '{}'", op,
                                                    x.type_name(), y.type_name()));
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const auto* table = new std::unordered_map<std::string, TestFn>{
      {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_mapping(); }},
      {"iterable",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
       }},
      {"sequence",
       [](Interpreter&, const Value& v, CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
       }},
      {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
      {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }},
      {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }},
      {"lower",
       [](Interpreter&, const Value& v, CallArgs&) {
         std::string s = v.to_str();
         return pystr::lower(s) == s && pystr::upper(s) != s;
       }},
      {"upper",
       [](Interpreter&, const Value& v, CallArgs&) {
         std::string s = v.to_str();
         return pystr::upper(s) == s && pystr::lower(s) != s;
       }},
      {"odd",
       [](Interpreter&, const Value& v, CallArgs&) {
         if (!v.is_int() && !v.is_bool()) throw TemplateError(ErrorKind::kType, "odd test needs an integer");
         return (v.is_bool() ? v.as_bool() : v.as_int() % 2 != 0);
       }},
      {"even",
       [](Interpreter&, const Value& v, CallArgs&) {
         if (!v.is_int() && !v.is_bool()) throw TemplateError(ErrorKind::kType, "even test needs an integer");
         return (v.is_bool() ? !v.as_bool() : v.as_int() % 2 == 0);
       }},
      {"divisibleby",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& n = arg0(a, "divisibleby");
         if (!v.is_number() || !n.is_number()) throw TemplateError(ErrorKind::kType, "divisibleby needs numbers");
         if (n.to_double() == 0) throw TemplateError(ErrorKind::kZeroDivision, "integer division or modulo by zero");
         return std::fmod(v.to_double(), n.to_double()) == 0;
       }},
      {"sameas",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& o = arg0(a, "sameas");
         if (v.is_none() || v.is_bool() || v.is_undefined()) return v.equals(o) && v.is_bool() == o.is_bool();
         if (v.is_list()) return o.is_list() && v.as_list() == o.as_list();
         if (v.is_dict()) return o.is_dict() && v.as_dict() == o.as_dict();
         return false;
       }},
      {"in",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& seq = arg0(a, "in");
         if (seq.is_string()) {
           if (!v.is_string()) throw TemplateError(ErrorKind::kType, "'in <string>' requires string as left operand");
           return seq.as_string().find(v.as_string()) != std::string::npos;
         }
         if (seq.is_mapping()) return seq.as_dict()->find(v) != nullptr;
         if (seq.is_undefined()) return false;
         if (!seq.is_list())
           throw TemplateError(ErrorKind::kType, fmt::format("argument of type '{}' is not iterable", seq.type_name()));
         for (auto& item : seq.as_list()->items)
           if (item.equals(v)) return true;
         return false;
       }},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return v.equals(arg0(a, "eq")); }},
      {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !v.equals(arg0(a, "ne")); }},
      {"lt", [](Interpreter& in, const Value& v, CallArgs& a) { return order(in, "<", v, arg0(a, "lt")); }},
      {"le", [](Interpreter& in, const Value& v, CallArgs& a) { return order(in, "<=", v, arg0(a, "le")); }},
      {"gt", [](Interpreter& in, const Value& v, CallArgs& a) { return order(in, ">", v, arg0(a, "gt")); }},
      {"ge", [](Interpreter& in, const Value& v, CallArgs& a) { return order(in, ">=", v, arg0(a, "ge")); }},
      {"escaped", [](Interpreter&, const Value&, CallArgs&) { return false; }},
      {"filter", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.as_string()); }},
      {"test", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.as_string()); }},
  };
  return *table;
}

const std::unordered_map<std::string, std::string>& aliases() {
  static const auto* table = new std::unordered_map<std::string, std::string>{
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"}, {"<", "lt"}, {"lessthan", "lt"}, {"<=", "le"},
      {">", "gt"},  {"greaterthan", "gt"}, {">=", "ge"}};
  return *table;
}

const std::string& canonical(const std::string& name) {
  auto it = aliases().find(name);
  return it == aliases().end() ? name : it->second;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(canonical(name)) > 0; }

bool call_test(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(canonical(name));
  if (it == tests().end()) throw TemplateError(ErrorKind::kRuntime, fmt::format("No test named '{}' found.", name));
  return it->second(interp, input, args);
}

}  // namespace tachyon::chat::jinja
