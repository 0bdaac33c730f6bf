// The builtins a chat template can reach: filters, tests, methods of str/dict/list and
// the global functions. This is the whole surface of the sandbox: there is no way to
// name anything else (no imports, no attribute walks to Python internals).
#pragma once

#include <optional>
#include <string>

#include "chat/jinja/value.h"

namespace tachyon::chat::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// Applies filter `name` to `input`; the args exclude the input.
Value call_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);
bool call_test(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args);
// A bound method of a str, dict or list (`"a".upper`), or nullopt if the type has none.
std::optional<Value> get_method(const Value& obj, const std::string& name);
// range, namespace, dict, raise_exception, strftime_now.
void add_globals(Interpreter& interp);

// json.dumps(value, ensure_ascii, indent, separators, sort_keys) as Python writes it.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: single line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& value, const JsonDumpOptions& options);

// Python's `format % args` for the conversions templates use (%s %r %d %i %f %x %%).
std::string percent_format(const std::string& format, const Value& args);
// str.format(*args, **kwargs) with {}, {0}, {name} fields and str() conversion.
std::string brace_format(const std::string& format, const CallArgs& args);

// Argument binding helper: positional-or-keyword parameter `index`/`name`, or nullopt.
const Value* find_arg(const CallArgs& args, size_t index, const char* name);

}  // namespace tachyon::chat::jinja
