// Methods of str, dict and list reachable from templates, and the global functions.
// The sandbox is immutable (transformers uses ImmutableSandboxedEnvironment): methods
// that would mutate a list or dict exist but raise SecurityError when called.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

const Value* find_arg(const CallArgs& args, size_t index, const char* name) {
  if (index < args.positional.size()) return &args.positional[index];
  for (auto& [key, value] : args.keyword)
    if (key == name) return &value;
  return nullptr;
}

namespace {

[[noreturn]] void type_error(const std::string& message) { throw TemplateError(ErrorKind::kType, message); }

const std::string& str_arg(const Value& v, const char* method) {
  if (!v.is_string())
    type_error(fmt::format("{}() argument must be str, not {}", method, v.type_name()));
  return v.as_string();
}

std::optional<std::string> opt_str(const CallArgs& args, size_t index, const char* name, const char* method) {
  const Value* v = find_arg(args, index, name);
  if (!v || v->is_none()) return std::nullopt;
  return str_arg(*v, method);
}

int64_t int_arg(const CallArgs& args, size_t index, const char* name, int64_t dflt) {
  const Value* v = find_arg(args, index, name);
  if (!v) return dflt;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  type_error(fmt::format("'{}' object cannot be interpreted as an integer", v->type_name()));
}

Value string_list(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (auto& p : parts) items.emplace_back(p);
  return Value::list(std::move(items));
}

// startswith/endswith accept a str or a tuple of str.
bool affix_match(const std::string& s, const Value& affix, bool prefix, const char* method) {
  auto one = [&](const Value& a) {
    const std::string& x = str_arg(a, method);
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list() && affix.as_list()->is_tuple) {
    for (auto& a : affix.as_list()->items)
      if (one(a)) return true;
    return false;
  }
  if (!affix.is_string())
    type_error(fmt::format("{} first arg must be str or a tuple of str, not {}", method, affix.type_name()));
  return one(affix);
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  auto cps = pystr::code_points(s);
  std::string line;
  for (size_t i = 0; i < cps.size(); ++i) {
    uint32_t c = pystr::decode_one(cps[i]);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (cps[i].size() == 1 && c >= 0x80) brk = false;
    if (!brk) {
      line += cps[i];
      continue;
    }
    std::string end(cps[i]);
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == "\n") {
      end += "\n";
      ++i;
    }
    out.push_back(keepends ? line + end : line);
    line.clear();
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

template <typename P>
bool all_cps(const std::string& s, P pred) {
  if (s.empty()) return false;
  for (auto cp : pystr::code_points(s))
    if (!pred(pystr::decode_one(cp))) return false;
  return true;
}

Value method(const std::string& name, std::function<Value(Interpreter&, CallArgs&)> fn) {
  return Value::function(name, std::move(fn));
}

Value unsafe_method(const Value& obj, const std::string& name) {
  Value f = Value::function(name, [](Interpreter&, CallArgs&) { return Value(); });
  f.as_function()->unsafe_message =
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name());
  return f;
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    return method(name, [s, name, left, right](Interpreter&, CallArgs& a) {
      return Value(pystr::strip(s, opt_str(a, 0, "chars", name.c_str()), left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    return method(name, [s, name](Interpreter&, CallArgs& a) {
      auto sep = opt_str(a, 0, "sep", name.c_str());
      if (sep && sep->empty()) throw TemplateError(ErrorKind::kValue, "empty separator");
      int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
      return string_list(name == "split" ? pystr::split(s, sep, maxsplit) : pystr::rsplit(s, sep, maxsplit));
    });
  }
  if (name == "splitlines") {
    return method(name, [s](Interpreter&, CallArgs& a) {
      const Value* k = find_arg(a, 0, "keepends");
      return string_list(splitlines(s, k && k->truthy()));
    });
  }
  if (name == "startswith" || name == "endswith") {
    return method(name, [s, name](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) type_error(fmt::format("{}() takes at least 1 argument (0 given)", name));
      return Value(affix_match(s, a.positional[0], name == "startswith", name.c_str()));
    });
  }
  if (name == "replace") {
    return method(name, [s](Interpreter& in, CallArgs& a) {
      if (a.positional.size() < 2) type_error("replace expected at least 2 arguments");
      std::string r = pystr::replace(s, str_arg(a.positional[0], "replace"), str_arg(a.positional[1], "replace"),
                                     int_arg(a, 2, "count", -1));
      in.check_size(r.size());
      return Value(std::move(r));
    });
  }
  if (name == "upper") return method(name, [s](Interpreter&, CallArgs&) { return Value(pystr::upper(s)); });
  if (name == "lower") return method(name, [s](Interpreter&, CallArgs&) { return Value(pystr::lower(s)); });
  if (name == "title") return method(name, [s](Interpreter&, CallArgs&) { return Value(pystr::title(s)); });
  if (name == "capitalize")
    return method(name, [s](Interpreter&, CallArgs&) { return Value(pystr::capitalize(s)); });
  if (name == "format") {
    return method(name, [s](Interpreter& in, CallArgs& a) {
      std::string r = brace_format(s, a);
      in.check_size(r.size());
      return Value(std::move(r));
    });
  }
  if (name == "join") {
    return method(name, [s](Interpreter& in, CallArgs& a) {
      if (a.positional.size() != 1) type_error("join() takes exactly one argument");
      const Value& it = a.positional[0];
      if (!it.is_string() && !it.is_list() && !it.is_mapping() && !it.is_undefined())
        type_error("can only join an iterable");
      std::string out;
      bool first = true;
      for (auto& item : it.iterate()) {
        if (!item.is_string())
          type_error(fmt::format("sequence item: expected str instance, {} found", item.type_name()));
        if (!first) out += s;
        first = false;
        out += item.as_string();
        in.check_size(out.size());
      }
      return Value(std::move(out));
    });
  }
  if (name == "find" || name == "index" || name == "count") {
    return method(name, [s, name](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) type_error(fmt::format("{}() takes at least 1 argument (0 given)", name));
      const std::string& sub = str_arg(a.positional[0], name.c_str());
      if (name == "count") return Value(pystr::count(s, sub));
      int64_t at = pystr::find(s, sub);
      if (at < 0 && name == "index") throw TemplateError(ErrorKind::kValue, "substring not found");
      return Value(at);
    });
  }
  auto predicate = [&](auto pred) {
    return method(name, [s, pred](Interpreter&, CallArgs&) { return Value(all_cps(s, pred)); });
  };
  if (name == "isdigit") return predicate([](uint32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha")
    return predicate([](uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; });
  if (name == "isalnum")
    return predicate([](uint32_t c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0xC0;
    });
  if (name == "isspace") return predicate([](uint32_t c) { return pystr::is_space(c); });
  if (name == "islower" || name == "isupper") {
    bool want_lower = name == "islower";
    return method(name, [s, want_lower](Interpreter&, CallArgs&) {
      bool cased = false;
      for (auto cp : pystr::code_points(s)) {
        std::string one(cp);
        bool lower = pystr::upper(one) != one, upper = pystr::lower(one) != one;
        if ((want_lower && upper) || (!want_lower && lower)) return Value(false);
        cased = cased || lower || upper;
      }
      return Value(cased);
    });
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  DictPtr d = obj.as_dict();
  if (name == "items" || name == "keys" || name == "values") {
    return method(name, [d, name](Interpreter&, CallArgs&) {
      std::vector<Value> out;
      for (auto& [k, v] : d->items) {
        if (name == "items") {
          out.push_back(Value::list({k, v}, true));
        } else {
          out.push_back(name == "keys" ? k : v);
        }
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return method(name, [d](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) type_error("get expected at least 1 argument, got 0");
      if (const Value* v = d->find(a.positional[0])) return *v;
      return a.positional.size() > 1 ? a.positional[1] : Value(None{});
    });
  }
  if (name == "copy") {
    return method(name, [d](Interpreter&, CallArgs&) {
      Value c = Value::dict();
      c.as_dict()->items = d->items;
      return c;
    });
  }
  if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" || name == "clear")
    return unsafe_method(obj, name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  ListPtr l = obj.as_list();
  if (name == "count") {
    return method(name, [l](Interpreter&, CallArgs& a) {
      if (a.positional.size() != 1) type_error("count() takes exactly one argument");
      int64_t n = 0;
      for (auto& item : l->items) n += item.equals(a.positional[0]) ? 1 : 0;
      return Value(n);
    });
  }
  if (name == "index") {
    return method(name, [l](Interpreter&, CallArgs& a) {
      if (a.positional.empty()) type_error("index expected at least 1 argument, got 0");
      for (size_t i = 0; i < l->items.size(); ++i)
        if (l->items[i].equals(a.positional[0])) return Value(static_cast<int64_t>(i));
      throw TemplateError(ErrorKind::kValue, fmt::format("{} is not in list", a.positional[0].repr()));
    });
  }
  if (!l->is_tuple && name == "copy") {
    return method(name, [l](Interpreter&, CallArgs&) { return Value::list(l->items); });
  }
  if (!l->is_tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
                       name == "reverse" || name == "sort" || name == "clear"))
    return unsafe_method(obj, name);
  return std::nullopt;
}

}  // namespace

std::optional<Value> get_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj.as_string(), name);
  if (obj.is_mapping()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return std::nullopt;
}

void add_globals(Interpreter& interp) {
  interp.set_global("range", Value::function("range", [](Interpreter& in, CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 3) type_error("range expected 1 to 3 arguments");
    std::vector<int64_t> v;
    for (auto& x : a.positional) {
      if (!x.is_int() && !x.is_bool())
        type_error(fmt::format("'{}' object cannot be interpreted as an integer", x.type_name()));
      v.push_back(x.is_bool() ? (x.as_bool() ? 1 : 0) : x.as_int());
    }
    int64_t start = v.size() > 1 ? v[0] : 0, stop = v.size() > 1 ? v[1] : v[0], step = v.size() > 2 ? v[2] : 1;
    if (step == 0) throw TemplateError(ErrorKind::kValue, "range() arg 3 must not be zero");
    long double span = step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
    long double mag = step > 0 ? static_cast<long double>(step) : -static_cast<long double>(step);
    long double n = span <= 0 ? 0 : std::ceil(span / mag);
    if (n > in.limits().max_loop_iterations)
      throw TemplateError(ErrorKind::kLimit, fmt::format("range() of more than {} items", in.limits().max_loop_iterations));
    std::vector<Value> items;
    items.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) items.emplace_back(start + i * step);
    return Value::list(std::move(items));
  }));
  auto make_mapping = [](ObjectKind kind) {
    return [kind](Interpreter& in, CallArgs& a) {
      Value d = Value::dict(kind);
      if (kind == ObjectKind::kNamespace) in.track_namespace(d.as_dict());
      for (auto& p : a.positional) {
        if (p.is_mapping()) {
          for (auto& [k, v] : p.as_dict()->items) d.as_dict()->set(k, v);
        } else {
          for (auto& item : p.iterate()) {
            auto pair = item.iterate();
            if (pair.size() != 2) throw TemplateError(ErrorKind::kValue, "dictionary update sequence element has wrong length");
            d.as_dict()->set(pair[0], pair[1]);
          }
        }
      }
      for (auto& [k, v] : a.keyword) d.as_dict()->set(Value(k), v);
      return d;
    };
  };
  interp.set_global("namespace", Value::function("namespace", make_mapping(ObjectKind::kNamespace)));
  interp.set_global("dict", Value::function("dict", make_mapping(ObjectKind::kDict)));
  interp.set_global("raise_exception", Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    const Value* m = find_arg(a, 0, "message");
    throw TemplateError(ErrorKind::kRaised, m ? m->to_str() : "");
  }));
  interp.set_global("strftime_now", Value::function("strftime_now", [](Interpreter&, CallArgs& a) {
    const Value* f = find_arg(a, 0, "format");
    if (!f || !f->is_string()) type_error("strftime_now() needs a format string");
    std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[512];
    size_t n = f->as_string().size() < 200 ? std::strftime(buf, sizeof buf, f->as_string().c_str(), &tm) : 0;
    return Value(std::string(buf, n));
  }));
}

}  // namespace tachyon::chat::jinja
