#include "chat/parsers/python_call.h"

#include <cstdlib>

namespace tachyon::chat::parsers {

namespace {

using OJson = nlohmann::ordered_json;

class CallParser {
 public:
  explicit CallParser(std::string_view s) : s_(s) {}

  std::optional<std::vector<PythonCall>> parse_all() {
    std::vector<PythonCall> calls;
    while (true) {
      skip(true);
      if (i_ >= s_.size()) break;
      auto call = parse_call();
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
      skip(false);
      if (i_ < s_.size() && (s_[i_] == ';' || s_[i_] == '\n')) {
        ++i_;
        continue;
      }
      skip(true);
      if (i_ < s_.size()) return std::nullopt;
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }

 private:
  void skip(bool newlines) {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || (newlines && s_[i_] == '\n'))) ++i_;
  }
  static bool ident_char(char c, bool first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
  }
  std::optional<std::string> ident() {
    size_t start = i_;
    if (i_ >= s_.size() || !ident_char(s_[i_], true)) return std::nullopt;
    while (i_ < s_.size() && ident_char(s_[i_], false)) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  std::optional<PythonCall> parse_call() {
    PythonCall call;
    auto name = ident();
    if (!name) return std::nullopt;
    call.name = *name;
    while (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      auto part = ident();
      if (!part) return std::nullopt;
      call.name += "." + *part;
    }
    skip(false);
    if (i_ >= s_.size() || s_[i_] != '(') return std::nullopt;
    ++i_;
    call.arguments = OJson::object();
    while (true) {
      skip(true);
      if (i_ < s_.size() && s_[i_] == ')') {
        ++i_;
        return call;
      }
      auto key = ident();
      if (!key) return std::nullopt;
      skip(true);
      if (i_ >= s_.size() || s_[i_] != '=') return std::nullopt;
      ++i_;
      auto value = parse_value(0);
      if (!value) return std::nullopt;
      call.arguments[*key] = std::move(*value);
      skip(true);
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ')') continue;
      return std::nullopt;
    }
  }

  std::optional<OJson> parse_value(int depth) {
    if (depth > 64) return std::nullopt;
    skip(true);
    if (i_ >= s_.size()) return std::nullopt;
    char c = s_[i_];
    if (c == '"' || c == '\'') return parse_string();
    if (c == '[' || c == '(') {
      char close = c == '[' ? ']' : ')';
      ++i_;
      OJson arr = OJson::array();
      while (true) {
        skip(true);
        if (i_ < s_.size() && s_[i_] == close) {
          ++i_;
          return arr;
        }
        auto v = parse_value(depth + 1);
        if (!v) return std::nullopt;
        arr.push_back(std::move(*v));
        skip(true);
        if (i_ < s_.size() && s_[i_] == ',') ++i_;
        else if (i_ >= s_.size() || s_[i_] != close) return std::nullopt;
      }
    }
    if (c == '{') {
      ++i_;
      OJson obj = OJson::object();
      while (true) {
        skip(true);
        if (i_ < s_.size() && s_[i_] == '}') {
          ++i_;
          return obj;
        }
        auto k = parse_value(depth + 1);
        if (!k || !k->is_string()) return std::nullopt;
        skip(true);
        if (i_ >= s_.size() || s_[i_] != ':') return std::nullopt;
        ++i_;
        auto v = parse_value(depth + 1);
        if (!v) return std::nullopt;
        obj[k->get<std::string>()] = std::move(*v);
        skip(true);
        if (i_ < s_.size() && s_[i_] == ',') ++i_;
        else if (i_ >= s_.size() || s_[i_] != '}') return std::nullopt;
      }
    }
    if (ident_char(c, true)) {
      auto word = ident();
      if (*word == "True" || *word == "true") return OJson(true);
      if (*word == "False" || *word == "false") return OJson(false);
      if (*word == "None" || *word == "null") return OJson(nullptr);
      return std::nullopt;
    }
    size_t start = i_;
    if (c == '-' || c == '+') ++i_;
    bool is_float = false;
    while (i_ < s_.size() && ((s_[i_] >= '0' && s_[i_] <= '9') || s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E' ||
                              ((s_[i_] == '-' || s_[i_] == '+') && (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E')))) {
      if (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E') is_float = true;
      ++i_;
    }
    std::string num(s_.substr(start, i_ - start));
    if (num.empty() || num == "-" || num == "+") return std::nullopt;
    char* end = nullptr;
    if (!is_float) {
      long long v = std::strtoll(num.c_str(), &end, 10);
      if (*end == '\0') return OJson(static_cast<int64_t>(v));
    }
    double d = std::strtod(num.c_str(), &end);
    if (*end != '\0') return std::nullopt;
    return OJson(d);
  }

  std::optional<OJson> parse_string() {
    char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        default: out += '\\'; out += e;
      }
    }
    if (i_ >= s_.size()) return std::nullopt;
    ++i_;
    return OJson(out);
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<std::vector<PythonCall>> parse_python_calls(std::string_view text) {
  return CallParser(text).parse_all();
}

}  // namespace tachyon::chat::parsers
