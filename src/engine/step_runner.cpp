#include "engine/step_runner.h"

#include "engine/hidden_layers.h"

#include <algorithm>
#include <new>

#include "base/error.h"
#include "engine/commit.h"
#include "engine/stats_recorder.h"
#include "kernels/backend.h"

namespace tachyon::engine {

namespace {

// The device draw (StepOutputs::sampled) of the request's generated token `position`:
// temperature 0 for greedy rows, else the uniform keyed by that position, the one the host
// sampler would take there (sampling/sampler.h).
kernels::TokenSampling device_draw(const ActiveRequest& a, int32_t position) {
  const auto& s = a.request.sampling;
  return s.greedy() ? kernels::TokenSampling{} : s.token_sampling(a.sampler->uniform_at(position));
}

// PFlash with original positions: the request's last `count` rows of `batch` are rotated by the
// uncompressed prompt's positions (ActiveRequest::rope_position).
void add_rope_positions(model::Batch& batch, const ActiveRequest& a, int32_t count) {
  if (a.kept_positions.empty()) return;
  const size_t first_row = batch.positions.size() - static_cast<size_t>(count);
  if (batch.rope_positions.empty()) batch.rope_positions = batch.positions;
  for (size_t r = first_row; r < batch.positions.size(); ++r) batch.rope_positions[r] = a.rope_position(batch.positions[r]);
}

}  // namespace

StepRunner::StepRunner(LoopState& state)
    : state_(state),
      overlap_(state.config.overlap_steps == EngineConfig::Overlap::On ||
               (state.config.overlap_steps == EngineConfig::Overlap::Auto &&
                state.model.backend().runs_asynchronously())) {}

std::optional<IssuedStep> StepRunner::take_step_ahead() {
  std::optional<IssuedStep> step = std::move(ahead_);
  ahead_.reset();
  if (step) batch_.clear();  // (what the commit reads of it: no hidden rows)
  return step;
}

void StepRunner::execute(IssuedStep& step) {
  StepPlan& plan = step.plan;
  batch_.clear();
  // Requests whose tokens come from the raw logits alone (no bias, penalty, logprobs or
  // grammar; sampled ones without drafts to verify) need only their tokens: the backend takes
  // each row's argmax, or draws it with the request's next uniform, where the logits are
  // (Backend::argmax / sample_tokens; a backend that has them on the device returns only
  // ids). The draw is the host sampler's arithmetic (kernels/token_sampling.h) with the
  // uniform of the row's position, as the host sampler takes it. Decided on the drafts as proposed,
  // before those the plan leaves out are dropped.
  const bool tokens_only = std::all_of(plan.chunks.begin(), plan.chunks.end(), [&](const ScheduledChunk& c) {
    const ActiveRequest& a = state_.active.at(c.id);
    const auto& s = a.request.sampling;
    return s.raw_logits() && (s.greedy() || a.spec.num_drafts == 0) && a.request.logprobs < 0 &&
           !a.request.prompt_logprobs && !a.constraint;
  });
  // (A sampled request's prefill chunk that does not complete draws nothing: plain argmax then.)
  const bool any_sampled = std::any_of(plan.chunks.begin(), plan.chunks.end(), [&](const ScheduledChunk& c) {
    return c.completes && !state_.active.at(c.id).request.sampling.greedy();
  });
  const bool draw_on_backend = tokens_only && any_sampled;
  if (tokens_only) batch_.outputs.tokens = any_sampled ? model::StepOutputs::Tokens::Sampled
                                                       : model::StepOutputs::Tokens::Argmax;
  bool any_tree = false;  // a draft tree's shape changes from step to step
  // A block drafter reads named layers' outputs, not the last layer's (Batch::hidden_layers);
  // requests of drafters that read different layers in one step get all of them.
  {
    std::vector<std::vector<int32_t>> layers;
    for (const auto& c : plan.chunks) {
      const ActiveRequest& a = state_.active.at(c.id);
      const spec::Drafter* d = state_.policy.drafter(a.spec);
      if (d && d->wants_hidden() && a.speculating()) layers.push_back(d->hidden_layers());
    }
    batch_.hidden_layers =
        step_hidden_layers(layers, static_cast<int32_t>(state_.model.config().num_hidden_layers));
  }
  for (auto& c : plan.chunks) {
    ActiveRequest& a = state_.active.at(c.id);
    if (a.num_cached_prompt < 0) {
      a.num_cached_prompt = c.begin;
      state_.stats.record_cached_prompt(c.begin);
    }
    if (a.spec.num_drafts > 0) {
      // Verify only the drafts this step computes; the rest are dropped.
      const int32_t unscheduled = static_cast<int32_t>(a.tokens.size()) - (c.begin + c.count);
      if (unscheduled > 0) trim_drafts(state_, c.id, a, std::min(unscheduled, a.spec.num_drafts));
      c.completes = c.begin + c.count == static_cast<int32_t>(a.tokens.size());
      step.step_drafts += a.spec.num_drafts;
    }
    step.decode_only &= c.count == 1 + a.spec.num_drafts && c.completes && c.begin >= a.num_prompt - 1;
    const auto span = std::span<const int32_t>(a.tokens.data() + c.begin, static_cast<size_t>(c.count));
    const bool all_rows = a.spec.num_drafts > 0 || (a.request.prompt_logprobs && c.begin < a.num_prompt);
    const spec::Drafter* drafter = state_.policy.drafter(a.spec);
    const bool want_hidden = drafter && drafter->wants_hidden() && a.speculating();
    const size_t logit_rows_before = batch_.logit_rows.size();
    if (!a.spec.tree_parents.empty()) {  // a draft tree: node 0 is the last committed token
      any_tree = true;
      tree_rows_parents_.assign(1, -1);
      tree_rows_parents_.insert(tree_rows_parents_.end(), a.spec.tree_parents.begin(), a.spec.tree_parents.end());
      batch_.add_tree(a.seq, span, tree_rows_parents_, c.begin, want_hidden);
    } else {
      batch_.add(a.seq, span, c.begin,
                 all_rows ? model::LogitRows::All : (c.completes ? model::LogitRows::Last : model::LogitRows::None),
                 want_hidden);
    }
    // A generated token's row is a decode row wherever it is computed (model::Batch::decode_rows).
    batch_.mark_decode_rows(a.num_prompt);
    add_rope_positions(batch_, a, c.count);
    if (draw_on_backend) {  // sampled rows (one: the completing one, no drafts) decide the next generated token
      for (size_t r = logit_rows_before; r < batch_.logit_rows.size(); ++r)
        batch_.outputs.sampling.push_back(device_draw(a, a.num_generated()));
    }
  }
  // Plain decode rows whose tokens only the backend picks: the forward returns before they
  // are read, so that the next step can be issued first (issue_ahead).
  batch_.outputs.read_tokens_later = overlap_ && tokens_only && step.decode_only && step.step_drafts == 0 &&
                                     !any_tree && batch_.hidden_rows.empty();
  kernels::Backend& backend = state_.model.backend();
  step.t0 = Clock::now();
  const uint64_t warmups = backend.warmup_events();
  try {
    // Decode steps of plain rows and draft chains repeat their shapes (k settles): the
    // backend may replay them as graphs. Both kinds alike, so that the step-cost model
    // compares like with like (a replayed plain step against a directly issued verify
    // step made every draft row look expensive to auto-k).
    const kernels::RepeatingStepHint hint(backend, step.decode_only && !any_tree);
    if (state_.config.fault_injector) {
      for (const auto& c : plan.chunks) {
        const ActiveRequest& a = state_.active.at(c.id);
        const FaultKind fault = state_.config.fault_injector(c.id, a.request, a.num_generated() - a.spec.num_drafts);
        if (fault != FaultKind::kNone) throw_injected_fault(fault, c.id);
      }
    }
    step.out = state_.model.forward(batch_, state_.kv);
  } catch (const std::bad_alloc&) {
    step.failure = "out of memory in the forward";
  } catch (const std::exception& e) {
    step.failure = e.what();
  }
  // A step that also did one-time work (a CUDA graph captured) says nothing about the
  // steady cost of its shape: the gates and auto-k skip it.
  step.timed = backend.warmup_events() == warmups;
}

bool StepRunner::collect_outputs(IssuedStep& step) {
  if (step.failure.empty() && step.out.tokens_pending) {
    issue_ahead(step.plan, step.out);
    try {
      model::collect_tokens(state_.model.backend(), step.out);
    } catch (const std::exception& e) {
      step.failure = e.what();
    }
    if (ahead_) ahead_->t0 = Clock::now();  // the device goes on to it now
  }
  if (!step.failure.empty()) return false;
  drop_retired_rows(step.plan, step.out);
  return true;
}

void StepRunner::wait_in_flight() {
  if (ahead_) model::collect_tokens(state_.model.backend(), ahead_->out);  // nothing left in flight
}

// While the device runs `plan`'s step, whose tokens are not read yet, the next step of the
// same requests is issued, each row reading its token where that step left it
// (Batch::device_tokens = out.device_ids): the device goes from one step to the next without
// waiting for the host to read, decide and record (host time per step on the H200: 80-190
// us of ~4.4 ms at batch 1). Only for plain decode rows (what read_tokens_later allows) of
// live requests that may generate another token, with KV for it, and while no waiting request
// could be admitted (one that could joins the step after: one step later than it would without
// the overlap; a full batch overlaps whatever waits). A request that stops at this step's
// token has the next step's row dropped (drop_retired_rows); its KV blocks are written by that
// row before any later step, ordered on the device, can reuse them.
void StepRunner::issue_ahead(const StepPlan& plan, const model::StepOutput& out) {
  const Scheduler& scheduler = state_.scheduler;
  // Every running request is in the step (none left out by the token budget), and no waiting
  // request could join the next step (a full batch: then waiting requests do not stop it).
  if (!out.device_ids || static_cast<int32_t>(plan.chunks.size()) != scheduler.num_running() ||
      (scheduler.num_waiting() > 0 && scheduler.num_running() < state_.config.max_concurrent))
    return;
  bool any_sampled = false;
  for (const auto& c : plan.chunks) {
    const auto it = state_.active.find(c.id);
    if (it == state_.active.end()) return;
    const ActiveRequest& a = it->second;
    if (c.count != 1 || !c.completes || a.spec.num_drafts > 0 || a.speculating() ||
        a.pending.finish != FinishReason::None || a.num_generated() + 1 >= a.request.max_tokens)
      return;
    any_sampled |= !a.request.sampling.greedy();
  }
  for (const auto& c : plan.chunks)
    if (!state_.kv.reserve(state_.active.at(c.id).seq, c.begin + 2)) return;
  static constexpr int32_t kOnDevice = 0;  // placeholder: the row reads its token from out.device_ids
  ahead_batch_.clear();
  ahead_batch_.outputs.tokens = any_sampled ? model::StepOutputs::Tokens::Sampled : model::StepOutputs::Tokens::Argmax;
  ahead_batch_.outputs.read_tokens_later = true;
  ahead_batch_.device_tokens = out.device_ids;
  IssuedStep next;
  for (const auto& c : plan.chunks) {
    ActiveRequest& a = state_.active.at(c.id);
    ahead_batch_.add(a.seq, std::span<const int32_t>(&kOnDevice, 1), c.begin + 1, model::LogitRows::Last);
    ahead_batch_.mark_decode_rows(a.num_prompt);
    add_rope_positions(ahead_batch_, a, 1);
    // This row decides the token after the one still on the device (not yet in a.tokens).
    if (any_sampled) ahead_batch_.outputs.sampling.push_back(device_draw(a, a.num_generated() + 1));
    next.plan.chunks.push_back({c.id, c.begin + 1, 1, true});
  }
  kernels::Backend& backend = state_.model.backend();
  const uint64_t warmups = backend.warmup_events();
  try {
    const kernels::RepeatingStepHint hint(backend, true);
    next.out = state_.model.forward(ahead_batch_, state_.kv);
  } catch (const std::exception& e) {
    next.failure = e.what();
  }
  next.timed = backend.warmup_events() == warmups;
  ahead_ = std::move(next);
  state_.stats.record_overlapped_step();
}

// Rows of requests retired since their step was issued ahead (stopped at the step before,
// cancelled): their chunks and tokens are dropped. Each chunk of such a step has one row. Any
// other step may have chunks without a row (a prompt chunk that does not complete) or with
// several (drafts), so its rows are not touched: indexing them by chunk read and wrote past the
// end of `argmax` (ThreadSanitizer, engine_model_tests: heap-use-after-free).
void StepRunner::drop_retired_rows(StepPlan& plan, model::StepOutput& out) {
  const auto retired = [&](const auto& chunk) { return !state_.active.count(chunk.id); };
  if (std::none_of(plan.chunks.begin(), plan.chunks.end(), retired)) return;
  TACHYON_CHECK(out.logits.empty() && out.hidden.empty(), "a step with dropped rows returned logits");
  TACHYON_CHECK(out.argmax.empty() || out.argmax.size() == plan.chunks.size(),
                "a step with dropped rows has {} token rows for {} chunks", out.argmax.size(), plan.chunks.size());
  size_t kept = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    if (retired(plan.chunks[i])) continue;
    if (!out.argmax.empty()) out.argmax[kept] = out.argmax[i];
    plan.chunks[kept++] = plan.chunks[i];
  }
  plan.chunks.resize(kept);
  if (!out.argmax.empty()) out.argmax.resize(kept);
}

}  // namespace tachyon::engine
