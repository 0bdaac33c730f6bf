// A fast path for the two big members of tokenizer.json, model.vocab and model.merges
// (hundreds of thousands of entries: a full JSON DOM of them takes most of the load time).
// `scan_model_tables` finds them with a minimal scanner and decodes them straight into
// plain vectors; the caller parses the rest of the document (with those two values
// blanked) through nlohmann::json as usual. Any surprise -> returns false and the caller
// takes the ordinary path, which also produces the precise error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tachyon::tokenizer {

struct ModelTables {
  std::vector<std::pair<std::string, int32_t>> vocab;         // in file order
  std::vector<std::pair<std::string, std::string>> merges;    // "a b" strings split at the first space
  bool has_merges = false;
  std::string rest;  // the document with model.vocab replaced by {} and model.merges by []
};

bool scan_model_tables(std::string_view json, ModelTables* out);

}  // namespace tachyon::tokenizer
