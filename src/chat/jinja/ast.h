// The syntax tree the parser builds and the interpreter walks. Plain structs: an
// expression or statement kind plus its children; every node keeps the line and column
// of its first token for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace tachyon::chat::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kConst,      // value
  kName,       // name
  kList,       // args = items
  kTuple,      // args = items
  kDict,       // args = key0, value0, key1, value1, ...
  kGetAttr,    // args[0].name
  kGetItem,    // args[0][args[1]]
  kSlice,      // args[0][args[1]:args[2]:args[3]] (null = omitted)
  kCall,       // args[0](args[1..], kwargs)
  kFilter,     // args[0] | name(args[1..], kwargs); args[0] null inside {% filter %}
  kTest,       // args[0] is [not] name(args[1..], kwargs)
  kNeg,        // -args[0]
  kPos,        // +args[0]
  kNot,        // not args[0]
  kBinary,     // args[0] op args[1]: + - * / // % ** ~
  kAnd,
  kOr,
  kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
  kCondExpr,   // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
  std::vector<std::string> ops;
  bool negated = false;  // `is not`
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // conditions[i] → bodies[i]; else_body
  kFor,          // for target in expr [if cond] body [else else_body]
  kSet,          // set target = expr
  kSetBlock,     // set target [| filter] body endset
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr body
  kFilterBlock,  // filter expr body
  kWith,         // with targets = values body
  kBreak,
  kContinue,
  kGeneration,   // {% generation %} body (rendered as is)
};

struct Param {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;    // output value, for iterable, set value, call expr, filter chain
  ExprPtr target;  // for/set target (kName, kTuple of names, or kGetAttr for ns.attr)
  ExprPtr cond;    // for-loop filter
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<Param> params;
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // with
  bool recursive = false;
};

}  // namespace tachyon::chat::jinja
