// Template errors. Every failure while compiling or rendering a template is a
// `jinja::TemplateError` carrying the Python exception class Jinja2 would raise (so a
// differential test can compare them), the message, and the 1-based line and column of
// the template construct that failed (0 when the failure has no position, e.g. a limit).
//
//   try { tpl.render(ctx); } catch (const TemplateError& e) { e.kind(); e.line(); e.message(); }
#pragma once

#include <string>

#include "base/error.h"

namespace tachyon::chat::jinja {

enum class ErrorKind {
  kSyntax,         // TemplateSyntaxError
  kAssertion,      // TemplateAssertionError (unknown filter or test at compile time)
  kRaised,         // TemplateError from raise_exception(message)
  kUndefined,      // UndefinedError
  kType,           // TypeError
  kValue,          // ValueError
  kIndex,          // IndexError
  kKey,            // KeyError
  kZeroDivision,   // ZeroDivisionError
  kSecurity,       // SecurityError (sandbox)
  kRuntime,        // TemplateRuntimeError (e.g. assigning an attribute of a non-namespace)
  kOverflow,       // OverflowError
  kLimit,          // ours: recursion depth, loop iterations or output size exceeded
};

// The Python class name Jinja2 would report ("TemplateSyntaxError", "TypeError", ...).
const char* error_kind_name(ErrorKind kind);

class TemplateError : public Error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0, int column = 0);
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // Fills in a position if none is set yet (errors raised deep in a builtin get the
  // position of the expression that called it).
  TemplateError with_position(int line, int column) const;

 private:
  ErrorKind kind_;
  std::string message_;
  int line_;
  int column_;
};

}  // namespace tachyon::chat::jinja
