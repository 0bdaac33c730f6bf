// Typed field access for tokenizer.json with errors that name the JSON path of the bad
// value, e.g. "pre_tokenizer.pretokenizers[1].behavior: expected one of Removed, Isolated,
// ... got 'Foo'". `path` is the location of `object` itself ("" for the document root).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/json.h"

namespace tachyon::tokenizer {

inline std::string join_path(std::string_view path, std::string_view key) {
  if (path.empty()) return std::string(key);
  return std::string(path) + "." + std::string(key);
}
inline std::string index_path(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

inline const Json& require_object(const Json& value, std::string_view path) {
  if (!value.is_object()) throw Error("{}: expected an object, got {}", path, value.type_name());
  return value;
}

inline const Json& require_field(const Json& object, std::string_view key, std::string_view path) {
  require_object(object, path);
  auto it = object.find(key);
  if (it == object.end()) throw Error("{}: missing field", join_path(path, key));
  return *it;
}

// Missing or null -> nullptr.
inline const Json* optional_field(const Json& object, std::string_view key, std::string_view path) {
  require_object(object, path);
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::string get_string(const Json& object, std::string_view key, std::string_view path) {
  const Json& v = require_field(object, key, path);
  if (!v.is_string()) throw Error("{}: expected a string, got {}", join_path(path, key), v.type_name());
  return v.get<std::string>();
}

inline std::optional<std::string> get_optional_string(const Json& object, std::string_view key,
                                                      std::string_view path) {
  const Json* v = optional_field(object, key, path);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw Error("{}: expected a string, got {}", join_path(path, key), v->type_name());
  return v->get<std::string>();
}

inline bool get_bool(const Json& object, std::string_view key, std::string_view path, bool fallback) {
  const Json* v = optional_field(object, key, path);
  if (!v) return fallback;
  if (!v->is_boolean()) throw Error("{}: expected a boolean, got {}", join_path(path, key), v->type_name());
  return v->get<bool>();
}

inline int64_t get_int(const Json& object, std::string_view key, std::string_view path) {
  const Json& v = require_field(object, key, path);
  if (!v.is_number_integer()) throw Error("{}: expected an integer, got {}", join_path(path, key), v.type_name());
  return v.get<int64_t>();
}

inline const Json& get_array(const Json& object, std::string_view key, std::string_view path) {
  const Json& v = require_field(object, key, path);
  if (!v.is_array()) throw Error("{}: expected an array, got {}", join_path(path, key), v.type_name());
  return v;
}

// A token id: integer in [0, 2^31).
inline int32_t to_token_id(const Json& v, std::string_view path) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    throw Error("{}: expected a token id (non-negative integer), got {}", path, v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

// The "type" field of a pipeline stage.
inline std::string get_type(const Json& stage, std::string_view path) { return get_string(stage, "type", path); }

// A single character given as a one-code-point string (Metaspace replacement, Strip content).
char32_t get_char(const Json& object, std::string_view key, std::string_view path);

}  // namespace tachyon::tokenizer
