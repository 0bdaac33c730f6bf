#include "chat/jinja/value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

const Value* DictData::find(const Value& key) const {
  for (auto& [k, v] : items)
    if (k.equals(key) && (k.is_string() == key.is_string())) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (k.equals(key) && (k.is_string() == key.is_string())) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  auto l = std::make_shared<ListData>();
  l->items = std::move(items);
  l->is_tuple = is_tuple;
  return Value(std::move(l));
}

Value Value::dict(ObjectKind kind) {
  auto d = std::make_shared<DictData>();
  d->kind = kind;
  return Value(std::move(d));
}

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  auto f = std::make_shared<FunctionData>();
  f->name = std::move(name);
  f->call = std::move(call);
  return Value(std::move(f));
}

namespace {

template <typename J>
Value value_from_json(const J& json, int depth) {
  if (depth > 512) throw TemplateError(ErrorKind::kLimit, "JSON input nested too deeply");
  using value_t = typename J::value_t;
  switch (json.type()) {
    case value_t::null: return Value(None{});
    case value_t::boolean: return Value(json.template get<bool>());
    case value_t::number_integer: return Value(json.template get<int64_t>());
    case value_t::number_unsigned: {
      auto u = json.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case value_t::number_float: return Value(json.template get<double>());
    case value_t::string: return Value(json.template get<std::string>());
    case value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (auto& item : json) items.push_back(value_from_json(item, depth + 1));
      return Value::list(std::move(items));
    }
    case value_t::object: {
      Value d = Value::dict();
      for (auto it = json.begin(); it != json.end(); ++it)
        d.as_dict()->items.emplace_back(Value(it.key()), value_from_json(it.value(), depth + 1));
      return d;
    }
    default: return Value(None{});
  }
}

}  // namespace

Value Value::from_json(const Json& json) { return value_from_json(json, 0); }
Value Value::from_json(const OrderedJson& json) { return value_from_json(json, 0); }

double Value::to_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return as_float();
}

std::string Value::type_name() const {
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return as_list()->is_tuple ? "tuple" : "list";
    case 7:
      switch (as_dict()->kind) {
        case ObjectKind::kDict: return "dict";
        case ObjectKind::kNamespace: return "Namespace";
        case ObjectKind::kLoop: return "LoopContext";
      }
      return "dict";
    default: return "function";
  }
}

bool Value::truthy() const {
  switch (v_.index()) {
    case 0:
    case 1: return false;
    case 2: return as_bool();
    case 3: return as_int() != 0;
    case 4: return as_float() != 0.0;
    case 5: return !as_string().empty();
    case 6: return !as_list()->items.empty();
    case 7: return as_dict()->kind != ObjectKind::kDict || !as_dict()->items.empty();
    default: return true;
  }
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: scientific when the exponent is
  // below -4 or at least 16, otherwise positional with at least one fractional digit.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    auto int_len = static_cast<size_t>(exponent + 1);
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return negative ? "-" + out : out;
}

std::string Value::to_str() const {
  switch (v_.index()) {
    case 0: return "";
    case 5: return as_string();
    default: return repr();
  }
}

std::string Value::repr(int depth) const {
  if (depth > 512) throw TemplateError(ErrorKind::kLimit, "value nested too deeply to print");
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "None";
    case 2: return as_bool() ? "True" : "False";
    case 3: return std::to_string(as_int());
    case 4: return float_repr(as_float());
    case 5: return pystr::repr(as_string());
    case 6: {
      auto& l = *as_list();
      std::string out = l.is_tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += l.items[i].repr(depth + 1);
      }
      if (l.is_tuple && l.items.size() == 1) out += ",";
      out += l.is_tuple ? ")" : "]";
      return out;
    }
    case 7: {
      auto& d = *as_dict();
      std::string out = "{";
      for (size_t i = 0; i < d.items.size(); ++i) {
        if (i) out += ", ";
        out += d.items[i].first.repr(depth + 1) + ": " + d.items[i].second.repr(depth + 1);
      }
      out += "}";
      if (d.kind == ObjectKind::kNamespace) return "<Namespace " + out + ">";
      if (d.kind == ObjectKind::kLoop) return "<LoopContext>";
      return out;
    }
    default: return "<function " + as_function()->name + ">";
  }
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return to_double() == other.to_double();
    auto as_i = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); };
    return as_i(*this) == as_i(other);
  }
  if (v_.index() != other.v_.index()) return false;
  switch (v_.index()) {
    case 0:
    case 1: return true;
    case 5: return as_string() == other.as_string();
    case 6: {
      auto& a = as_list()->items;
      auto& b = other.as_list()->items;
      if (as_list()->is_tuple != other.as_list()->is_tuple || a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (!a[i].equals(b[i])) return false;
      return true;
    }
    case 7: {
      if (as_dict()->kind != ObjectKind::kDict || other.as_dict()->kind != ObjectKind::kDict)
        return as_dict() == other.as_dict();
      auto& a = as_dict()->items;
      auto& b = other.as_dict()->items;
      if (a.size() != b.size()) return false;
      for (auto& [k, v] : a) {
        const Value* o = other.as_dict()->find(k);
        if (!o || !o->equals(v)) return false;
      }
      return true;
    }
    default: return as_function() == other.as_function();
  }
}

void Value::require_defined() const {
  if (is_undefined()) throw TemplateError(ErrorKind::kUndefined, undefined_hint());
}

std::vector<Value> Value::iterate() const {
  switch (v_.index()) {
    case 0: return {};
    case 5: {
      std::vector<Value> out;
      for (auto cp : pystr::code_points(as_string())) out.emplace_back(std::string(cp));
      return out;
    }
    case 6: return as_list()->items;
    case 7: {
      if (as_dict()->kind != ObjectKind::kDict)
        throw TemplateError(ErrorKind::kType, fmt::format("'{}' object is not iterable", type_name()));
      std::vector<Value> out;
      for (auto& [k, v] : as_dict()->items) out.push_back(k);
      return out;
    }
    default:
      throw TemplateError(ErrorKind::kType, fmt::format("'{}' object is not iterable", type_name()));
  }
}

int64_t Value::length() const {
  switch (v_.index()) {
    case 0: return 0;
    case 5: return pystr::length(as_string());
    case 6: return static_cast<int64_t>(as_list()->items.size());
    case 7:
      if (as_dict()->kind == ObjectKind::kDict) return static_cast<int64_t>(as_dict()->items.size());
      [[fallthrough]];
    default:
      throw TemplateError(ErrorKind::kType, fmt::format("object of type '{}' has no len()", type_name()));
  }
}

Json Value::to_json() const {
  switch (v_.index()) {
    case 1: return nullptr;
    case 2: return as_bool();
    case 3: return as_int();
    case 4: return as_float();
    case 5: return as_string();
    case 6: {
      Json out = Json::array();
      for (auto& item : as_list()->items) out.push_back(item.to_json());
      return out;
    }
    case 7: {
      if (as_dict()->kind != ObjectKind::kDict) break;
      Json out = Json::object();
      for (auto& [k, v] : as_dict()->items) out[k.to_str()] = v.to_json();
      return out;
    }
    default: break;
  }
  throw TemplateError(ErrorKind::kType, fmt::format("Object of type {} is not JSON serializable", type_name()));
}

}  // namespace tachyon::chat::jinja
