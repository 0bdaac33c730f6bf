// Evaluates a parsed template against a context, with Jinja2's runtime semantics:
// lenient Undefined (falsy, prints as "", iterates empty, fails when used as a value),
// Python truthiness, comparison and arithmetic, per-iteration scopes in for loops,
// namespace() for state that outlives a loop, macros with closures, and the sandbox
// (no mutation of lists/dicts, no file/env/network access: only the builtins listed in
// builtins.h exist).
//
// Limits turn hostile templates into clear TemplateErrors (kind kLimit) instead of hangs
// or crashes:
//
//   Interpreter interp(limits);
//   interp.set_global("messages", Value::from_json(messages));
//   std::string out = interp.render(body);
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace tachyon::chat::jinja {

struct Limits {
  int max_call_depth = 64;                 // nested macro calls
  int64_t max_loop_iterations = 1 << 20;   // summed over all loops of a render (and range() sizes)
  size_t max_output_bytes = 32u << 20;     // rendered text, and any string or list built on the way
  size_t max_stack_bytes = 2u << 20;       // native stack a render may use (deep macro recursion)
  int64_t max_render_ms = 5000;            // wall time of one render (real chat templates take milliseconds)
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(Limits limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  void set_global(const std::string& name, Value value);
  // Renders `body`; the body must outlive the call and any macro values it returns.
  std::string render(const Body& body);

  // Used by builtins.
  Value call(const Value& callee, CallArgs& args);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  const Limits& limits() const { return limits_; }
  // Throws kLimit if a string or list of `size` bytes/items may not be built.
  void check_size(size_t size) const;
  void count_iterations(int64_t n);
  // Throws kLimit when the render has used more than max_stack_bytes of native stack.
  void check_stack() const;
  // Throws kLimit once the render has run longer than max_render_ms (reads the clock on
  // every 64th call: loops, macro calls and string building call it).
  void check_time();
  // Namespaces are the only values a template can make refer to themselves
  // (`{% set ns.me = ns %}`); the interpreter empties them when it is destroyed so such
  // cycles do not leak.
  void track_namespace(const DictPtr& ns) { namespaces_.push_back(ns); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope);
  Flow exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  Flow exec_for(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  void exec_set(const Stmt& stmt, const std::shared_ptr<Scope>& scope, Value value);
  Value make_macro(const Stmt& stmt, const std::shared_ptr<Scope>& scope, const std::string& name);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  void write(const std::string& text);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_filter(const Expr& e, const std::shared_ptr<Scope>& scope, const Value* block_input);
  CallArgs eval_args(const Expr& e, const std::shared_ptr<Scope>& scope, size_t first);
  Value binary(const std::string& op, const Value& a, const Value& b);
  bool compare(const std::string& op, const Value& a, const Value& b);
  void assign(const Expr& target, const Value& value, Scope& scope);

  Limits limits_;
  std::shared_ptr<Scope> globals_;
  std::string* out_ = nullptr;
  int call_depth_ = 0;
  int loop_depth_ = 0;
  int64_t iterations_ = 0;
  std::chrono::steady_clock::time_point deadline_{};
  uint32_t time_checks_ = 0;
  const char* stack_base_ = nullptr;
  std::vector<std::weak_ptr<DictData>> namespaces_;
};

}  // namespace tachyon::chat::jinja
