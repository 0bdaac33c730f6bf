#include "chat/jinja/error.h"

#include <fmt/format.h>

namespace tachyon::chat::jinja {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax: return "TemplateSyntaxError";
    case ErrorKind::kAssertion: return "TemplateAssertionError";
    case ErrorKind::kRaised: return "TemplateError";
    case ErrorKind::kUndefined: return "UndefinedError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kValue: return "ValueError";
    case ErrorKind::kIndex: return "IndexError";
    case ErrorKind::kKey: return "KeyError";
    case ErrorKind::kZeroDivision: return "ZeroDivisionError";
    case ErrorKind::kSecurity: return "SecurityError";
    case ErrorKind::kRuntime: return "TemplateRuntimeError";
    case ErrorKind::kOverflow: return "OverflowError";
    case ErrorKind::kLimit: return "LimitError";
  }
  return "TemplateError";
}

namespace {
std::string describe(ErrorKind kind, const std::string& message, int line, int column) {
  if (line <= 0) return fmt::format("{}: {}", error_kind_name(kind), message);
  return fmt::format("{}: {} (template line {}, column {})", error_kind_name(kind), message, line, column);
}
}  // namespace

TemplateError::TemplateError(ErrorKind kind, std::string message, int line, int column)
    : Error(describe(kind, message, line, column)),
      kind_(kind),
      message_(std::move(message)),
      line_(line),
      column_(column) {}

TemplateError TemplateError::with_position(int line, int column) const {
  if (line_ > 0) return *this;
  return TemplateError(kind_, message_, line, column);
}

}  // namespace tachyon::chat::jinja
