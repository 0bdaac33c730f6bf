// JSON Schema -> grammar: each supported keyword accepts what the schema allows and
// rejects what it does not; unsupported keywords are refused with their name; integer
// ranges against brute force.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/cfg_runtime.h"
#include "sampling/json_schema_grammar.h"

namespace tachyon::sampling {
namespace {

using Json = nlohmann::ordered_json;

class SchemaMatcher {
 public:
  explicit SchemaMatcher(const std::string& schema)
      : gbnf_(json_schema_to_gbnf(Json::parse(schema))), rt_(Cfg::parse_gbnf(gbnf_)) {}
  bool accepts(std::string_view text) {
    uint32_t s = rt_.initial();
    for (char c : text)
      if ((s = rt_.step(s, static_cast<uint8_t>(c))) == CfgRuntime::kDead) return false;
    return rt_.is_complete(s);
  }
  const std::string& gbnf() const { return gbnf_; }

 private:
  std::string gbnf_;
  CfgRuntime rt_;
};

void expect(const std::string& schema, std::initializer_list<const char*> good, std::initializer_list<const char*> bad) {
  SchemaMatcher m(schema);
  for (const char* g : good) EXPECT_TRUE(m.accepts(g)) << schema << " should accept " << g << "\n" << m.gbnf();
  for (const char* b : bad) EXPECT_FALSE(m.accepts(b)) << schema << " should reject " << b << "\n" << m.gbnf();
}

TEST(JsonSchemaGrammarTest, ObjectsWithRequiredAndOptionalProperties) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
    "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})";
  expect(s, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a": -3, "b": "", "c": true})", R"({"b":"x","c":false})",
             "{\n  \"a\": 1,\n  \"b\": \"y\"\n}"},
         {R"({})", R"({"a":1})", R"({"b":"x","d":1})", R"({"b":"x",})", R"({"b":1})", R"({"c":true,"b":"x"})",
          R"( {"b":"x"})", R"({"b":"x"} )"});
  expect(R"({"type":"object","additionalProperties":false})", {"{}", "{ }"}, {R"({"a":1})"});
  expect(R"({"type":"object","additionalProperties":{"type":"number"}})", {"{}", R"({"x":1.5,"y":-2e3})"},
         {R"({"x":"s"})"});
  expect(R"({"type":"object"})", {"{}", R"({"any":[1,{"b":null}]})"}, {"[]"});
}

TEST(JsonSchemaGrammarTest, EnumsConstsAndEscapes) {
  expect(R"({"enum":["red","gr\"een","new\nline","ünï",3,null,{"k":[1]}]})",
         {R"("red")", R"("gr\"een")", R"("new\nline")", "\"\xC3\xBCn\xC3\xAF\"", "3", "null", R"({"k":[1]})"},
         {R"("blue")", R"("gr"een")", "4", R"({"k": [1]})"});
  expect(R"({"const":"fixed"})", {R"("fixed")"}, {R"("other")"});
}

TEST(JsonSchemaGrammarTest, ArraysWithBounds) {
  expect(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
         {"[1,2]", "[1, 2, 3]", "[ 1 ,2 ]"}, {"[]", "[1]", "[1,2,3,4]", "[1,\"a\"]"});
  expect(R"({"type":"array","items":{"type":"array","items":{"type":"boolean"},"maxItems":1}})",
         {"[]", "[[],[true]]"}, {"[[true,false]]"});
  expect(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
}

TEST(JsonSchemaGrammarTest, RefsDefsAndRecursion) {
  const std::string tree = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
    "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],"additionalProperties":false}},
    "$ref":"#/$defs/node"})";
  expect(tree, {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"},
         {R"({"v":1})", R"({"v":1,"kids":[{"v":2}]})"});
  expect(R"({"type":"object","properties":{"next":{"$ref":"#"}},"additionalProperties":false})",
         {"{}", R"({"next":{"next":{}}})"}, {R"({"next":1})"});
  expect(R"({"definitions":{"a":{"type":"string"}},"type":"array","items":{"$ref":"#/definitions/a"}})",
         {R"(["x"])"}, {"[1]"});
}

TEST(JsonSchemaGrammarTest, AnyOfTypeListsAndNullable) {
  expect(R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"a"},"x":{"type":"integer"}},"required":["kind","x"]},
           {"type":"object","properties":{"kind":{"const":"b"}},"required":["kind"]}]})",
         {R"({"kind":"a","x":1})", R"({"kind":"b"})"}, {R"({"kind":"a"})", R"({"kind":"c"})"});
  expect(R"({"type":["string","null"]})", {R"("s")", "null"}, {"1"});
  expect(R"({"type":"integer","nullable":true})", {"1", "null"}, {"\"1\""});
}

