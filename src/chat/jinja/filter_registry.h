// Internal to the filter implementation: the registry's entry type and the helpers the
// filter files share. Filters are split by what they work on: filters_text.cpp (strings,
// numbers, tojson) and filters_sequence.cpp (lists, dicts, attribute lookups).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/value.h"

namespace tachyon::chat::jinja {

using FilterFn = std::function<Value(Interpreter&, const Value&, CallArgs&)>;
using FilterTable = std::unordered_map<std::string, FilterFn>;

void add_text_filters(FilterTable& table);
void add_sequence_filters(FilterTable& table);

[[noreturn]] void filter_type_error(const std::string& message);
// A keyword-or-positional flag argument.
bool flag(const CallArgs& a, size_t index, const char* name, bool dflt = false);
// Iteration as Python's iter(): Undefined is empty, None and numbers are TypeErrors.
std::vector<Value> iterate(const Value& v);

}  // namespace tachyon::chat::jinja
