#include "sampling/json_schema_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/regex_grammar.h"

namespace tachyon::sampling {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;
constexpr long long kMaxItems = 10000;
constexpr long long kMaxIntegerBound = 1'000'000'000'000'000LL;  // 10^18
constexpr size_t kMaxMultiples = 1000;  // multipleOf with a step other than a power of ten

struct BaseRule {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};

// Rules every schema grammar may share, with the base rules each one refers to.
const std::vector<BaseRule>& base_rules() {
  static const std::vector<BaseRule> rules = {
      {"ws", R"(| " " | "\n" [ \t]{0,20})", {}},
      {"json-value", R"(json-object | json-array | json-string | json-number | "true" | "false" | "null")",
       {"json-object", "json-array", "json-string", "json-number"}},
      {"json-object",
       R"("{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}")",
       {"ws", "json-string", "json-value"}},
      {"json-array", R"("[" ws ( json-value ws ( "," ws json-value ws )* )? "]")", {"ws", "json-value"}},
      {"json-string", R"("\"" json-char* "\"")", {"json-char"}},
      {"json-char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
      {"json-number", R"("-"? json-int ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)", {"json-int"}},
      {"json-int", R"("0" | [1-9] [0-9]*)", {}},
      {"json-integer", R"("-"? json-int)", {"json-int"}},
      {"json-boolean", R"("true" | "false")", {}},
      {"json-null", R"("null")", {}},
      // Formats, as the text between the quotes. Days stop at 28 so that every date exists.
      {"format-date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ))", {}},
      {"format-time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"format-date-time", R"(format-date "T" format-time)", {"format-date", "format-time"}},
      {"format-uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})", {}},
      {"format-label", R"([a-zA-Z0-9] ( [a-zA-Z0-9-]{0,20} [a-zA-Z0-9] )?)", {}},
      {"format-hostname", R"(format-label ( "." format-label ){0,5})", {"format-label"}},
      {"format-email", R"([a-zA-Z0-9_+-]{1,30} ( "." [a-zA-Z0-9_+-]{1,30} ){0,3} "@" format-label ( "." format-label ){0,3} "." [a-zA-Z]{2,6})",
       {"format-label"}},
      {"format-ipv4", R"(format-octet "." format-octet "." format-octet "." format-octet)", {"format-octet"}},
      {"format-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])", {}},
      {"format-uri", R"("https://" format-hostname ( "/" [a-zA-Z0-9._~-]{0,30} ){0,8})", {"format-hostname"}},
  };
  return rules;
}

// Python literal syntax: the JSON rules that differ.
const std::vector<BaseRule>& python_rules() {
  static const std::vector<BaseRule> rules = {
      {"json-value", R"(json-object | json-array | json-string | json-number | "True" | "False" | "None")",
       {"json-object", "json-array", "json-string", "json-number"}},
      {"json-char", R"([^"\\\x00-\x1F] | "\\" ["\\nrt])", {}},
      {"json-boolean", R"("True" | "False")", {}},
      {"json-null", R"("None")", {}},
  };
  return rules;
}

std::string python_dump(const Json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_dump(v[i]);
    return out + "]";
  }
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) out += (first ? "" : ", ") + Json(k).dump() + ": " + python_dump(x), first = false;
    return out + "}";
  }
  return v.dump();
}

[[noreturn]] void refuse(std::string_view keyword, const std::string& path, std::string_view why = "is not supported") {
  throw Error("JSON Schema keyword '{}' at {} {}", keyword, path, why);
}

bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {"title",    "description", "default",   "examples",
                                                     "$schema",  "$id",         "$comment",  "deprecated",
                                                     "readOnly", "writeOnly",   "$defs",     "definitions",
                                                     "strict"};
  return kAnnotations.contains(key);
}

bool is_supported(const std::string& key) {
  static const std::set<std::string> kSupported = {
      "type",      "properties", "required",  "additionalProperties", "items",   "minItems",         "maxItems",
      "enum",      "const",      "anyOf",     "allOf",                "$ref",    "nullable",         "pattern",
      "format",    "minLength",  "maxLength", "minimum",              "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
  return kSupported.contains(key);
}

std::string child(const std::string& path, std::string_view key) { return path + "/" + std::string(key); }


}  // namespace

