// JSON for the whole project: nlohmann::json under a short name, plus typed readers that
// fail with the path of the offending field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace tachyon {

using Json = nlohmann::json;

// Parses `text`; a syntax error becomes an Error naming `what` (a file name, "request body").
Json parse_json(std::string_view text, std::string_view what);

// Reads a whole file into a string; a missing or unreadable file is an Error naming it.
std::string read_file(const std::string& path);

}  // namespace tachyon
