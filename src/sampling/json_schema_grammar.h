// JSON Schema -> GBNF (cfg.h): the grammar of JSON texts that validate against a schema.
//
// The subset OpenAI's structured outputs accept, and a little more:
//   type (a name or a list), properties / required (declared order; optional properties may
//   be left out), additionalProperties (false, true or a schema: without `properties` the
//   object is a map of that schema; with them, only the declared properties are written,
//   which every such schema accepts), items with minItems / maxItems (<= 10000), enum,
//   const, anyOf, allOf of one schema, $ref to "#", "#/$defs/..." or any local JSON pointer
//   (recursion included), nullable (OpenAPI), strings with minLength / maxLength, pattern
//   (regex_grammar.h) or format (date-time, date, time, uuid, email, hostname, ipv4, uri),
//   integers and numbers with any minimum / maximum / exclusive bounds (decimal bounds are
//   exact: number_grammar.h), multipleOf (a power of ten such as 0.01 anywhere; another
//   step between a minimum and a maximum with at most 1000 multiples; on integers, an
//   integer step).
// Annotations (title, description, default, examples, $schema, $id, $comment, deprecated,
// readOnly, writeOnly, $defs, definitions, strict) are ignored. Any other keyword, or a
// supported one with a value outside what the grammar can express, is refused: the Error
// names the keyword and where it is ("JSON Schema keyword 'uniqueItems' at #/properties/n is
// not supported").
//
// Output is compact-friendly: whitespace between tokens is "", " " or a newline and up to 20
// spaces or tabs (so a model cannot pad forever); strings are valid UTF-8 with JSON escapes;
// enum and const values are written as nlohmann::json dumps them (no spaces).
//
//   JsonGrammarBuilder b;
//   b.add_rule("root", b.add_schema(schema, "answer"));
//   std::shared_ptr<const Cfg> cfg = Cfg::parse_gbnf(b.gbnf());
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/number_grammar.h"  // integer_range_gbnf

namespace tachyon::sampling {

class JsonGrammarBuilder {
 public:
  // Values in Python literal syntax instead (True / False / None; strings with only the
  // escapes \n \r \t \\ \"), for models that write tool calls as Python calls (Gemma).
  // Call before adding anything.
  void use_python_literals() { python_ = true; }
  // The rule for a Python call's keyword arguments `k=v, k2=v2` whose object would
  // validate against `schema` (an object schema; property names must be identifiers).
  std::string add_kwargs(const nlohmann::ordered_json& schema, std::string_view name);
  // Adds the rules for `schema` (its $refs resolve within it); returns the name of its rule,
  // derived from `name`.
  std::string add_schema(const nlohmann::ordered_json& schema, std::string_view name);
  // The rule for any JSON value / any JSON object.
  std::string any_value() { return base("json-value"); }
  std::string any_object() { return base("json-object"); }
  // The rule matching whitespace between JSON tokens.
  std::string whitespace() { return base("ws"); }
  // Adds `name ::= body` (name must be new).
  void add_rule(const std::string& name, const std::string& body);
  std::string gbnf() const;

 private:
  std::string unique_name(std::string_view hint);
  std::string base(const std::string& name);
  std::string visit(const nlohmann::ordered_json& s, const std::string& path, const std::string& hint);
  std::string visit_typed(const nlohmann::ordered_json& s, const std::string& type, const std::string& path,
                          const std::string& hint);
  std::string object_rule(const nlohmann::ordered_json& s, const std::string& path, const std::string& hint,
                          bool kwargs = false);
  std::string literal(const nlohmann::ordered_json& value) const;
  std::string array_rule(const nlohmann::ordered_json& s, const std::string& path, const std::string& hint);
  std::string string_expr(const nlohmann::ordered_json& s, const std::string& path);
  std::string number_expr(const nlohmann::ordered_json& s, bool integer, const std::string& path);
  std::string ref_rule(const std::string& ref, const std::string& path);

  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  const nlohmann::ordered_json* root_ = nullptr;
  std::map<std::string, std::string> refs_;  // per add_schema: "#/$defs/x" -> rule
  int depth_ = 0;
  bool python_ = false;
};

// The whole grammar for one schema (root rule "root"); throws Error as above.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

}  // namespace tachyon::sampling
