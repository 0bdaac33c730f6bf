#include "server/structured_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/error.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace tachyon::server {

namespace {

std::shared_ptr<const engine::Cfg> compile(const std::string& key, const std::string& field,
                                           const std::function<std::string()>& gbnf) {
  try {
    return engine::GrammarCache::shared().get(key, gbnf);
  } catch (const Error& e) {
    throw ApiError::invalid(fmt::format("'{}': {}", field, e.what()), field);
  } catch (const nlohmann::json::exception& e) {  // a schema value of an unexpected type the compiler missed
    throw ApiError::invalid(fmt::format("'{}': the schema has a value of the wrong type ({})", field, e.what()), field);
  }
}

std::shared_ptr<const engine::Cfg> compile_schema(const OrderedJson& schema, const std::string& field) {
  return compile("json_schema:" + schema.dump(), field, [&] {
    engine::JsonGrammarBuilder b;
    b.add_rule("root", b.add_schema(schema, "schema"));
    return b.gbnf();
  });
}

std::shared_ptr<const engine::Cfg> compile_regex(const std::string& pattern, const std::string& field) {
  return compile("regex:" + pattern, field, [&] { return engine::regex_grammar(pattern); });
}

std::shared_ptr<const engine::Cfg> compile_choice(const OrderedJson& choices, const std::string& field) {
  if (!choices.is_array() || choices.empty() ||
      !std::all_of(choices.begin(), choices.end(), [](const OrderedJson& c) { return c.is_string(); }))
    throw ApiError::invalid(fmt::format("'{}' must be a non-empty array of strings", field), field);
  return compile("choice:" + choices.dump(), field, [&] {
    std::string g = "root ::=";
    for (size_t i = 0; i < choices.size(); ++i)
      g += (i ? " | " : " ") + engine::gbnf_literal(choices[i].get<std::string>());
    return g + "\n";
  });
}

std::shared_ptr<const engine::Cfg> compile_gbnf(const std::string& text, const std::string& field) {
  return compile("gbnf:" + text, field, [&] { return text; });
}

// A schema given as an object, or as JSON text (vLLM's guided_json accepts both).
OrderedJson schema_value(const OrderedJson& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    try {
      return OrderedJson::parse(v.get<std::string>());
    } catch (const std::exception&) {
      throw ApiError::invalid(fmt::format("'{}' is not valid JSON", field), field);
    }
  }
  throw ApiError::invalid(fmt::format("'{}' must be a JSON Schema object", field), field);
}

std::string string_value(const OrderedJson& v, const std::string& field) {
  if (!v.is_string()) throw ApiError::invalid(fmt::format("'{}' must be a string", field), field);
  return v.get<std::string>();
}

void set_constraint(ParsedRequest& out, std::string field, std::shared_ptr<const engine::Cfg> cfg) {
  if (out.output_constraint || out.json_object)
    throw ApiError::invalid(fmt::format("'{}' cannot be combined with '{}': give one structured-output field", field,
                                        out.output_constraint ? out.output_constraint->field : "response_format"),
                            field);
  auto c = std::make_shared<OutputConstraint>();
  c->field = std::move(field);
  c->cfg = std::move(cfg);
  out.output_constraint = std::move(c);
}

// {type: json_schema, json_schema: {name, schema, strict, description}} (chat) or the
// flattened {type: json_schema, name, schema, strict} (Responses' text.format).
void read_json_schema_format(const OrderedJson& spec, const std::string& path, ParsedRequest& out) {
  if (!spec.is_object()) throw ApiError::invalid(fmt::format("'{}' must be an object", path), path);
  reject_unknown_fields(spec, {"type", "name", "schema", "strict", "description"}, path);
  if (const OrderedJson* name = find_field(spec, "name"); name && !name->is_string())
    throw ApiError::invalid(fmt::format("'{}.name' must be a string", path), path + ".name");
  const OrderedJson* strict = find_field(spec, "strict");
  if (strict && !strict->is_boolean() && !strict->is_null())
    throw ApiError::invalid(fmt::format("'{}.strict' must be a boolean", path), path + ".strict");
  const OrderedJson* schema = find_field(spec, "schema");
  const std::string field = path + ".schema";
  // No schema: any JSON value (OpenAI treats it the same way).
  set_constraint(out, field, compile_schema(schema ? schema_value(*schema, field) : OrderedJson::object(), field));
}