// --- the builder ------------------------------------------------------------------------------

std::string JsonGrammarBuilder::unique_name(std::string_view hint) {
  std::string name;
  for (char c : hint.substr(0, 40)) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
  if (name.empty() || name.starts_with("json-") || name.starts_with("format-") || name == "ws" || name == "root")
    name = "s-" + name;
  std::string candidate = name;
  for (int i = 2; names_.contains(candidate); ++i) candidate = fmt::format("{}-{}", name, i);
  names_.insert(candidate);
  return candidate;
}

void JsonGrammarBuilder::add_rule(const std::string& name, const std::string& body) {
  names_.insert(name);
  rules_.emplace_back(name, body);
}

std::string JsonGrammarBuilder::literal(const Json& value) const {
  return gbnf_literal(python_ ? python_dump(value) : value.dump());
}

std::string JsonGrammarBuilder::base(const std::string& name) {
  if (names_.contains(name)) return name;
  if (python_) {
    for (const BaseRule& r : python_rules()) {
      if (name != r.name) continue;
      add_rule(name, r.body);
      for (const char* use : r.uses) base(use);
      return name;
    }
  }
  for (const BaseRule& r : base_rules()) {
    if (name != r.name) continue;
    add_rule(name, r.body);
    for (const char* use : r.uses) base(use);
    if (std::string_view(r.body).find("ws") != std::string_view::npos && name != "ws") base("ws");
    return name;
  }
  throw Error("internal: no base grammar rule '{}'", name);
}

std::string JsonGrammarBuilder::gbnf() const {
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

std::string JsonGrammarBuilder::add_schema(const Json& schema, std::string_view name) {
  root_ = &schema;
  refs_.clear();
  depth_ = 0;
  const std::string rule = unique_name(name);
  const std::string body = visit(schema, "#", rule);
  add_rule(rule, body);
  root_ = nullptr;
  return rule;
}

std::string JsonGrammarBuilder::add_kwargs(const Json& schema, std::string_view name) {
  if (!schema.is_object()) throw Error("tool parameters must be a JSON Schema object");
  root_ = &schema;
  refs_.clear();
  depth_ = 0;
  for (const auto& [key, value] : schema.items())
    if (!is_annotation(key) && key != "type" && key != "properties" && key != "required" && key != "additionalProperties")
      refuse(key, "#", "on Python-call tool parameters is not supported");
  if (schema.contains("type") && schema["type"] != "object") refuse("type", "#", "of tool parameters must be 'object'");
  const std::string rule = object_rule(schema, "#", std::string(name), true);
  root_ = nullptr;
  return rule;
}

std::string JsonGrammarBuilder::ref_rule(const std::string& ref, const std::string& path) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  if (!ref.starts_with("#")) refuse("$ref", path, fmt::format("'{}' is not supported (only local references '#...')", ref));
  const Json* target = root_;
  std::string_view rest = std::string_view(ref).substr(1);
  if (!rest.empty() && rest[0] != '/') refuse("$ref", path, fmt::format("'{}' is not a JSON pointer", ref));
  while (!rest.empty()) {
    rest.remove_prefix(1);
    const size_t slash = rest.find('/');
    std::string token(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
    std::string key;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1'))
        key += token[++i] == '0' ? '~' : '/';
      else key += token[i];
    }
    if (target->is_object() && target->contains(key)) {
      target = &(*target)[key];
    } else if (target->is_array() && !key.empty() && key.size() < 10 && std::all_of(key.begin(), key.end(), ::isdigit) &&
               std::stoull(key) < target->size()) {
      target = &(*target)[std::stoull(key)];
    } else {
      refuse("$ref", path, fmt::format("'{}' points at nothing in the schema", ref));
    }
  }
  const size_t last = ref.rfind('/');
  const std::string name = unique_name(last == std::string::npos ? "root-ref" : ref.substr(last + 1));
  refs_.emplace(ref, name);
  const std::string body = visit(*target, ref, name);
  add_rule(name, body);
  return name;
}

