// Filters on sequences and mappings: selection, mapping, sorting, aggregation.
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

// Jinja's make_attrgetter: "a.b.0" looked up item-first on each part.
Value get_path(Interpreter& in, const Value& obj, const Value& attribute) {
  if (!attribute.is_string()) return in.get_item(obj, attribute);
  Value cur = obj;
  for (auto& part : pystr::split(attribute.as_string(), std::string("."))) {
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = in.get_item(cur, numeric && part.size() < 18 ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return cur;
}

Value ignore_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(pystr::lower(v.as_string()));
  return v;
}

int order(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    double x = a.to_double(), y = b.to_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    auto& x = a.as_list()->items;
    auto& y = b.as_list()->items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_none() && b.is_none()) return 0;
  a.require_defined();
  b.require_defined();
  type_error(fmt::format("'<' not supported between instances of '{}' and '{}'", b.type_name(), a.type_name()));
}

std::vector<Value> sorted(Interpreter& in, std::vector<Value> items, bool reverse, bool case_sensitive,
                          const Value* attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (auto& item : items) {
    Value key = attribute && !attribute->is_none() ? get_path(in, item, *attribute) : item;
    keyed.emplace_back(ignore_case(key, case_sensitive), item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](auto& a, auto& b) {
    return reverse ? order(b.first, a.first) < 0 : order(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(v);
  return out;
}


Value select_like(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  std::vector<Value> out;
  size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (a.positional.empty()) type_error("selectattr needs an attribute");
    attribute = a.positional[next++];
  }
  std::optional<std::string> test;
  if (next < a.positional.size()) test = a.positional[next++].to_str();
  CallArgs test_args;
  for (size_t i = next; i < a.positional.size(); ++i) test_args.positional.push_back(a.positional[i]);
  test_args.keyword = a.keyword;
  for (auto& item : iterate(v)) {
    Value x = by_attr ? get_path(in, item, attribute) : item;
    bool ok = test ? call_test(in, *test, x, test_args) : x.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value do_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (auto& [k, val] : a.keyword) {
    if (k == "attribute") attribute = &val;
    if (k == "default") dflt = &val;
  }
  if (a.positional.empty() && attribute) {
    for (auto& item : iterate(v)) {
      Value x = get_path(in, item, *attribute);
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) type_error("map requires a filter argument");
  std::string name = a.positional[0].to_str();
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (auto& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(call_filter(in, name, item, copy));
  }
  return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  bool case_sensitive = flag(a, 0, "case_sensitive");
  const Value* attribute = find_arg(a, 1, "attribute");
  auto items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  Value best = items[0];
  Value best_key = ignore_case(attribute ? get_path(in, best, *attribute) : best, case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = ignore_case(attribute ? get_path(in, items[i], *attribute) : items[i], case_sensitive);
    int c = order(key, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = items[i];
      best_key = key;
    }
  }
  return best;
}

}  // namespace

void add_sequence_filters(FilterTable& table) {
  table.insert({
    {"first",
     [](Interpreter&, const Value& v, CallArgs&) {
       auto items = iterate(v);
       return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
     }},
    {"last",
     [](Interpreter&, const Value& v, CallArgs&) {
       auto items = iterate(v);
       return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
     }},
    {"join",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       const Value* d = find_arg(a, 0, "d");
       std::string sep = d ? d->to_str() : "";
       const Value* attribute = find_arg(a, 1, "attribute");
       std::string out;
       bool first = true;
       for (auto& item : iterate(v)) {
         if (!first) out += sep;
         first = false;
         out += (attribute && !attribute->is_none() ? get_path(in, item, *attribute) : item).to_str();
         in.check_size(out.size());
       }
       return Value(std::move(out));
     }},
    {"map", do_map},
    {"select", [](Interpreter& in, const Value& v, CallArgs& a) { return select_like(in, v, a, false, true); }},
    {"reject", [](Interpreter& in, const Value& v, CallArgs& a) { return select_like(in, v, a, false, false); }},
    {"selectattr", [](Interpreter& in, const Value& v, CallArgs& a) { return select_like(in, v, a, true, true); }},
    {"rejectattr", [](Interpreter& in, const Value& v, CallArgs& a) { return select_like(in, v, a, true, false); }},
    {"unique",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       bool case_sensitive = flag(a, 0, "case_sensitive");
       const Value* attribute = find_arg(a, 1, "attribute");
       std::vector<Value> seen, out;
       for (auto& item : iterate(v)) {
         Value key = ignore_case(attribute && !attribute->is_none() ? get_path(in, item, *attribute) : item,
                                 case_sensitive);
         if (key.is_dict() || (key.is_list() && !key.as_list()->is_tuple))
           type_error(fmt::format("unhashable type: '{}'", key.type_name()));
         bool dup = std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); });
         if (!dup) {
           seen.push_back(key);
           out.push_back(item);
         }
       }
       return Value::list(std::move(out));
     }},
    {"list", [](Interpreter&, const Value& v, CallArgs&) { return Value::list(iterate(v)); }},
    {"sort",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       return Value::list(sorted(in, iterate(v), flag(a, 0, "reverse"), flag(a, 1, "case_sensitive"),
                                 find_arg(a, 2, "attribute")));
     }},
    {"dictsort",
     [](Interpreter&, const Value& v, CallArgs& a) {
       if (!v.is_mapping()) type_error("dictsort needs a mapping");
       bool case_sensitive = flag(a, 0, "case_sensitive");
       const Value* by = find_arg(a, 1, "by");
       bool by_value = by && by->to_str() == "value";
       if (by && by->to_str() != "key" && !by_value)
         throw TemplateError(ErrorKind::kRuntime, "You can only sort by either \"key\" or \"value\"");
       bool reverse = flag(a, 2, "reverse");
       std::vector<Value> pairs;
       for (auto& [k, val] : v.as_dict()->items) pairs.push_back(Value::list({k, val}, true));
       std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
         const Value& kx = x.as_list()->items[by_value ? 1 : 0];
         const Value& ky = y.as_list()->items[by_value ? 1 : 0];
         int c = order(ignore_case(kx, case_sensitive), ignore_case(ky, case_sensitive));
         return reverse ? c > 0 : c < 0;
       });
       return Value::list(std::move(pairs));
     }},
    {"items",
     [](Interpreter&, const Value& v, CallArgs&) {
       if (v.is_undefined()) return Value::list();
       if (!v.is_mapping()) type_error("Can only get item pairs from a mapping.");
       std::vector<Value> out;
       for (auto& [k, val] : v.as_dict()->items) out.push_back(Value::list({k, val}, true));
       return Value::list(std::move(out));
     }},
    {"reverse",
     [](Interpreter&, const Value& v, CallArgs&) {
       if (v.is_string()) {
         auto cps = pystr::code_points(v.as_string());
         std::string out;
         for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
         return Value(std::move(out));
       }
       auto items = iterate(v);
       std::reverse(items.begin(), items.end());
       return Value::list(std::move(items));
     }},
    {"sum",
     [](Interpreter& in, const Value& v, CallArgs& a) {
       const Value* attribute = find_arg(a, 0, "attribute");
       const Value* start = find_arg(a, 1, "start");
       Value total = start ? *start : Value(0);
       for (auto& item : iterate(v)) {
         Value x = attribute && !attribute->is_none() ? get_path(in, item, *attribute) : item;
         if (!x.is_number() || !total.is_number())
           type_error(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", total.type_name(), x.type_name()));
         if (total.is_float() || x.is_float()) {
           total = Value(total.to_double() + x.to_double());
         } else {
           int64_t r = 0;
           if (__builtin_add_overflow(static_cast<int64_t>(total.to_double()), static_cast<int64_t>(x.to_double()), &r))
             throw TemplateError(ErrorKind::kOverflow, "integer result too large");
           total = Value(r);
         }
       }
       return total;
     }},
    {"min", [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }},
    {"max", [](Interpreter& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }},
    {"attr",
     [](Interpreter&, const Value& v, CallArgs& a) {
       const Value* name = find_arg(a, 0, "name");
       if (!name) type_error("attr needs a name");
       v.require_defined();
       if (auto m = get_method(v, name->to_str())) return *m;
       if (v.is_dict() && v.as_dict()->kind != ObjectKind::kDict)
         if (const Value* x = v.as_dict()->find(*name)) return *x;
       return Value::undefined(fmt::format("'{}' has no attribute '{}'", v.type_name(), name->to_str()));
     }},
  });
}

}  // namespace tachyon::chat::jinja
