// The statement half of the interpreter: output, control flow, scopes, macros.
// Expressions are in eval.cpp, Python's operators in operators.cpp.
#include "chat/jinja/interpreter.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"

namespace tachyon::chat::jinja {

namespace {

[[noreturn]] void type_error(const std::string& message) { throw TemplateError(ErrorKind::kType, message); }

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(Limits limits) : limits_(limits), globals_(std::make_shared<Scope>()) {
  add_globals(*this);
}

Interpreter::~Interpreter() {
  for (auto& weak : namespaces_)
    if (auto ns = weak.lock()) ns->items.clear();
}

void Interpreter::set_global(const std::string& name, Value value) { globals_->vars[name] = std::move(value); }

std::string Interpreter::render(const Body& body) {
  char base = 0;
  stack_base_ = &base;
  std::string out;
  out_ = &out;
  iterations_ = 0;
  deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.max_render_ms);
  time_checks_ = 0;
  auto scope = std::make_shared<Scope>();
  scope->parent = globals_;
  Flow flow = exec_body(body, scope);
  if (flow != Flow::kNormal) throw TemplateError(ErrorKind::kSyntax, "break or continue outside of a loop");
  out_ = nullptr;
  return out;
}

void Interpreter::check_size(size_t size) const {
  if (size > limits_.max_output_bytes)
    throw TemplateError(ErrorKind::kLimit, fmt::format("output exceeds the limit of {} bytes", limits_.max_output_bytes));
}

void Interpreter::check_stack() const {
  char here = 0;
  auto used = static_cast<size_t>(stack_base_ > &here ? stack_base_ - &here : &here - stack_base_);
  if (stack_base_ && used > limits_.max_stack_bytes)
    throw TemplateError(ErrorKind::kLimit, "template recursion too deep for the native stack");
}

void Interpreter::check_time() {
  if ((++time_checks_ & 63u) != 0) return;
  if (std::chrono::steady_clock::now() > deadline_)
    throw TemplateError(ErrorKind::kLimit, fmt::format("render took longer than {} ms", limits_.max_render_ms));
}

void Interpreter::count_iterations(int64_t n) {
  check_time();
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    throw TemplateError(ErrorKind::kLimit,
                        fmt::format("more than {} loop iterations", limits_.max_loop_iterations));
}

void Interpreter::write(const std::string& text) {
  check_time();
  check_size(out_->size() + text.size());
  out_->append(text);
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    Flow flow = exec_body(body, scope);
    (void)flow;
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope) {
  for (const auto& stmt : body) {
    Flow flow = exec(*stmt, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  try {
    check_stack();
    switch (s.kind) {
      case StmtKind::kText: write(s.text); return Flow::kNormal;
      case StmtKind::kOutput: write(eval(*s.expr, scope).to_str()); return Flow::kNormal;
      case StmtKind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (eval(*s.conditions[i], scope).truthy()) return exec_body(s.bodies[i], scope);
        return exec_body(s.else_body, scope);
      case StmtKind::kFor: return exec_for(s, scope);
      case StmtKind::kSet: exec_set(s, scope, eval(*s.expr, scope)); return Flow::kNormal;
      case StmtKind::kSetBlock: {
        Value v(capture(s.body, scope));
        if (s.expr) v = eval_filter(*s.expr, scope, &v);
        exec_set(s, scope, v);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: scope->vars[s.text] = make_macro(s, scope, s.text); return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Expr& call = *s.expr;
        Value callee = eval(*call.args[0], scope);
        CallArgs args = eval_args(call, scope, 1);
        args.keyword.emplace_back("caller", make_macro(s, scope, "caller"));
        write(this->call(callee, args).to_str());
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value v(capture(s.body, scope));
        write(eval_filter(*s.expr, scope, &v).to_str());
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        auto inner = std::make_shared<Scope>();
        inner->parent = scope;
        for (auto& [target, value] : s.assignments) assign(*target, eval(*value, scope), *inner);
        return exec_body(s.body, inner);
      }
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        if (loop_depth_ == 0) throw TemplateError(ErrorKind::kSyntax, "break or continue outside of a loop");
        return s.kind == StmtKind::kBreak ? Flow::kBreak : Flow::kContinue;
      case StmtKind::kGeneration: return exec_body(s.body, scope);
    }
  } catch (const TemplateError& e) {
    if (e.line() > 0) throw;
    throw e.with_position(s.line, s.column);
  }
  return Flow::kNormal;
}

void Interpreter::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope, Value value) {
  if (s.target->kind == ExprKind::kGetAttr) {
    const Expr& base = *s.target->args[0];
    const Value* ns = scope->find(base.name);
    if (!ns || !ns->is_dict() || ns->as_dict()->kind != ObjectKind::kNamespace)
      throw TemplateError(ErrorKind::kRuntime, "cannot assign attribute on non-namespace object");
    ns->as_dict()->set(Value(s.target->name), std::move(value));
    return;
  }
  assign(*s.target, value, *scope);
}

void Interpreter::assign(const Expr& target, const Value& value, Scope& scope) {
  if (target.kind == ExprKind::kName) {
    scope.vars[target.name] = value;
    return;
  }
  // Tuple unpacking.
  std::vector<Value> items = value.iterate();
  if (items.size() < target.args.size())
    throw TemplateError(ErrorKind::kValue, fmt::format("not enough values to unpack (expected {}, got {})",
                                                       target.args.size(), items.size()));
  if (items.size() > target.args.size())
    throw TemplateError(ErrorKind::kValue,
                        fmt::format("too many values to unpack (expected {})", target.args.size()));
  for (size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i], scope);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  Value iterable = eval(*s.expr, scope);
  if (!iterable.is_undefined() && !iterable.is_string() && !iterable.is_list() && !iterable.is_mapping())
    type_error(fmt::format("'{}' object is not iterable", iterable.type_name()));
  std::vector<Value> items = iterable.iterate();
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      assign(*s.target, item, *probe);
      if (eval(*s.cond, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(s.else_body, scope);
  const auto n = static_cast<int64_t>(items.size());
  ++loop_depth_;
  struct Restore {
    int& depth;
    ~Restore() { --depth; }
  } restore{loop_depth_};
  auto changed_last = std::make_shared<std::optional<std::vector<Value>>>();
  for (int64_t i = 0; i < n; ++i) {
    count_iterations(1);
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    assign(*s.target, items[static_cast<size_t>(i)], *inner);
    Value loop = Value::dict(ObjectKind::kLoop);
    auto& d = *loop.as_dict();
    d.items.reserve(12);
    d.items.emplace_back(Value("index"), Value(i + 1));
    d.items.emplace_back(Value("index0"), Value(i));
    d.items.emplace_back(Value("revindex"), Value(n - i));
    d.items.emplace_back(Value("revindex0"), Value(n - i - 1));
    d.items.emplace_back(Value("first"), Value(i == 0));
    d.items.emplace_back(Value("last"), Value(i == n - 1));
    d.items.emplace_back(Value("length"), Value(n));
    d.items.emplace_back(Value("depth"), Value(1));
    d.items.emplace_back(Value("depth0"), Value(0));
    d.items.emplace_back(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)]
                                                  : Value::undefined("there is no previous item"));
    d.items.emplace_back(Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                                      : Value::undefined("there is no next item"));
    d.items.emplace_back(Value("cycle"), Value::function("cycle", [i](Interpreter&, CallArgs& args) -> Value {
      if (args.positional.empty()) type_error("no items for cycling given");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    }));
    d.items.emplace_back(Value("changed"), Value::function("changed", [changed_last](Interpreter&, CallArgs& args) {
      if (*changed_last) {
        auto& last = **changed_last;
        bool same = last.size() == args.positional.size();
        for (size_t k = 0; same && k < last.size(); ++k) same = last[k].equals(args.positional[k]);
        if (same) return Value(false);
      }
      *changed_last = args.positional;
      return Value(true);
    }));
    inner->vars["loop"] = loop;
    Flow flow = exec_body(s.body, inner);
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Value Interpreter::make_macro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name) {
  const Stmt* stmt = &s;
  std::weak_ptr<Scope> weak = scope;
  // Macros keep their defining scope alive only weakly when stored in it (a cycle
  // otherwise); the scope is alive for as long as the render runs.
  std::shared_ptr<Scope> strong = name == "caller" ? scope : nullptr;
  return Value::function(name, [this, stmt, weak, strong, name](Interpreter&, CallArgs& args) -> Value {
    auto parent = strong ? strong : weak.lock();
    if (!parent) throw TemplateError(ErrorKind::kRuntime, "macro called after its template finished");
    if (call_depth_ >= limits_.max_call_depth)
      throw TemplateError(ErrorKind::kLimit, fmt::format("macro calls nested deeper than {}", limits_.max_call_depth));
    check_time();
    auto frame = std::make_shared<Scope>();
    frame->parent = parent;
    const auto& params = stmt->params;
    std::vector<Value> varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        frame->vars[params[i].name] = args.positional[i];
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    Value kwargs = Value::dict();
    for (auto& [key, value] : args.keyword) {
      bool is_param = false;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].name == key) {
          if (i < args.positional.size())
            type_error(fmt::format("macro '{}' got multiple values for argument '{}'", name, key));
          frame->vars[key] = value;
          is_param = true;
        }
      }
      if (!is_param) {
        if (key == "caller") {
          frame->vars["caller"] = value;
        } else {
          kwargs.as_dict()->set(Value(key), value);
        }
      }
    }
    for (auto& p : params) {
      if (frame->vars.count(p.name)) continue;
      frame->vars[p.name] = p.default_value ? eval(*p.default_value, frame)
                                            : Value::undefined(fmt::format("parameter '{}' was not provided", p.name));
    }
    frame->vars["varargs"] = Value::list(std::move(varargs));
    frame->vars["kwargs"] = kwargs;
    ++call_depth_;
    struct Restore {
      int& depth;
      int& loops;
      int saved_loops;
      ~Restore() {
        --depth;
        loops = saved_loops;
      }
    } restore{call_depth_, loop_depth_, loop_depth_};
    loop_depth_ = 0;
    return Value(capture(stmt->body, frame));
  });
}

}  // namespace tachyon::chat::jinja
