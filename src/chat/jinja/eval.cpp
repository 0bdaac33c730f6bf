// The expression half of the interpreter: names, literals, attribute and item access with
// Jinja2's sandboxed lookup rules, calls, filters, tests and operators.
#include "chat/jinja/interpreter.h"

#include <fmt/format.h>

#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

[[noreturn]] void type_error(const std::string& message) { throw TemplateError(ErrorKind::kType, message); }

// Jinja2's "'dict object'" / "'None'" in "has no attribute" messages.
std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return fmt::format("'{} object'", v.type_name());
}

}  // namespace

// --- expressions ----------------------------------------------------------------------

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  try {
    check_stack();
    return eval_inner(e, scope);
  } catch (const TemplateError& err) {
    if (err.line() > 0) throw;
    throw err.with_position(e.line, e.column);
  }
}

CallArgs Interpreter::eval_args(const Expr& e, const std::shared_ptr<Scope>& scope, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
  for (auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, scope));
  if (e.dyn_args) {
    Value extra = eval(*e.dyn_args, scope);
    for (auto& v : extra.iterate()) args.positional.push_back(v);
  }
  if (e.dyn_kwargs) {
    Value extra = eval(*e.dyn_kwargs, scope);
    if (!extra.is_mapping()) type_error("argument after ** must be a mapping");
    for (auto& [k, v] : extra.as_dict()->items) args.keyword.emplace_back(k.to_str(), v);
  }
  return args;
}