// --- tool calls ---------------------------------------------------------------------------------

struct Tool {
  std::string name;
  OrderedJson parameters;
};

std::vector<Tool> offered_tools(const ParsedRequest& request) {
  std::vector<Tool> tools;
  for (const OrderedJson& t : request.tools) {
    const OrderedJson& fn = t["function"];
    Tool tool{fn.value("name", std::string()), fn.contains("parameters") ? fn["parameters"] : OrderedJson()};
    // A tool without a schema takes any object; OpenAI's shorthand {} means the same.
    if (tool.parameters.is_null() || tool.parameters.empty()) tool.parameters = {{"type", "object"}};
    if (request.tool_choice != ToolChoice::Named || tool.name == request.tool_name) tools.push_back(std::move(tool));
  }
  return tools;
}

// The code points of UTF-8 text (the openers here are valid UTF-8).
std::u32string code_points(std::string_view text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (size_t k = 1; k < len && i + k < text.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

std::string utf8_of(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// Text that never contains `opener`: one rule per matched prefix length (in code points), as
// in string search (the next state after a character is the longest prefix of `opener` that
// ends the text so far). Returns the start rule, `name`-0; rule `name`-k is the state after
// the text matched k code points of the opener.
std::string text_without(const std::string& opener, const std::string& name, std::string& rules) {
  const std::u32string target = code_points(opener);
  const size_t m = target.size();
  std::set<char32_t> chars(target.begin(), target.end());
  auto next_state = [&](size_t k, char32_t c) {
    const std::u32string seen = target.substr(0, k) + c;
    for (size_t len = std::min(seen.size(), m); len > 0; --len)
      if (seen.compare(seen.size() - len, len, target, 0, len) == 0) return len;
    return size_t{0};
  };
  std::string others = "[^";
  for (char32_t c : chars) {
    const bool plain = c > 0x20 && c < 0x7F && c != ']' && c != '\\' && c != '^' && c != '-';
    others += plain ? std::string(1, static_cast<char>(c)) : fmt::format("\\U{:08X}", static_cast<uint32_t>(c));
  }
  others += "]";
  for (size_t k = 0; k < m; ++k) {
    std::string body = fmt::format("\"\" | {} {}-0", others, name);
    for (char32_t c : chars) {
      const size_t to = next_state(k, c);
      if (to < m) body += fmt::format(" | {} {}-{}", engine::gbnf_literal(utf8_of(c)), name, to);
    }
    rules += fmt::format("{}-{} ::= {}\n", name, k, body);
  }
  return name + "-0";
}

struct CallSyntax {
  std::string prefix;  // special-token start written into the prompt (forced calls only)
};

// tool_choice auto: the answer is text (or the requested JSON object) as the model likes,
// but a call it starts, in its family's syntax, is held to that syntax and to the tool's
// schema (`call`: the rule of one call's body). Text never spells out a call's opener, so
// the output parser cannot see an unconstrained call in it. Special tokens are token
// references (<|channel|>): only the special token itself matches them.
std::string auto_tool_root(chat::ParserFamily family, const std::string& call, const std::string& content_rule,
                           engine::JsonGrammarBuilder& b, std::string& rules) {
  using chat::ParserFamily;
  switch (family) {
    case ParserFamily::kHermes:
    case ParserFamily::kGemma: {
      if (!content_rule.empty()) return content_rule + " | " + call;
      // The output parsers open a call at these markers (hermes.cpp, gemma.cpp), whatever follows.
      const std::string opener = family == ParserFamily::kHermes ? "<tool_call>" : "```tool_code";
      const std::string text = text_without(opener, "free-text", rules);
      return text + " ( " + call + " " + text + " )*";
    }
    case ParserFamily::kLlama3: {
      // A reply whose first non-space character is '{' or '[' is a call (llama3.cpp), and
      // <|python_tag|> anywhere starts one: text starts otherwise and never spells the tag.
      if (!content_rule.empty()) return content_rule + " | " + call;
      text_without("<|python_tag|>", "free-text", rules);
      return R"([ \t\n\r]{0,20} ( )" + call + R"( [ \t\n\r]{0,20} | [^ \t\n\r{[<] free-text-0 | "<" free-text-1 )?)";
    }
    case ParserFamily::kDeepseekV3: {
      b.add_rule("deepseek-call",
                 "<｜tool▁call▁begin｜> \"function\" <｜tool▁sep｜> " + call + " <｜tool▁call▁end｜>");
      const std::string calls = "<｜tool▁calls▁begin｜> deepseek-call ( \"\\n\"? deepseek-call )* <｜tool▁calls▁end｜>";
      if (!content_rule.empty()) return content_rule + " | " + calls;
      return text_without("<｜tool▁", "free-text", rules) + " ( " + calls + " )?";
    }
    case ParserFamily::kHarmony: {
      // Messages on the analysis and commentary channels, then the final answer or a call.
      const std::string text = text_without("<|", "free-text", rules);
      b.add_rule("harmony-between",
                 "<|channel|> ( \"analysis\" | \"commentary\" ) <|message|> " + text + " <|end|> <|start|> \"assistant\"");
      b.add_rule("harmony-final",
                 "<|channel|> \"final\" <|message|> " + (content_rule.empty() ? text : content_rule) + " <|return|>?");
      b.add_rule("harmony-call", "<|channel|> \"commentary to=functions.\" " + call + " <|call|>?");
      return "harmony-between* ( harmony-final | harmony-call )";
    }
    case ParserFamily::kPlain: break;
  }
  return content_rule;
}

}  // namespace

void read_structured_output(const OrderedJson& body, ParsedRequest& out) {
  if (const OrderedJson* format = read_object(body, "response_format")) {
    const std::string type = require_string(*format, "type", "response_format");
    if (type == "json_schema") {
      reject_unknown_fields(*format, {"type", "json_schema"}, "response_format");
      const OrderedJson* spec = find_field(*format, "json_schema");
      if (!spec) throw ApiError::invalid("'response_format.json_schema' is required", "response_format.json_schema");
      read_json_schema_format(*spec, "response_format.json_schema", out);
    } else if (type == "json_object") {
      if (const OrderedJson* schema = find_field(*format, "schema"))  // llama-server's form
        set_constraint(out, "response_format.schema", compile_schema(schema_value(*schema, "response_format.schema"),
                                                                     "response_format.schema"));
      else out.json_object = true;
    } else if (type != "text") {
      throw ApiError::invalid(
          fmt::format("response_format type '{}' is not supported (use text, json_object or json_schema)", type),
          "response_format");
    }
  }
  if (const OrderedJson* s = find_field(body, "json_schema"); s && !s->is_null())
    set_constraint(out, "json_schema", compile_schema(schema_value(*s, "json_schema"), "json_schema"));
  if (const OrderedJson* g = find_field(body, "grammar"); g && !g->is_null())
    set_constraint(out, "grammar", compile_gbnf(string_value(*g, "grammar"), "grammar"));
  if (const OrderedJson* s = find_field(body, "guided_json"); s && !s->is_null())
    set_constraint(out, "guided_json", compile_schema(schema_value(*s, "guided_json"), "guided_json"));
  if (const OrderedJson* r = find_field(body, "guided_regex"); r && !r->is_null())
    set_constraint(out, "guided_regex", compile_regex(string_value(*r, "guided_regex"), "guided_regex"));
  if (const OrderedJson* c = find_field(body, "guided_choice"); c && !c->is_null())
    set_constraint(out, "guided_choice", compile_choice(*c, "guided_choice"));
  if (const OrderedJson* g = find_field(body, "guided_grammar"); g && !g->is_null())
    set_constraint(out, "guided_grammar", compile_gbnf(string_value(*g, "guided_grammar"), "guided_grammar"));
  if (const OrderedJson* so = read_object(body, "structured_outputs")) {
    reject_unknown_fields(*so, {"json", "regex", "choice", "grammar"}, "structured_outputs");
    if (const OrderedJson* s = find_field(*so, "json"))
      set_constraint(out, "structured_outputs.json", compile_schema(schema_value(*s, "structured_outputs.json"),
                                                                    "structured_outputs.json"));
    if (const OrderedJson* r = find_field(*so, "regex"))
      set_constraint(out, "structured_outputs.regex",
                     compile_regex(string_value(*r, "structured_outputs.regex"), "structured_outputs.regex"));
    if (const OrderedJson* c = find_field(*so, "choice"))
      set_constraint(out, "structured_outputs.choice", compile_choice(*c, "structured_outputs.choice"));
    if (const OrderedJson* g = find_field(*so, "grammar"))
      set_constraint(out, "structured_outputs.grammar",
                     compile_gbnf(string_value(*g, "structured_outputs.grammar"), "structured_outputs.grammar"));
  }
}

void constrain_to_schema(const OrderedJson& schema, const std::string& field, ParsedRequest& out) {
  set_constraint(out, field, compile_schema(schema, field));
}

void read_text_format(const OrderedJson& format, ParsedRequest& out) {
  const std::string type = require_string(format, "type", "text.format");
  if (type == "json_object") out.json_object = true;
  else if (type == "json_schema") read_json_schema_format(format, "text.format", out);
  else if (type != "text")
    throw ApiError::invalid(fmt::format("text.format type '{}' is not supported (use text, json_object or json_schema)",
                                        type),
                            "text.format");
}

ConstrainedOutput build_output_grammar(const ParsedRequest& request, const chat::ParserOptions& parser) {
  using chat::ParserFamily;
  const bool forced = request.tool_choice == ToolChoice::Required || request.tool_choice == ToolChoice::Named;
  const bool tools_offered =
      request.tools.is_array() && !request.tools.empty() && request.tool_choice != ToolChoice::None;
  const bool auto_tools = tools_offered && !forced && parser.family != ParserFamily::kPlain;
  const bool content = request.output_constraint || request.json_object;
  ConstrainedOutput result;
  if (!forced && !content && !auto_tools) return result;

  // Content: the requested format, or (tools auto, no format) any text with valid calls.
  engine::JsonGrammarBuilder b;
  if (parser.family == ParserFamily::kGemma) b.use_python_literals();
  std::string rules;
  std::vector<std::string> calls;  // one alternative per tool
  CallSyntax syntax;
  if (forced || auto_tools) {
    const std::vector<Tool> tools = offered_tools(request);
    for (size_t i = 0; i < tools.size(); ++i) {
      const Tool& t = tools[i];
      const std::string field = fmt::format("tools[{}].function.parameters", i);
      const std::string name_json = OrderedJson(t.name).dump();
      try {
        switch (parser.family) {
          case ParserFamily::kHermes:
            calls.push_back(fmt::format("{} {} \"}}\"", engine::gbnf_literal("{\"name\": " + name_json + ", \"arguments\": "),
                                        b.add_schema(t.parameters, "tool-" + t.name)));
            break;
          case ParserFamily::kLlama3:
            calls.push_back(fmt::format("{} {} \"}}\"", engine::gbnf_literal("{\"name\": " + name_json + ", \"parameters\": "),
                                        b.add_schema(t.parameters, "tool-" + t.name)));
            break;
          case ParserFamily::kDeepseekV3:
            calls.push_back(fmt::format("{} {} {}", engine::gbnf_literal(t.name + "\n```json\n"),
                                        b.add_schema(t.parameters, "tool-" + t.name), engine::gbnf_literal("\n```")));
            break;
          case ParserFamily::kGemma:
            calls.push_back(fmt::format("{} {} {}", engine::gbnf_literal(t.name + "("),
                                        b.add_kwargs(t.parameters, "tool-" + t.name), engine::gbnf_literal(")")));
            break;
          case ParserFamily::kHarmony:  // forced: the header is the prompt's prefix; auto: the model writes it
            calls.push_back(forced ? b.add_schema(t.parameters, "tool-" + t.name)
                                   : fmt::format("{} <|constrain|> \"json\" <|message|> {}",
                                                 engine::gbnf_literal(t.name + " "),
                                                 b.add_schema(t.parameters, "tool-" + t.name)));
            break;
          case ParserFamily::kPlain:
            throw ApiError::invalid("this model has no tool-call format, so 'tool_choice' cannot force a call",
                                    "tool_choice");
        }
      } catch (const Error& e) {
        throw ApiError::invalid(fmt::format("'{}': {}", field, e.what()), field);
      }
    }
    switch (parser.family) {
      case ParserFamily::kDeepseekV3:
        if (forced) syntax.prefix = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>";
        break;
      case ParserFamily::kHarmony:
        if (!forced) break;
        if (tools.size() != 1)
          throw ApiError::invalid("the harmony tool-call format names the tool in special tokens, so a forced call "
                                  "must name one tool (tool_choice {\"type\": \"function\", ...}) or offer only one",
                                  "tool_choice");
        syntax.prefix = "<|channel|>commentary to=functions." + tools[0].name + " <|constrain|>json<|message|>";
        break;
      default: break;
    }
  }
  std::string call;
  if (!calls.empty()) {
    std::string body;
    for (size_t i = 0; i < calls.size(); ++i) body += (i ? " | " : "") + calls[i];
    b.add_rule("tool-call", body);
    call = "tool-call";
    if (parser.family == ParserFamily::kHermes) call = "\"<tool_call>\\n\" tool-call \"\\n</tool_call>\"";
    if (parser.family == ParserFamily::kGemma) call = "\"```tool_code\\n\" tool-call \"\\n```\"";
  }
  std::string content_rule;
  std::shared_ptr<const engine::Cfg> content_cfg;
  if (request.output_constraint) content_cfg = request.output_constraint->cfg;
  else if (request.json_object) content_rule = b.any_object();

  std::string root;
  if (forced) {
    root = call;
  } else if (auto_tools) {
    if (content_cfg) {  // a format and tools: the format's grammar alone (it is compiled on its own)
      root.clear();
    } else {
      root = auto_tool_root(parser.family, call, content_rule, b, rules);
    }
  } else if (!content_rule.empty()) {
    root = content_rule;
  }

  auto grammar = std::make_shared<engine::Grammar>();
  // A prompt that opened <think> gets it closed first: the constrained part is the answer
  // (free text with tool calls may think first on its own).
  const bool free_text = auto_tools && !content && !forced;
  if (parser.starts_in_reasoning && parser.family != ParserFamily::kHarmony && !free_text && syntax.prefix.empty())
    grammar->then_literal("</think>\n\n");
  if (!forced && request.json_object && !auto_tools) {
    grammar->then_json_object();  // the byte-level JSON matcher: no grammar to compile
  } else if (root.empty()) {
    grammar->then_rules(content_cfg);
  } else {
    b.add_rule("root", root);
    const std::string text = b.gbnf() + rules;
    grammar->then_rules(compile(std::string(forced ? "tools:" : "auto-tools:") +
                                    chat::parser_family_name(parser.family) + ":" + text,
                                "tools", [&] { return text; }));
  }
  result.grammar = std::move(grammar);
  result.prefix = syntax.prefix;
  if (syntax.prefix.size() && parser.starts_in_reasoning) result.prefix = "</think>\n\n" + result.prefix;
  return result;
}

}  // namespace tachyon::server