TEST(JsonSchemaGrammarTest, StringFormatsPatternsAndLengths) {
  expect(R"({"type":"string","format":"date-time"})", {R"("2024-02-28T13:05:59Z")", R"("1999-12-01T00:00:00.123+05:30")"},
         {R"("2024-13-01T00:00:00Z")", R"("2024-02-28 13:05:59Z")", R"("2024-02-28T13:05:59")"});
  expect(R"({"type":"string","format":"date"})", {R"("2024-01-09")"}, {R"("2024-1-09")"});
  expect(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"});
  expect(R"({"type":"string","format":"email"})", {R"("a.b@example.com")"}, {R"("a@b")", R"("@x.com")"});
  expect(R"({"type":"string","format":"ipv4"})", {R"("192.168.0.1")"}, {R"("256.1.1.1")", R"("1.2.3")"});
  expect(R"({"type":"string","pattern":"^[A-Z]{3}-\\d{2}$"})", {R"("ABC-12")"}, {R"("AB-12")", R"("xABC-12")"});
  expect(R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xxabyy")"}, {R"("a")"});
  expect(R"({"type":"string","pattern":"^a\"b$"})", {R"("a\"b")"}, {R"("a"b")"});
  expect(R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nc")", "\"\xC3\xA9\xC3\xA9\""},
         {R"("a")", R"("abcd")"});
}

TEST(JsonSchemaGrammarTest, NumberBounds) {
  expect(R"({"type":"number","minimum":0,"maximum":1})", {"0", "0.5", "1", "1.0", "0.999"}, {"-0.1", "1.5", "2", "01"});
  expect(R"({"type":"number","exclusiveMinimum":0})", {"0.1", "3", "12.5"}, {"0", "-1", "0.0"});
  expect(R"({"type":"integer","minimum":-5,"exclusiveMaximum":10})", {"-5", "0", "9"}, {"-6", "10", "-0", "01"});
}

TEST(JsonSchemaGrammarTest, FractionalBoundsAndMultiples) {
  expect(R"({"type":"number","minimum":-1.5,"maximum":2.75})", {"-1.5", "-1.49", "0", "2.75", "2.750", "1.999"},
         {"-1.51", "-2", "2.751", "2.76", "3", "-0", "-0.0"});
  expect(R"({"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":0.3})", {"0.11", "0.2", "0.29999", "0.1000001"},
         {"0.1", "0.10", "0.3", "0.3000", "0", "0.09"});
  expect(R"({"type":"number","maximum":-0.5})", {"-0.5", "-1", "-12.25"}, {"-0.49", "0", "1"});
  expect(R"({"type":"number","minimum":1e-7,"maximum":0.001})", {"0.0000001", "0.001", "0.0005"},
         {"0.00000009", "0.0011", "0"});
  expect(R"({"type":"number","multipleOf":0.01,"minimum":0,"maximum":10})", {"0", "1.5", "9.99", "10", "0.07"},
         {"1.234", "10.01", "-1"});
  expect(R"({"type":"number","multipleOf":1})", {"3", "-12", "0"}, {"3.5", "1.0"});
  expect(R"({"type":"number","multipleOf":0.25,"minimum":-1,"exclusiveMaximum":1})",
         {"-1", "-0.75", "0", "0.25", "0.75"}, {"1", "0.3", "-1.25", "0.1"});
  expect(R"({"type":"integer","multipleOf":5,"minimum":1,"maximum":22})", {"5", "10", "20"}, {"0", "25", "7", "1"});
  expect(R"({"type":"integer","multipleOf":0.5})", {"3", "-7"}, {"3.5"});
  // More digits than a double keeps would compare equal to an exclusive bound: capped at 15.
  expect(R"({"type":"number","exclusiveMaximum":1})", {"0.999999999999999"}, {"0.9999999999999999", "1"});
}

// Decimal bounds against brute force: every canonical decimal with up to three digits after
// the point in -13..13, accepted exactly when its double lies within the double bounds (what
// ajv checks), and never as "-0".
TEST(JsonSchemaGrammarTest, DecimalRangesAgainstBruteForce) {
  const char* bounds[][2] = {{"0.5", "2.25"}, {"-1.75", "-0.3"}, {"-0.05", "0.05"}, {nullptr, "3.14"},
                             {"2.5", nullptr}, {"0.1", "0.1"},   {"-12.999", "12.001"}, {"0", "0"},
                             {"-0.001", nullptr}, {"7", "11.5"}};
  std::vector<std::string> texts;
  for (int whole = 0; whole <= 13; ++whole)
    for (int digits = 0; digits <= 3; ++digits) {
      const int count = digits == 0 ? 1 : (digits == 1 ? 10 : digits == 2 ? 100 : 1000);
      for (int f = 0; f < count; ++f)
        for (const char* sign : {"", "-"})
          texts.push_back(digits == 0 ? fmt::format("{}{}", sign, whole)
                                      : fmt::format("{}{}.{:0{}d}", sign, whole, f, digits));
    }
  for (const auto& b : bounds) {
    for (int exclusive = 0; exclusive < 4; ++exclusive) {
      Json schema = {{"type", "number"}};
      if (b[0]) schema[exclusive & 1 ? "exclusiveMinimum" : "minimum"] = Json::parse(b[0]);
      if (b[1]) schema[exclusive & 2 ? "exclusiveMaximum" : "maximum"] = Json::parse(b[1]);
      const double lo = b[0] ? std::stod(b[0]) : -1e300, hi = b[1] ? std::stod(b[1]) : 1e300;
      std::string gbnf;
      try {
        gbnf = json_schema_to_gbnf(schema);
      } catch (const Error& e) {  // only an empty range is refused
        ASSERT_TRUE(b[0] && b[1] && std::stod(b[0]) == std::stod(b[1]) && exclusive) << schema.dump() << e.what();
        continue;
      }
      CfgRuntime rt(Cfg::parse_gbnf(gbnf));
      for (const std::string& text : texts) {
        const double v = std::stod(text);
        const bool in = ((exclusive & 1) ? v > lo : v >= lo) && ((exclusive & 2) ? v < hi : v <= hi);
        const bool negative_zero = text[0] == '-' && v == 0;
        uint32_t s = rt.initial();
        for (char c : text) s = rt.step(s, static_cast<uint8_t>(c));
        ASSERT_EQ(s != CfgRuntime::kDead && rt.is_complete(s), in && !negative_zero) << schema.dump() << ": " << text;
      }
    }
  }
}

