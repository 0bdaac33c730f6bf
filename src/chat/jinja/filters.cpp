// The filter registry: Jinja2's builtin filters that chat templates use (the
// implementations are in filters_text.cpp and filters_sequence.cpp).
#include <fmt/format.h>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/filter_registry.h"

namespace tachyon::chat::jinja {

void filter_type_error(const std::string& message) { throw TemplateError(ErrorKind::kType, message); }

bool flag(const CallArgs& a, size_t index, const char* name, bool dflt) {
  const Value* v = find_arg(a, index, name);
  return v ? v->truthy() : dflt;
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_none() || v.is_number() || v.is_function())
    filter_type_error(fmt::format("'{}' object is not iterable", v.type_name()));
  return v.iterate();
}

namespace {

const FilterTable& filters() {
  static const FilterTable* table = [] {
    auto* t = new FilterTable();
    add_text_filters(*t);
    add_sequence_filters(*t);
    return t;
  }();
  return *table;
}

const std::string& canonical(const std::string& name) {
  static const auto* aliases = new std::unordered_map<std::string, std::string>{
      {"count", "length"}, {"d", "default"}, {"e", "escape"}};
  auto it = aliases->find(name);
  return it == aliases->end() ? name : it->second;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(canonical(name)) > 0; }

Value call_filter(Interpreter& interp, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(canonical(name));
  if (it == filters().end()) throw TemplateError(ErrorKind::kRuntime, fmt::format("No filter named '{}' found.", name));
  return it->second(interp, input, args);
}

}  // namespace tachyon::chat::jinja
