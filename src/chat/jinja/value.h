// The values a template computes with, modelled on the Python objects Jinja2 sees:
// Undefined, None, bool, int, float, str (UTF-8, indexed by code point), list/tuple,
// dict (insertion ordered), namespace, loop and callables. Lists and dicts are shared by
// reference like Python objects, so `ns.x = ...` and `loop` updates are visible to
// everyone holding the value.
//
//   Value v = Value::from_json(Json::parse(R"({"role": "user"})"));
//   v.get_item(Value("role")).to_str();   // "user"
//   v.repr();                             // "{'role': 'user'}"
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/json.h"

namespace tachyon::chat::jinja {

using OrderedJson = nlohmann::ordered_json;

class Value;
class Interpreter;

struct Undefined {
  std::string hint;  // the UndefinedError message if this value is used ("'x' is undefined")
};
struct None {};

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
};

// What kind of object a map-shaped value is: a dict, a namespace() (attribute
// assignment allowed, no dict methods) or a for-loop's `loop` object.
enum class ObjectKind { kDict, kNamespace, kLoop };

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
  ObjectKind kind = ObjectKind::kDict;
  const Value* find(const Value& key) const;
  void set(Value key, Value value);
};

// Arguments of a call: positional then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct FunctionData {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
  // Calling this raises SecurityError (a sandbox-blocked method such as list.append).
  std::string unsafe_message;
};

using ListPtr = std::shared_ptr<ListData>;
using DictPtr = std::shared_ptr<DictData>;
using FunctionPtr = std::shared_ptr<FunctionData>;

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, ListPtr, DictPtr,
                               FunctionPtr>;
  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}                       // NOLINT
  Value(Undefined u) : v_(std::move(u)) {}          // NOLINT
  Value(bool b) : v_(b) {}                          // NOLINT
  Value(int64_t i) : v_(i) {}                       // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}     // NOLINT
  Value(double d) : v_(d) {}                        // NOLINT
  Value(std::string s) : v_(std::move(s)) {}        // NOLINT
  Value(const char* s) : v_(std::string(s)) {}      // NOLINT
  Value(ListPtr l) : v_(std::move(l)) {}            // NOLINT
  Value(DictPtr d) : v_(std::move(d)) {}            // NOLINT
  Value(FunctionPtr f) : v_(std::move(f)) {}        // NOLINT

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value list(std::vector<Value> items = {}, bool is_tuple = false);
  static Value dict(ObjectKind kind = ObjectKind::kDict);
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);
  // JSON → Value. Use OrderedJson to keep object keys in document order (as Python's
  // json.loads does, and tojson then reproduces); tachyon::Json sorts keys.
  static Value from_json(const Json& json);
  static Value from_json(const OrderedJson& json);

  bool is_undefined() const { return v_.index() == 0; }
  bool is_none() const { return v_.index() == 1; }
  bool is_bool() const { return v_.index() == 2; }
  bool is_int() const { return v_.index() == 3; }
  bool is_float() const { return v_.index() == 4; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return v_.index() == 5; }
  bool is_list() const { return v_.index() == 6; }
  bool is_dict() const { return v_.index() == 7; }
  bool is_function() const { return v_.index() == 8; }
  bool is_mapping() const { return is_dict() && as_dict()->kind == ObjectKind::kDict; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ListPtr& as_list() const { return std::get<ListPtr>(v_); }
  const DictPtr& as_dict() const { return std::get<DictPtr>(v_); }
  const FunctionPtr& as_function() const { return std::get<FunctionPtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  double to_double() const;  // int, float or bool as a double

  // Python's name for the type ("str", "NoneType", "dict", ...), used in error messages.
  std::string type_name() const;
  bool truthy() const;
  std::string to_str() const;  // str(x); Undefined gives ""
  std::string repr(int depth = 0) const;  // repr(x); kLimit past 512 levels (self-nesting namespaces)
  // Python ==; numbers compare by value across int/float/bool.
  bool equals(const Value& other) const;
  // Throws UndefinedError when this is Undefined (for operations Undefined refuses).
  void require_defined() const;
  // Python-style iteration: str yields characters, dict its keys; Undefined is empty.
  std::vector<Value> iterate() const;
  // Length for `|length` / len(): code points of a str, items of list/dict; Undefined 0.
  int64_t length() const;
  // JSON for values that came from or map to JSON (functions and Undefined throw TypeError).
  Json to_json() const;

 private:
  Storage v_;
};

// Python's repr() of a float ("1.0", "1e+20", "0.1").
std::string float_repr(double value);

}  // namespace tachyon::chat::jinja
