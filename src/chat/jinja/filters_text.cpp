// Filters on strings and numbers, and transformers' tojson (json.dumps with
// ensure_ascii=False, no HTML escaping).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/filter_registry.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

[[noreturn]] void type_error(const std::string& message) { filter_type_error(message); }

// Python's regex \w on str: letters, digits, numerics and '_'; marks, punctuation,
// symbols (emoji included) and spaces are not word characters.
bool is_word_char(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA || c == 0xB2 || c == 0xB3 || c == 0xB9 || (c >= 0xBC && c <= 0xBE);
  if (c == 0xD7 || c == 0xF7) return false;
  if (pystr::is_space(c)) return false;
  if ((c >= 0x300 && c <= 0x36F) || (c >= 0x483 && c <= 0x489) || (c >= 0x591 && c <= 0x5C7) ||
      (c >= 0x610 && c <= 0x61A) || (c >= 0x64B && c <= 0x65F) || c == 0x670 || (c >= 0x6D6 && c <= 0x6ED) ||
      (c >= 0x600 && c <= 0x60F) || c == 0x61B || c == 0x61F || (c >= 0x66A && c <= 0x66D) || c == 0x6D4 ||
      (c >= 0x900 && c <= 0x903) || (c >= 0x93A && c <= 0x94F && c != 0x93D) || (c >= 0x951 && c <= 0x957) ||
      (c >= 0x962 && c <= 0x965) || c == 0x970)
    return false;
  if ((c >= 0x2000 && c <= 0x206F) || (c >= 0x20A0 && c <= 0x20FF) || (c >= 0x2100 && c <= 0x214F && c != 0x2102 && c != 0x2107 && !(c >= 0x210A && c <= 0x2113) && c != 0x2115 && !(c >= 0x2119 && c <= 0x211D) && c != 0x2124 && c != 0x2126 && c != 0x2128 && !(c >= 0x212A && c <= 0x212D) && !(c >= 0x212F && c <= 0x2139) && !(c >= 0x213C && c <= 0x213F) && !(c >= 0x2145 && c <= 0x2149) && c != 0x214E) ||
      (c >= 0x2190 && c <= 0x245F) || (c >= 0x2500 && c <= 0x2775) || (c >= 0x2794 && c <= 0x2BFF) ||
      (c >= 0x2E00 && c <= 0x2E7F) || (c >= 0x3000 && c <= 0x3004) || (c >= 0x3008 && c <= 0x3020) ||
      c == 0x3030 || c == 0x303D || (c >= 0x3099 && c <= 0x309C) || c == 0x30A0 || c == 0x30FB ||
      (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE10 && c <= 0xFE6F) || (c >= 0xFF00 && c <= 0xFF0F) ||
      (c >= 0xFF1A && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40 && c != 0xFF3F) || (c >= 0xFF5B && c <= 0xFF65) ||
      (c >= 0xFFF0 && c <= 0xFFFF) || (c >= 0x1F000 && c <= 0x1FAFF) || (c >= 0xE0000 && c <= 0xE007F) ||
      (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF))
    return false;
  return true;
}

Value html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

// Python's int(str, base) for bases 2..36 and 0 is not needed; base 10/16/8/2 cover templates.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_' && s[i - 1] != '-' && s[i - 1] != '+') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(digits.c_str(), &end, base);
  if (errno == ERANGE || *end != '\0' || end == digits.c_str() || std::isspace(static_cast<unsigned char>(digits[0])))
    return std::nullopt;
  return v;
}