Value Interpreter::eval_filter(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* block_input) {
  Value input = e.args[0] ? (e.args[0]->kind == ExprKind::kFilter ? eval_filter(*e.args[0], scope, block_input)
                                                                  : eval(*e.args[0], scope))
                          : *block_input;
  CallArgs args = eval_args(e, scope, 1);
  try {
    return call_filter(*this, e.name, input, args);
  } catch (const TemplateError& err) {
    if (err.line() > 0) throw;
    throw err.with_position(e.line, e.column);
  }
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case ExprKind::kConst: return e.value;
    case ExprKind::kName: {
      const Value* v = scope->find(e.name);
      if (!v) return Value::undefined(fmt::format("'{}' is undefined", e.name));
      return *v;
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], scope);
        if (k.is_list() && !k.as_list()->is_tuple) type_error("unhashable type: 'list'");
        if (k.is_dict()) type_error("unhashable type: 'dict'");
        d.as_dict()->set(std::move(k), eval(*e.args[i + 1], scope));
      }
      return d;
    }
    case ExprKind::kGetAttr: return get_attr(eval(*e.args[0], scope), e.name);
    case ExprKind::kGetItem: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
    case ExprKind::kSlice: {
      Value obj = eval(*e.args[0], scope);
      std::optional<int64_t> bounds[3];
      for (int k = 0; k < 3; ++k) {
        if (!e.args[static_cast<size_t>(k) + 1]) continue;
        Value b = eval(*e.args[static_cast<size_t>(k) + 1], scope);
        if (b.is_none()) continue;
        if (!is_python_int(b)) {
          obj.require_defined();
          return Value::undefined(fmt::format("{} has no attribute slice", object_type_repr(obj)));
        }
        bounds[k] = python_int(b);
      }
      obj.require_defined();
      if (bounds[2] && *bounds[2] == 0) throw TemplateError(ErrorKind::kValue, "slice step cannot be zero");
      if (obj.is_string()) {
        auto cps = pystr::code_points(obj.as_string());
        std::string out;
        for (int64_t i : pystr::slice_indices(static_cast<int64_t>(cps.size()), bounds[0], bounds[1], bounds[2]))
          out += cps[static_cast<size_t>(i)];
        return Value(std::move(out));
      }
      if (obj.is_list()) {
        auto& items = obj.as_list()->items;
        std::vector<Value> out;
        for (int64_t i : pystr::slice_indices(static_cast<int64_t>(items.size()), bounds[0], bounds[1], bounds[2]))
          out.push_back(items[static_cast<size_t>(i)]);
        return Value::list(std::move(out), obj.as_list()->is_tuple);
      }
      return Value::undefined(fmt::format("{} has no attribute slice", object_type_repr(obj)));
    }
    case ExprKind::kCall: {
      Value callee = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      return call(callee, args);
    }
    case ExprKind::kFilter: return eval_filter(e, scope, nullptr);
    case ExprKind::kTest: {
      Value input = eval(*e.args[0], scope);
      CallArgs args = eval_args(e, scope, 1);
      bool result = call_test(*this, e.name, input, args);
      return Value(e.negated ? !result : result);
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.args[0], scope);
      v.require_defined();
      if (v.is_float()) return Value(e.kind == ExprKind::kNeg ? -v.as_float() : v.as_float());
      if (is_python_int(v)) {
        int64_t i = python_int(v);
        if (e.kind == ExprKind::kPos) return Value(i);
        return Value(negate_int(i));
      }
      type_error(fmt::format("bad operand type for unary {}: '{}'", e.kind == ExprKind::kNeg ? "-" : "+", v.type_name()));
    }
    case ExprKind::kNot: return Value(!eval(*e.args[0], scope).truthy());
    case ExprKind::kAnd: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? eval(*e.args[1], scope) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.args[0], scope);
      return a.truthy() ? a : eval(*e.args[1], scope);
    }
    case ExprKind::kBinary: return binary(e.name, eval(*e.args[0], scope), eval(*e.args[1], scope));
    case ExprKind::kCompare: {
      Value left = eval(*e.args[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], scope);
        if (!compare(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondExpr:
      if (eval(*e.args[0], scope).truthy()) return eval(*e.args[1], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
  }
  return Value();
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) callee.require_defined();
  if (!callee.is_function()) type_error(fmt::format("'{}' object is not callable", callee.type_name()));
  const auto& f = *callee.as_function();
  if (!f.unsafe_message.empty()) throw TemplateError(ErrorKind::kSecurity, f.unsafe_message);
  return f.call(*this, args);
}

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
  obj.require_defined();
  if (obj.is_dict()) {
    auto& d = *obj.as_dict();
    if (d.kind == ObjectKind::kDict) {
      if (auto m = get_method(obj, name)) return *m;
    }
    if (const Value* v = d.find(Value(name))) return *v;
    return Value::undefined(fmt::format("{} has no attribute '{}'", object_type_repr(obj), name));
  }
  if (auto m = get_method(obj, name)) return *m;
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_type_repr(obj), name));
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
  obj.require_defined();
  auto missing = [&]() {
    if (key.is_string()) {
      if (obj.is_dict() && obj.as_dict()->kind != ObjectKind::kDict) {
        return Value::undefined(fmt::format("{} has no attribute '{}'", object_type_repr(obj), key.as_string()));
      }
      if (auto m = get_method(obj, key.as_string())) return *m;
      return Value::undefined(fmt::format("{} has no attribute '{}'", object_type_repr(obj), key.as_string()));
    }
    return Value::undefined(fmt::format("{} has no element {}", object_type_repr(obj), key.repr()));
  };
  if (obj.is_dict()) {
    if (obj.as_dict()->kind == ObjectKind::kLoop || obj.as_dict()->kind == ObjectKind::kNamespace) return missing();
    if (key.is_list() && !key.as_list()->is_tuple) return missing();
    if (const Value* v = obj.as_dict()->find(key)) return *v;
    return missing();
  }
  if ((obj.is_list() || obj.is_string()) && is_python_int(key)) {
    int64_t i = python_int(key);
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.as_list()->items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return missing();
      return obj.as_list()->items[static_cast<size_t>(i)];
    }
    auto cps = pystr::code_points(obj.as_string());
    auto n = static_cast<int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return missing();
    return Value(std::string(cps[static_cast<size_t>(i)]));
  }
  return missing();
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.to_str() + b.to_str();
    check_size(s.size());
    return Value(std::move(s));
  }
  a.require_defined();
  b.require_defined();
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list() && a.as_list()->is_tuple == b.as_list()->is_tuple) {
      std::vector<Value> items = a.as_list()->items;
      check_size(items.size() + b.as_list()->items.size());
      items.insert(items.end(), b.as_list()->items.begin(), b.as_list()->items.end());
      return Value::list(std::move(items), a.as_list()->is_tuple);
    }
    if (a.is_string() || b.is_string())
      type_error(a.is_string() ? fmt::format("can only concatenate str (not \"{}\") to str", b.type_name())
                               : fmt::format("unsupported operand type(s) for +: '{}' and 'str'", a.type_name()));
  }
  if (op == "*" && ((is_python_int(a) && (b.is_string() || b.is_list())) || (is_python_int(b) && (a.is_string() || a.is_list())))) {
    const Value& seq = is_python_int(a) ? b : a;
    int64_t n = std::max<int64_t>(0, python_int(is_python_int(a) ? a : b));
    if (seq.is_string()) {
      check_size(static_cast<size_t>(n) * seq.as_string().size() > 0 ? static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)) * seq.as_string().size() : 0);
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += seq.as_string();
      return Value(std::move(out));
    }
    check_size(static_cast<size_t>(std::min<int64_t>(n, INT32_MAX)) * seq.as_list()->items.size());
    std::vector<Value> out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list()->items.begin(), seq.as_list()->items.end());
    return Value::list(std::move(out), seq.as_list()->is_tuple);
  }
  if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b));
  type_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name()));
}

bool Interpreter::compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.equals(b);
  if (op == "!=") return !a.equals(b);
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        a.require_defined();
        type_error(fmt::format("'in <string>' requires string as left operand, not {}", a.type_name()));
      }
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_list()) {
      for (auto& item : b.as_list()->items)
        if (item.equals(a)) found = true;
    } else if (b.is_mapping()) {
      found = b.as_dict()->find(a) != nullptr;
    } else if (b.is_undefined()) {
      found = false;
    } else {
      type_error(fmt::format("argument of type '{}' is not iterable", b.type_name()));
    }
    return op == "in" ? found : !found;
  }
  a.require_defined();
  b.require_defined();
  int c = compare_values(a, b, op);
  if (c == 2) return false;
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

}  // namespace tachyon::chat::jinja
