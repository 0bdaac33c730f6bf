#include "chat/jinja/template.h"

#include <fmt/format.h>

#include "chat/jinja/builtins.h"
#include "chat/jinja/parser.h"

namespace tachyon::chat::jinja {

namespace {

// Jinja2 resolves filter and test names when it compiles a template, so an unknown one
// is an error even in code that never runs, except inside an `if` statement or an inline
// if-expression (its "soft" frames), where the error waits until the filter is called.
// Loop, macro, call, filter, with and set-block bodies open strict frames again.
void check_names(const Expr* e, bool soft);

void check_names(const Body& body, bool soft) {
  for (auto& s : body) {
    bool inner_soft = soft || s->kind == StmtKind::kIf;
    check_names(s->expr.get(), inner_soft);
    check_names(s->target.get(), inner_soft);
    check_names(s->cond.get(), false);
    for (auto& c : s->conditions) check_names(c.get(), true);
    for (auto& b : s->bodies) check_names(b, true);
    check_names(s->body, false);
    check_names(s->else_body, s->kind == StmtKind::kIf);
    for (auto& p : s->params) check_names(p.default_value.get(), false);
    for (auto& [t, v] : s->assignments) {
      check_names(t.get(), false);
      check_names(v.get(), soft);
    }
  }
}

void check_names(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == ExprKind::kCondExpr) soft = true;
  if (!soft && e->kind == ExprKind::kFilter && !has_filter(e->name))
    throw TemplateError(ErrorKind::kAssertion, fmt::format("No filter named '{}'.", e->name), e->line, e->column);
  if (!soft && e->kind == ExprKind::kTest && !has_test(e->name))
    throw TemplateError(ErrorKind::kAssertion, fmt::format("No test named '{}'.", e->name), e->line, e->column);
  for (auto& a : e->args) check_names(a.get(), soft);
  for (auto& [k, v] : e->kwargs) check_names(v.get(), soft);
  check_names(e->dyn_args.get(), soft);
  check_names(e->dyn_kwargs.get(), soft);
}

}  // namespace

Template::Template(std::string_view source, Limits limits)
    : body_(std::make_shared<const Body>(parse_template(source))), limits_(limits) {
  check_names(*body_, false);
}

std::string Template::render(const OrderedJson& context) const {
  Interpreter interp(limits_);
  if (context.is_object())
    for (auto it = context.begin(); it != context.end(); ++it) interp.set_global(it.key(), Value::from_json(it.value()));
  return interp.render(*body_);
}

}  // namespace tachyon::chat::jinja