std::string JsonGrammarBuilder::visit(const Json& s, const std::string& path, const std::string& hint) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return base("json-value");
    throw Error("JSON Schema at {} is 'false', which no value satisfies", path);
  }
  if (!s.is_object()) throw Error("JSON Schema at {} must be an object or a boolean, got {}", path, s.type_name());
  if (++depth_ > kMaxSchemaDepth) throw Error("JSON Schema at {} is nested deeper than {} levels", path, kMaxSchemaDepth);
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};

  std::vector<std::string> constraints;  // keywords besides annotations
  for (const auto& [key, value] : s.items()) {
    if (is_annotation(key)) continue;
    if (!is_supported(key)) refuse(key, path);
    constraints.push_back(key);
  }
  auto only = [&](std::string_view keyword, std::initializer_list<std::string_view> also) {
    for (const std::string& k : constraints)
      if (k != keyword && std::find(also.begin(), also.end(), k) == also.end())
        refuse(k, path, fmt::format("next to '{}' is not supported", keyword));
  };
  if (s.contains("$defs") && !s["$defs"].is_object()) refuse("$defs", path, "must be an object");

  std::string expr;
  if (s.contains("$ref")) {
    only("$ref", {});
    if (!s["$ref"].is_string()) refuse("$ref", path, "must be a string");
    return ref_rule(s["$ref"].get<std::string>(), path);
  }
  if (s.contains("nullable") && !s["nullable"].is_boolean()) refuse("nullable", path, "must be a boolean");
  const bool nullable = s.contains("nullable") && s["nullable"].get<bool>();
  auto with_null = [&](std::string e) { return nullable ? "( " + e + " | \"null\" )" : e; };
  if (s.contains("const")) {
    only("const", {"type", "nullable"});
    return with_null(literal(s["const"]));
  }
  if (s.contains("enum")) {
    only("enum", {"type", "nullable"});
    const Json& values = s["enum"];
    if (!values.is_array() || values.empty()) refuse("enum", path, "must be a non-empty array");
    std::string out = "(";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? " | " : " ") + literal(values[i]);
    return with_null(out + " )");
  }
  if (s.contains("anyOf") || s.contains("allOf")) {
    const std::string keyword = s.contains("anyOf") ? "anyOf" : "allOf";
    only(keyword, {"nullable"});
    const Json& subs = s[keyword];
    if (!subs.is_array() || subs.empty()) refuse(keyword, path, "must be a non-empty array");
    if (keyword == "allOf" && subs.size() != 1) refuse("allOf", path, "with more than one schema is not supported");
    std::string out = "(";
    for (size_t i = 0; i < subs.size(); ++i)
      out += (i ? " | " : " ") + visit(subs[i], child(child(path, keyword), std::to_string(i)), hint);
    return with_null(out + " )");
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const Json& x) { return x.is_string(); }))
      for (const Json& x : t) types.push_back(x.get<std::string>());
    else refuse("type", path, "must be a type name or a non-empty array of them");
  } else {
    auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
    };
    if (has({"properties", "required", "additionalProperties"})) types = {"object"};
    else if (has({"items", "minItems", "maxItems"})) types = {"array"};
    else if (has({"pattern", "format", "minLength", "maxLength"})) types = {"string"};
    else if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) types = {"number"};
    else return with_null(base("json-value"));
  }
  if (types.size() == 1) return with_null(visit_typed(s, types[0], path, hint));
  std::string out = "(";
  for (size_t i = 0; i < types.size(); ++i) out += (i ? " | " : " ") + visit_typed(s, types[i], path, hint);
  return with_null(out + " )");
}

std::string JsonGrammarBuilder::visit_typed(const Json& s, const std::string& type, const std::string& path,
                                            const std::string& hint) {
  if (type == "object") return object_rule(s, path, hint);
  if (type == "array") return array_rule(s, path, hint);
  if (type == "string") return string_expr(s, path);
  if (type == "number") return number_expr(s, false, path);
  if (type == "integer") return number_expr(s, true, path);
  if (type == "boolean") return base("json-boolean");
  if (type == "null") return base("json-null");
  refuse("type", path, fmt::format("'{}' is not a JSON Schema type", type));
}

