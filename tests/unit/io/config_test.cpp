// config.json's integer fields: whole numbers convert, anything else is an error naming the field.
#include "io/config.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace tachyon::io {
namespace {

std::string error_of(const char* json_text) {
  try {
    json_int(Json::parse(json_text), "num_attention_heads", "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigJsonInt, WholeNumbersConvert) {
  EXPECT_EQ(json_int(Json::parse(R"({"n": 32})"), "n", "config.json"), 32);
  EXPECT_EQ(json_int(Json::parse(R"({"n": 32.0})"), "n", "config.json"), 32);
  EXPECT_EQ(json_int(Json::parse(R"({"n": -4e3})"), "n", "config.json"), -4000);
  EXPECT_EQ(json_int(Json::parse(R"({"n": 9223372036854775807})"), "n", "config.json"), INT64_MAX);
}

TEST(ConfigJsonInt, FractionsAreNotIntegers) {
  const std::string msg = error_of(R"({"num_attention_heads": 2.5})");
  EXPECT_NE(msg.find("config.json: field 'num_attention_heads' must be an integer"), std::string::npos) << msg;
}

// Found by fuzzing config.json (tests/fuzz/io/corpus/regression-config-huge-int): a number past
// int64 was cast from double, undefined behaviour that UBSan stopped on.
TEST(ConfigJsonInt, NumbersPastInt64AreOutOfRange) {
  for (const char* text : {R"({"num_attention_heads": 455555555555555555555555555555555555555555})",
                           R"({"num_attention_heads": -1e300})", R"({"num_attention_heads": 9223372036854775808})",
                           R"({"num_attention_heads": 18446744073709551615})"}) {
    const std::string msg = error_of(text);
    EXPECT_NE(msg.find("config.json: field 'num_attention_heads' is out of range for an integer"), std::string::npos)
        << text << ": " << msg;
  }
}

// Found by fuzzing config.json (tests/fuzz/io/corpus/regression-config-huge-layer-count): a
// num_hidden_layers of 2.9e15 sized the derived layer_types list until the process ran out of
// memory. Refused, naming the field; the largest count allowed still parses.
TEST(ModelConfig, AHugeLayerCountIsRefusedBeforeAnythingIsSizedByIt) {
  Json config = Json::parse(R"({"model_type": "qwen3", "vocab_size": 512, "hidden_size": 64,
                                "num_attention_heads": 4, "num_hidden_layers": 2888888888888888})");
  try {
    parse_model_config(config, "config.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: num_hidden_layers 2888888888888888 is more than the 4096"),
              std::string::npos)
        << e.what();
  }
  config["num_hidden_layers"] = kMaxHiddenLayers;
  EXPECT_EQ(parse_model_config(config, "config.json").layer_types.size(), static_cast<size_t>(kMaxHiddenLayers));
}

}  // namespace
}  // namespace tachyon::io