std::optional<double> parse_float(const std::string& text) {
  std::string s = pystr::strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  std::string lower = pystr::lower(s);
  std::string body = (lower[0] == '+' || lower[0] == '-') ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -v : v;
  }
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' || c == '_')) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value do_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  JsonDumpOptions o;
  o.ensure_ascii = flag(a, 0, "ensure_ascii");
  const Value* indent = find_arg(a, 1, "indent");
  if (indent && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->as_string();
    } else if (indent->is_int() || indent->is_bool()) {
      int64_t n = indent->is_bool() ? indent->as_bool() : indent->as_int();
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 64)), ' ');
    } else {
      type_error(fmt::format("can't multiply sequence by non-int of type '{}'", indent->type_name()));
    }
    o.item_separator = ",";
  }
  const Value* seps = find_arg(a, 2, "separators");
  if (seps && !seps->is_none()) {
    auto parts = iterate(*seps);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
      throw TemplateError(ErrorKind::kValue, "separators must be a pair of strings");
    o.item_separator = parts[0].as_string();
    o.key_separator = parts[1].as_string();
  }
  o.sort_keys = flag(a, 3, "sort_keys");
  std::string out = json_dumps(v, o);
  in.check_size(out.size());
  return Value(std::move(out));
}

Value do_indent(Interpreter& in, const Value& v, CallArgs& a) {
  v.require_defined();
  if (!v.is_string()) type_error(fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", v.type_name()));
  const Value* w = find_arg(a, 0, "width");
  std::string indention = "    ";
  if (w) {
    if (w->is_string()) {
      indention = w->as_string();
    } else if (w->is_int()) {
      indention = std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1024)), ' ');
    } else {
      type_error("indent width must be an int or str");
    }
  }
  bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  std::string s = v.as_string() + "\n";
  CallArgs none;
  Value lines_v = *get_method(Value(s), "splitlines");
  std::vector<Value> lines = in.call(lines_v, none).as_list()->items;
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv.append("\n").append(indention);
      rv.append(lines[i].as_string());
    }
  } else {
    rv = lines.empty() ? "" : lines[0].as_string();
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].as_string().empty()) rv += indention;
      rv += lines[i].as_string();
    }
  }
  if (first) rv.insert(0, indention);
  in.check_size(rv.size());
  return Value(std::move(rv));
}

Value do_title(const Value& v) {
  // Jinja's title: split on runs of [-\s({\[<], uppercase each piece's first character.
  std::string s = v.to_str(), out;
  bool at_start = true;
  for (auto cp : pystr::code_points(s)) {
    uint32_t c = pystr::decode_one(cp);
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
    if (sep) {
      out += cp;
      at_start = true;
      continue;
    }
    out += at_start ? pystr::upper(std::string(cp)) : pystr::lower(std::string(cp));
    at_start = false;
  }
  return Value(std::move(out));
}

