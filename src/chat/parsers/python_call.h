// Parses Python call syntax as models write tool calls in code (Gemma's ```tool_code
// blocks, Llama's <|python_tag|>brave_search.call(query="...")): `name(k=v, ...)` with
// literal arguments (str, int, float, True/False/None, lists, tuples, dicts).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/json.h"

namespace tachyon::chat::parsers {

struct PythonCall {
  std::string name;                   // dotted names kept as written ("brave_search.call")
  nlohmann::ordered_json arguments;   // keyword arguments as a JSON object
};

// The calls in `text`, one or more separated by newlines or ';'. nullopt unless the whole
// text is calls (positional arguments are refused: a tool call needs names).
std::optional<std::vector<PythonCall>> parse_python_calls(std::string_view text);

}  // namespace tachyon::chat::parsers