std::string JsonGrammarBuilder::object_rule(const Json& s, const std::string& path, const std::string& hint,
                                            bool kwargs) {
  const std::string ws = base("ws");
  std::vector<std::pair<std::string, const Json*>> props;
  static const Json kAny = Json::object();
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) refuse("properties", path, "must be an object");
    for (const auto& [key, value] : s["properties"].items()) props.emplace_back(key, &value);
  }
  std::set<std::string> required;
  if (s.contains("required")) {
    const Json& r = s["required"];
    if (!r.is_array()) refuse("required", path, "must be an array of property names");
    for (const Json& name : r) {
      if (!name.is_string()) refuse("required", path, "must be an array of property names");
      required.insert(name.get<std::string>());
    }
  }
  const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  if (additional && !additional->is_boolean() && !additional->is_object())
    refuse("additionalProperties", path, "must be a boolean or a schema");
  for (const std::string& name : required) {
    if (std::any_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name; })) continue;
    if (additional && additional->is_boolean() && !additional->get<bool>())
      refuse("required", path, fmt::format("names '{}', which is not a property and additionalProperties is false", name));
    props.emplace_back(name, additional && additional->is_object() ? additional : &kAny);
  }
  const std::string name = unique_name(hint);
  if (kwargs) {  // keyword arguments: declared properties only, named as identifiers
    for (const auto& [key, schema] : props) {
      const bool identifier = !key.empty() && !std::isdigit(static_cast<unsigned char>(key[0])) &&
                              std::all_of(key.begin(), key.end(), [](char c) {
                                return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                              });
      if (!identifier) refuse("properties", path, fmt::format("name '{}', which is not a Python identifier", key));
    }
    if (props.empty()) {
      add_rule(name, "\"\"");
      return name;
    }
  } else if (props.empty()) {
    if (additional && additional->is_boolean() && !additional->get<bool>()) return "\"{\" " + ws + " \"}\"";
    if (!additional || additional->is_boolean()) return base("json-object");
    const std::string value = visit(*additional, child(path, "additionalProperties"), name + "-value");
    const std::string kv = fmt::format("{} {} \":\" {} {} {}", base("json-string"), ws, ws, value, ws);
    return fmt::format("\"{{\" {} ( {} ( \",\" {} {} )* )? \"}}\"", ws, kv, ws, kv);
  }
  std::vector<std::string> kvs;
  for (const auto& [key, schema] : props) {
    const std::string value = visit(*schema, child(child(path, "properties"), key), name + "-" + key);
    if (kwargs) kvs.push_back(fmt::format("{} \"=\" {}", gbnf_literal(key), value));
    else kvs.push_back(fmt::format("{} {} \":\" {} {} {}", literal(Json(key)), ws, ws, value, ws));
  }
  // S_i: properties i.. with none written yet; T_i: the same after one was written (each
  // one then starts with a comma). Required ones must appear, optional ones may.
  std::string s_next = "\"\"", t_next = "\"\"";
  for (size_t i = props.size(); i-- > 0;) {
    const bool req = required.contains(props[i].first);
    const std::string t_name = fmt::format("{}-t{}", name, i), s_name = fmt::format("{}-s{}", name, i);
    names_.insert(t_name);
    names_.insert(s_name);
    add_rule(t_name, req ? fmt::format("\",\" {} {} {}", ws, kvs[i], t_next)
                         : fmt::format("( \",\" {} {} )? {}", ws, kvs[i], t_next));
    add_rule(s_name, req ? fmt::format("{} {}", kvs[i], t_next) : fmt::format("{} {} | {}", kvs[i], t_next, s_next));
    t_next = t_name;
    s_next = s_name;
  }
  if (kwargs) add_rule(name, s_next);
  else add_rule(name, fmt::format("\"{{\" {} {} \"}}\"", ws, s_next));
  return name;
}

