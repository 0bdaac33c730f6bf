// json.dumps and Python's string formatting operators, as templates see them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

constexpr int kMaxJsonDepth = 512;

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (auto cp : pystr::code_points(s)) {
    uint32_t c = pystr::decode_one(cp);
    if (cp.size() == 1 && c >= 0x80) c = 0xFFFD;  // invalid byte: what a lossy decode would give
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            uint32_t v = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", c);
          }
        } else if (cp.size() == 1 && pystr::decode_one(cp) >= 0x80) {
          pystr::append_utf8(out, c);
        } else {
          out += cp;
        }
    }
  }
  out += '"';
}

std::string float_json(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return float_repr(v);
}

std::string key_string(const Value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return float_json(k.as_float());
  throw TemplateError(ErrorKind::kType,
                      fmt::format("keys must be str, int, float, bool or None, not {}", k.type_name()));
}

void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
  if (depth > kMaxJsonDepth) throw TemplateError(ErrorKind::kLimit, "tojson: value nested too deeply");
  auto newline = [&](int level) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    out += float_json(v.as_float());
  } else if (v.is_string()) {
    dump_string(out, v.as_string(), o.ensure_ascii);
  } else if (v.is_list()) {
    auto& items = v.as_list()->items;
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      dump(out, items[i], o, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.is_mapping()) {
    auto items = v.as_dict()->items;
    if (items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    for (auto& [k, val] : v.as_dict()->items) {
      if (o.sort_keys && !k.is_string())
        throw TemplateError(ErrorKind::kType, "'<' not supported between instances of 'int' and 'str'");
      entries.emplace_back(key_string(k), &val);
    }
    if (o.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += o.item_separator;
      newline(depth + 1);
      dump_string(out, entries[i].first, o.ensure_ascii);
      out += o.key_separator;
      dump(out, *entries[i].second, o, depth + 1);
    }
    newline(depth);
    out += '}';
  } else {
    throw TemplateError(ErrorKind::kType, fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  dump(out, value, options, 0);
  return out;
}

std::string percent_format(const std::string& format, const Value& args) {
  std::vector<Value> values;
  const Value* mapping = nullptr;
  if (args.is_list() && args.as_list()->is_tuple) {
    values = args.as_list()->items;
  } else if (args.is_mapping()) {
    mapping = &args;
    values.push_back(args);
  } else {
    values.push_back(args);
  }
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) throw TemplateError(ErrorKind::kValue, "incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      size_t close = format.find(')', i);
      if (close == std::string::npos || !mapping) throw TemplateError(ErrorKind::kType, "format requires a mapping");
      const Value* v = mapping->as_dict()->find(Value(format.substr(i + 1, close - i - 1)));
      if (!v) throw TemplateError(ErrorKind::kKey, format.substr(i + 1, close - i - 1));
      arg = v;
      i = close + 1;
      if (i >= format.size()) throw TemplateError(ErrorKind::kValue, "incomplete format");
    }
    int precision = -1;
    if (format[i] == '.') {
      precision = 0;
      while (++i < format.size() && format[i] >= '0' && format[i] <= '9') precision = precision * 10 + (format[i] - '0');
      if (i >= format.size()) throw TemplateError(ErrorKind::kValue, "incomplete format");
      precision = std::min(precision, 100);
    }
    char conv = format[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= values.size()) throw TemplateError(ErrorKind::kType, "not enough arguments for format string");
      arg = &values[next++];
    }
    switch (conv) {
      case 's': out += arg->to_str(); break;
      case 'r': out += arg->repr(); break;
      case 'd':
      case 'i':
        if (!arg->is_number()) throw TemplateError(ErrorKind::kType, fmt::format("%{} format: a real number is required, not {}", conv, arg->type_name()));
        out += arg->is_float() ? std::to_string(static_cast<int64_t>(arg->as_float()))
                               : std::to_string(arg->is_bool() ? (arg->as_bool() ? 1 : 0) : arg->as_int());
        break;
      case 'f':
        if (!arg->is_number()) throw TemplateError(ErrorKind::kType, fmt::format("must be real number, not {}", arg->type_name()));
        out += fmt::format("{:.{}f}", arg->to_double(), precision < 0 ? 6 : precision);
        break;
      default: throw TemplateError(ErrorKind::kValue, fmt::format("unsupported format character '{}'", conv));
    }
  }
  if (!mapping && next < values.size())
    throw TemplateError(ErrorKind::kType, "not all arguments converted during string formatting");
  return out;
}

std::string brace_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw TemplateError(ErrorKind::kValue, "Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) throw TemplateError(ErrorKind::kValue, "Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      throw TemplateError(ErrorKind::kValue, "unsupported format field");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size())
        throw TemplateError(ErrorKind::kIndex, fmt::format("Replacement index {} out of range", auto_index));
      v = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t k = field.size() > 9 ? SIZE_MAX : std::stoul(field);
      if (k >= args.positional.size())
        throw TemplateError(ErrorKind::kIndex, fmt::format("Replacement index {} out of range", field));
      v = &args.positional[k];
    } else {
      for (auto& [name, value] : args.keyword)
        if (name == field) v = &value;
      if (!v) throw TemplateError(ErrorKind::kKey, fmt::format("'{}'", field));
    }
    out += v->to_str();
    i = close;
  }
  return out;
}

}  // namespace tachyon::chat::jinja