Value do_round(const Value& v, CallArgs& a) {
  v.require_defined();
  if (!v.is_number()) type_error(fmt::format("type {} doesn't define __round__ method", v.type_name()));
  const Value* p = find_arg(a, 0, "precision");
  int64_t precision = p ? (p->is_int() ? p->as_int() : 0) : 0;
  const Value* m = find_arg(a, 1, "method");
  std::string method = m ? m->to_str() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw TemplateError(ErrorKind::kRuntime, "method must be common, ceil or floor");
  double x = v.to_double();
  precision = std::clamp<int64_t>(precision, -300, 300);
  if (method == "common") {
    if (v.is_int() || v.is_bool()) {
      if (precision >= 0) return Value(static_cast<int64_t>(x));
    }
    if (!std::isfinite(x)) return v;
    if (precision >= 0) {
      // printf rounds the exact binary value half-to-even, as Python's round does.
      std::string s = fmt::format("{:.{}f}", x, precision);
      return Value(std::strtod(s.c_str(), nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value(std::nearbyint(x / scale) * scale);
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double r = (method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale;
  return Value(r);
}

}  // namespace

void add_text_filters(FilterTable& table) {
  table.insert({
    {"tojson", do_tojson},
    {"trim",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value* chars = find_arg(a, 0, "chars");
       std::optional<std::string> c;
       if (chars && !chars->is_none()) c = chars->to_str();
       return Value(pystr::strip(v.to_str(), c, true, true));
     }},
    {"length", [](Interpreter&, const Value& v, CallArgs&) { return Value(v.length()); }},
    {"default",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value* d = find_arg(a, 0, "default_value");
       bool boolean = flag(a, 1, "boolean");
       if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value("");
       return v;
     }},
    {"string", [](Interpreter&, const Value& v, CallArgs&) { return Value(v.to_str()); }},
    {"safe", [](Interpreter&, const Value& v, CallArgs&) { return Value(v.to_str()); }},
    {"int",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value* d = find_arg(a, 0, "default");
       const Value* b = find_arg(a, 1, "base");
       int base = b && b->is_int() ? static_cast<int>(std::clamp<int64_t>(b->as_int(), 2, 36)) : 10;
       v.require_defined();
       if (v.is_int()) return v;
       if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
       if (v.is_float() && std::isfinite(v.as_float()) && std::fabs(v.as_float()) < 9.2e18)
         return Value(static_cast<int64_t>(v.as_float()));
       if (v.is_string()) {
         if (auto i = parse_int(v.as_string(), base)) return Value(*i);
         if (auto f = parse_float(v.as_string()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
           return Value(static_cast<int64_t>(*f));
       }
       return d ? *d : Value(0);
     }},
    {"float",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value* d = find_arg(a, 0, "default");
       v.require_defined();
       if (v.is_number()) return Value(v.to_double());
       if (v.is_string())
         if (auto f = parse_float(v.as_string())) return Value(*f);
       return d ? *d : Value(0.0);
     }},
    {"indent", do_indent},
    {"capitalize", [](Interpreter&, const Value& v, CallArgs&) { return Value(pystr::capitalize(v.to_str())); }},
    {"lower", [](Interpreter&, const Value& v, CallArgs&) { return Value(pystr::lower(v.to_str())); }},
    {"upper", [](Interpreter&, const Value& v, CallArgs&) { return Value(pystr::upper(v.to_str())); }},
    {"title", [](Interpreter&, const Value& v, CallArgs&) { return do_title(v); }},
    {"replace",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       const Value* old_v = find_arg(a, 0, "old");
       const Value* new_v = find_arg(a, 1, "new");
       if (!old_v || !new_v) type_error("replace() missing required arguments");
       const Value* count = find_arg(a, 2, "count");
       int64_t n = count && count->is_int() ? count->as_int() : -1;
       std::string r = pystr::replace(v.to_str(), old_v->to_str(), new_v->to_str(), n);
       in.check_size(r.size());
       return Value(std::move(r));
     }},
    {"round", [](Interpreter&, const Value& v, CallArgs& a) { return do_round(v, a); }},
    {"abs",
     [](Interpreter&, const Value& v, CallArgs&) {
       v.require_defined();
       if (v.is_float()) return Value(std::fabs(v.as_float()));
       if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
       if (v.is_int()) {
         if (v.as_int() == INT64_MIN) throw TemplateError(ErrorKind::kOverflow, "integer result too large");
         return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
       }
       type_error(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
     }},
    {"wordcount",
     [](Interpreter&, const Value& v, CallArgs&) {
       int64_t n = 0;
       bool in_word = false;
       const std::string text = v.to_str();
       for (auto cp : pystr::code_points(text)) {
         bool word = is_word_char(pystr::decode_one(cp));
         if (word && !in_word) ++n;
         in_word = word;
       }
       return Value(n);
     }},
    {"escape", [](Interpreter&, const Value& v, CallArgs&) { return html_escape(v.to_str()); }},
    {"format",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       Value args;
       if (!a.keyword.empty()) {
         args = Value::dict();
         for (auto& [k, val] : a.keyword) args.as_dict()->set(Value(k), val);
       } else {
         args = Value::list(a.positional, true);
       }
       std::string r = percent_format(v.to_str(), args);
       in.check_size(r.size());
       return Value(std::move(r));
     }},
  });
}

}  // namespace tachyon::chat::jinja