TEST(JsonSchemaGrammarTest, IntegerRangesAgainstBruteForce) {
  const long long bounds[][2] = {{0, 0}, {0, 9}, {3, 57}, {-12, 7}, {-150, -3}, {99, 1001}, {10, 10}, {-1, 0}};
  for (const auto& b : bounds) {
    const long long lo = b[0], hi = b[1];
    const std::string gbnf = "root ::= " + integer_range_gbnf(&lo, &hi);
    CfgRuntime rt(Cfg::parse_gbnf(gbnf));
    for (long long v = -1200; v <= 1200; ++v) {
      const std::string text = std::to_string(v);
      uint32_t s = rt.initial();
      for (char c : text) s = rt.step(s, static_cast<uint8_t>(c));
      ASSERT_EQ(rt.is_complete(s), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    }
  }
  const long long lo = 42;
  CfgRuntime open(Cfg::parse_gbnf("root ::= " + integer_range_gbnf(&lo, nullptr)));
  for (long long v = 0; v <= 5000; ++v) {
    uint32_t s = open.initial();
    for (char c : std::to_string(v)) s = open.step(s, static_cast<uint8_t>(c));
    ASSERT_EQ(open.is_complete(s), v >= 42) << v;
  }
}

TEST(JsonSchemaGrammarTest, UnsupportedKeywordsAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"integer","multipleOf":3})", "'multipleOf' at #"},
      {R"({"type":"number","multipleOf":0.3,"minimum":0,"maximum":1000})", "'multipleOf' at #"},
      {R"({"type":"number","multipleOf":0})", "'multipleOf' at #"},
      {R"({"type":"number","minimum":1e16})", "'minimum' at #"},
      {R"({"type":"number","minimum":2.5,"exclusiveMaximum":2.5})", "'exclusiveMaximum' at #"},
      {R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})", "'uniqueItems' at #/properties/a"},
      {R"({"oneOf":[{"type":"string"}]})", "'oneOf'"},
      {R"({"not":{"type":"string"}})", "'not'"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"type":"string","format":"ipv6"})", "'format'"},
      {R"({"$ref":"https://example.com/s.json"})", "'$ref'"},
      {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
      {R"({"type":"number","exclusiveMinimum":true})", "'exclusiveMinimum'"},
      {R"({"type":"strin"})", "'type'"},
      {R"({"type":"string","pattern":"(a)\\1"})", "'pattern'"},
      {R"({"allOf":[{"type":"string"},{"minLength":1}]})", "'allOf'"},
      {R"({"type":"array","items":{"type":"string"},"maxItems":100000})", "'maxItems'"},
      {R"({"if":{},"then":{}})", "'if'"},
  };
  for (const auto& [schema, keyword] : cases) {
    try {
      json_schema_to_gbnf(Json::parse(schema));
      ADD_FAILURE() << schema << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << schema << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace tachyon::sampling

namespace tachyon::sampling {
namespace {

// Every schema of the end-to-end corpus compiles to a grammar the parser takes.
TEST(JsonSchemaGrammarTest, EndToEndCorpusCompiles) {
  std::ifstream in(std::string(TACHYON_SOURCE_DIR) + "/tests/e2e/fixtures/json_schemas.json");
  ASSERT_TRUE(in) << "tests/e2e/fixtures/json_schemas.json";
  const Json corpus = Json::parse(in);
  ASSERT_GE(corpus.size(), 50u);
  for (const Json& entry : corpus) {
    SCOPED_TRACE(entry["name"].get<std::string>());
    std::string gbnf;
    ASSERT_NO_THROW(gbnf = json_schema_to_gbnf(entry["schema"]));
    ASSERT_NO_THROW(Cfg::parse_gbnf(gbnf)) << gbnf;
  }
}

}  // namespace
}  // namespace tachyon::sampling
