// parse_json: whatever the text, a parsed document or a tachyon::Error naming the input.
#include "base/json.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace tachyon {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse_json(text, "tokenizer.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseJson, ParsesADocument) {
  EXPECT_EQ(parse_json(R"({"a": [1, 2.5e3]})", "x")["a"][1].get<double>(), 2500.0);
}

TEST(ParseJson, MalformedTextIsAnErrorNamingTheInput) {
  const std::string msg = error_of("{\"a\": ");
  EXPECT_NE(msg.find("tokenizer.json: not valid JSON"), std::string::npos) << msg;
}

// Found by fuzzing tokenizer.json (tests/fuzz/tokenizer/json_corpus/regression-number-overflow): nlohmann
// throws out_of_range, not parse_error, for a number past a double's range, and it escaped the loaders.
TEST(ParseJson, NumberPastADoubleIsAnErrorNamingTheInput) {
  for (const char* text : {"40000e000040004", R"({"model": {"dropout": 1e400}})", "[-1e99999]"}) {
    const std::string msg = error_of(text);
    EXPECT_NE(msg.find("tokenizer.json: not valid JSON"), std::string::npos) << text << ": " << msg;
    EXPECT_NE(msg.find("number overflow"), std::string::npos) << text << ": " << msg;
  }
}

}  // namespace
}  // namespace tachyon