std::string JsonGrammarBuilder::array_rule(const Json& s, const std::string& path, const std::string& hint) {
  auto bound = [&](const char* key, long long fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > kMaxItems)
      refuse(key, path, fmt::format("must be an integer in 0..{}", kMaxItems));
    return v.get<long long>();
  };
  const long long min_items = bound("minItems", 0), max_items = bound("maxItems", -1);
  if (max_items >= 0 && max_items < min_items) refuse("maxItems", path, "is below minItems");
  const std::string ws = base("ws");
  const std::string name = unique_name(hint);
  if (max_items == 0) {
    add_rule(name, fmt::format("\"[\" {} \"]\"", ws));
    return name;
  }
  std::string item;
  if (s.contains("items")) {
    if (s["items"].is_array()) refuse("items", path, "as an array (tuple) is not supported");
    item = visit(s["items"], child(path, "items"), name + "-item");
  } else {
    item = base("json-value");
  }
  const std::string one = fmt::format("{} {}", item, ws);
  const long long more_min = std::max(0LL, min_items - 1);
  const std::string more = max_items < 0 ? fmt::format("{{{},}}", more_min) : fmt::format("{{{},{}}}", more_min, max_items - 1);
  const std::string items = fmt::format("{} ( \",\" {} {} ){}", one, ws, one, more);
  add_rule(name, min_items == 0 ? fmt::format("\"[\" {} ( {} )? \"]\"", ws, items)
                                : fmt::format("\"[\" {} {} \"]\"", ws, items));
  return name;
}

std::string JsonGrammarBuilder::string_expr(const Json& s, const std::string& path) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  if (s.contains("format")) {
    if (!s["format"].is_string()) refuse("format", path, "must be a string");
    const std::string format = s["format"].get<std::string>();
    if (s.contains("pattern") || has_len) refuse("format", path, "combined with pattern or a length is not supported");
    static const std::set<std::string> kFormats = {"date-time", "date", "time", "uuid", "email", "hostname", "ipv4", "uri"};
    if (!kFormats.contains(format)) refuse("format", path, fmt::format("'{}' is not supported", format));
    return "\"\\\"\" " + base("format-" + format) + " \"\\\"\"";
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) refuse("pattern", path, "must be a string");
    if (has_len) refuse("pattern", path, "combined with minLength or maxLength is not supported");
    RegexTranslation re;
    try {
      re = regex_to_gbnf(s["pattern"].get<std::string>(), RegexText::JsonString);
    } catch (const Error& e) {
      refuse("pattern", path, fmt::format("is not supported: {}", e.what()));
    }
    // A pattern matches anywhere in the string unless anchored.
    const std::string any = "[^\"\\\\\\x00-\\x1F]*";
    return fmt::format("\"\\\"\" {}{}{} \"\\\"\"", re.anchored_start ? "" : any + " ", re.gbnf,
                       re.anchored_end ? "" : " " + any);
  }
  if (!has_len) return base("json-string");
  auto bound = [&](const char* key, long long fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 10000)
      refuse(key, path, "must be an integer in 0..10000");
    return v.get<long long>();
  };
  const long long lo = bound("minLength", 0), hi = bound("maxLength", -1);
  if (hi >= 0 && hi < lo) refuse("maxLength", path, "is below minLength");
  const std::string chars = base("json-char");
  return hi < 0 ? fmt::format("\"\\\"\" {}{{{},}} \"\\\"\"", chars, lo)
                : fmt::format("\"\\\"\" {}{{{},{}}} \"\\\"\"", chars, lo, hi);
}

std::string JsonGrammarBuilder::number_expr(const Json& s, bool integer, const std::string& path) {
  const char* keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
  bool any = false;
  for (const char* k : keys) {
    if (!s.contains(k)) continue;
    any = true;
    if (!s[k].is_number()) refuse(k, path, "must be a number");
    const double limit = static_cast<double>(integer ? kMaxIntegerBound : kMaxNumberWhole);
    if (std::abs(s[k].get<double>()) >= limit)
      refuse(k, path, integer ? "beyond 10^18 is not supported" : "beyond 10^15 is not supported on a number");
  }
  if (!any) return base(integer ? "json-integer" : "json-number");
  // multipleOf = digits x 10^-scale: a power of ten ("digits" 1) limits the digits after the
  // point; any other step is written as the list of its multiples between the bounds.
  std::optional<Decimal> step;
  std::string step_digits;
  if (s.contains("multipleOf")) {
    step = decimal_from_json(s["multipleOf"]);
    if (step->negative || significant_digits(*step) == 0) refuse("multipleOf", path, "must be greater than 0");
    step_digits = step->whole + step->fraction;
    step_digits.erase(0, step_digits.find_first_not_of('0'));
  }
  if (integer) {
    long long lo = 0, hi = 0;
    bool has_lo = false, has_hi = false;
    auto tighten_lo = [&](long long v) { lo = has_lo ? std::max(lo, v) : v, has_lo = true; };
    auto tighten_hi = [&](long long v) { hi = has_hi ? std::min(hi, v) : v, has_hi = true; };
    if (s.contains("minimum")) tighten_lo(static_cast<long long>(std::ceil(s["minimum"].get<double>())));
    if (s.contains("exclusiveMinimum"))
      tighten_lo(static_cast<long long>(std::floor(s["exclusiveMinimum"].get<double>())) + 1);
    if (s.contains("maximum")) tighten_hi(static_cast<long long>(std::floor(s["maximum"].get<double>())));
    if (s.contains("exclusiveMaximum"))
      tighten_hi(static_cast<long long>(std::ceil(s["exclusiveMaximum"].get<double>())) - 1);
    if (has_lo && has_hi && hi < lo) refuse("maximum", path, "leaves no integer above the minimum");
    // Every integer is a multiple of a step whose digits divide 10^scale (1, 0.5, 0.25, 0.01, ...).
    bool every_integer = !step || step_digits == "1";
    if (step && !step->fraction.empty() && step_digits.size() <= 15) {
      const long long digits = std::stoll(step_digits);
      long long power = 1;
      for (size_t i = 0; i < step->fraction.size(); ++i) power = power * 10 % digits;
      every_integer = power == 0;
    }
    if (every_integer) {
      if (!has_lo && !has_hi) return base("json-integer");
      return integer_range_gbnf(has_lo ? &lo : nullptr, has_hi ? &hi : nullptr);
    }
    if (!step->fraction.empty())
      refuse("multipleOf", path, "on an integer is supported only as an integer or a fraction that divides 1 (0.5, 0.01, ...)");
    if (!has_lo || !has_hi)
      refuse("multipleOf", path, fmt::format("other than a power of ten needs both a minimum and a maximum (at most "
                                             "{} multiples between them)", kMaxMultiples));
    try {
      const auto text = multiples_gbnf(*step, NumberBound{decimal_from_json(Json(lo)), false},
                                       NumberBound{decimal_from_json(Json(hi)), false}, kMaxMultiples);
      if (!text) refuse("multipleOf", path, "leaves no integer between the bounds");
      return *text;
    } catch (const Error& e) {
      refuse("multipleOf", path, fmt::format("is not supported here: {}", e.what()));
    }
  }
  // Numbers: the tighter of minimum / exclusiveMinimum (exclusive when they are equal), the
  // same above.
  std::optional<NumberBound> lo, hi;
  auto tighten = [&](std::optional<NumberBound>& bound, const char* key, bool exclusive, int direction) {
    if (!s.contains(key)) return;
    const NumberBound b{decimal_from_json(s[key]), exclusive};
    const int c = bound ? compare(b.value, bound->value) * direction : 1;
    if (c > 0 || (c == 0 && exclusive)) bound = b;
  };
  tighten(lo, "minimum", false, 1);
  tighten(lo, "exclusiveMinimum", true, 1);
  tighten(hi, "maximum", false, -1);
  tighten(hi, "exclusiveMaximum", true, -1);
  std::optional<std::string> text;
  if (!step || step_digits == "1") {
    const size_t fraction_digits = step ? step->fraction.size() : 15;
    if (fraction_digits > 15) refuse("multipleOf", path, "below 10^-15 is not supported");
    text = decimal_range_gbnf(lo ? &*lo : nullptr, hi ? &*hi : nullptr, static_cast<int>(fraction_digits));
  } else {
    if (!lo || !hi)
      refuse("multipleOf", path, fmt::format("other than a power of ten needs both a minimum and a maximum (at most "
                                             "{} multiples between them)", kMaxMultiples));
    try {
      text = multiples_gbnf(*step, *lo, *hi, kMaxMultiples);
    } catch (const Error& e) {
      refuse("multipleOf", path, fmt::format("is not supported here: {}", e.what()));
    }
  }
  if (!text) refuse(hi ? (s.contains("maximum") ? "maximum" : "exclusiveMaximum") : "multipleOf", path,
                    "leaves no number the schema allows");
  return *text;
}

std::string json_schema_to_gbnf(const Json& schema) {
  JsonGrammarBuilder b;
  b.add_rule("root", b.add_schema(schema, "schema"));
  return b.gbnf();
}

}  // namespace tachyon::sampling
