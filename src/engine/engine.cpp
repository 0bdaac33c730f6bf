#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "base/logging.h"
#include "engine/scheduler.h"
#include "kv/kv_cache.h"
#include "kernels/ops.h"
#include "spec/draft_tree.h"
#include "spec/drafter_payoff.h"
#include "spec/ema.h"
#include "spec/spec_step_costs.h"
#include "spec/ngram.h"
#include "spec/verify.h"

namespace tachyon::engine {

namespace {
using Clock = std::chrono::steady_clock;
using spec::DraftAcceptance;
using spec::DrafterPayoff;
using spec::ema_update;
using spec::SpecStepCosts;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
    default: return "";
  }
}

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts[i];
  sum += seconds;
  ++count;
}

// ---- RequestStream -----------------------------------------------------------------

RequestStream::~RequestStream() { cancel(); }

void RequestStream::cancel() {
  {
    std::lock_guard lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
  }
  if (engine_) engine_->cancel(id_);
}

std::optional<RequestOutput> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return pending_.has_value(); })) return std::nullopt;
  std::optional<RequestOutput> out = std::move(pending_);
  pending_.reset();
  return out;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard lock(mutex_);
    if (!pending_) {
      pending_ = std::move(out);
    } else {  // the owner has not collected the last delivery yet: merge
      auto& p = *pending_;
      p.tokens.insert(p.tokens.end(), out.tokens.begin(), out.tokens.end());
      p.logprobs.insert(p.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
      if (!out.prompt_logprobs.empty()) p.prompt_logprobs = std::move(out.prompt_logprobs);
      p.finish = out.finish;
      p.error = std::move(out.error);
      p.num_prompt_tokens = out.num_prompt_tokens;
      p.num_cached_prompt_tokens = out.num_cached_prompt_tokens;
      p.num_generated_tokens = out.num_generated_tokens;
    }
  }
  ready_.notify_all();
}

// ---- EngineLoop: the engine thread's state -------------------------------------------

class EngineLoop : public KvAllocator {
 public:
  EngineLoop(Engine& engine, model::Model& model, const EngineConfig& config, int32_t num_blocks)
      : engine_(engine),
        model_(model),
        config_(config),
        kv_(model.backend(), sized_layout(model, num_blocks, config)),
        scheduler_({config.max_concurrent, config.max_tokens_per_step}, *this) {
    stats_.kv_blocks_total = num_blocks;
    thread_ = std::thread([this] { run(); });
  }

  ~EngineLoop() override {
    {
      std::lock_guard lock(inbox_mutex_);
      stopping_ = true;
    }
    inbox_ready_.notify_all();
    thread_.join();
  }

  void submit(RequestId id, GenerationRequest request, std::weak_ptr<RequestStream> stream) {
    {
      std::lock_guard lock(inbox_mutex_);
      inbox_.push_back({id, std::move(request), std::move(stream), Clock::now()});
    }
    inbox_ready_.notify_all();
  }

  void cancel(RequestId id) {
    {
      std::lock_guard lock(inbox_mutex_);
      cancelled_.push_back(id);
    }
    inbox_ready_.notify_all();
  }

  EngineStats stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }

  // A hybrid model's recurrent state is sized by the engine: one working state per request
  // that can run at once, and a rollback ring deep enough for every draft of a verify step
  // to be rejected (k + 1 rows), so speculation never needs a recomputation.
  static kv::KvLayout sized_layout(model::Model& model, int32_t num_blocks, const EngineConfig& config) {
    kv::KvLayout layout = model.kv_layout(num_blocks, config.block_size);
    if (layout.num_state_layers > 0) {
      layout.max_sequences = std::max(1, config.max_concurrent);
      layout.state_rollback_rows = config.drafter ? std::max(1, config.num_speculative_tokens) + 1 : 1;
    }
    return layout;
  }

  // KvAllocator
  int32_t begin_sequence(RequestId id) override {
    Active& a = active_.at(id);
    a.seq = kv_.add_sequence();
    if (!config_.prefix_cache || a.request.prompt_logprobs) return 0;
    return kv_.match_prefix(a.seq, a.tokens);
  }
  bool reserve(RequestId id, int32_t num_tokens) override { return kv_.reserve(active_.at(id).seq, num_tokens); }
  void end_sequence(RequestId id) override {
    Active& a = active_.at(id);
    if (a.seq >= 0) kv_.remove_sequence(a.seq);
    a.seq = -1;
  }

 private:
  struct Incoming {
    RequestId id;
    GenerationRequest request;
    std::weak_ptr<RequestStream> stream;
    Clock::time_point submitted;
  };
  struct Active {
    GenerationRequest request;
    std::weak_ptr<RequestStream> stream;
    std::vector<int32_t> tokens;  // prompt + generated
    int32_t num_prompt = 0;
    int32_t num_cached_prompt = -1;  // known at the first scheduled chunk
    std::unique_ptr<sampling::Sampler> sampler;
    std::unique_ptr<sampling::TokenConstraint> constraint;  // request.grammar's state; null: none
    kv::SeqId seq = -1;
    Clock::time_point submitted, last_token;
    bool first_token_sent = false;
    RequestOutput pending;  // accumulated this step
    std::vector<TokenLogprob> prompt_logprobs;
    int32_t num_drafts = 0;  // unverified draft tokens at the end of `tokens`
    std::vector<int32_t> tree_parents;  // the drafts' parents when they form a tree (spec::DraftTree); empty: a chain
    int32_t draft_depth = 0;            // levels of the pending drafts (a chain: its length)
    bool tree_step = false;             // the pending drafts' shape, as chosen by tree_or_chain_
    bool shape_measured = false;        // ... and the choice was tree_or_chain_'s (auto trees)
    double step_seconds = 0;            // this step's timed cost (forward share + drafting), or 0
    int32_t step_tokens = 0;            // tokens this step's verification yielded, for tree_or_chain_
    DraftAcceptance acceptance;         // per draft level, for auto-k
    bool spec_off = false;
    SpecUsage spec;
    // Throughput gate: seconds and tokens of this request's speculative steps (drafting
    // included) and of plain decode steps, each step's time shared among its requests.
    double spec_seconds = 0, plain_seconds = 0, draft_seconds = 0;
    int32_t spec_tokens = 0, plain_tokens = 0, probe_plain = 0;
    bool drafter_primed = false;  // the drafter has seen this request once (see propose_drafts)
    bool payoff_checked = false;  // payoff_ decided whether a model drafter starts on it
    bool draft_warmup = false;    // this step's drafting did one-time work (Backend::warmup_events)
    bool step_timed = true;       // this step's time counts for the throughput gate
  };

  void run() {
    std::vector<float> row;  // scratch logits row, reused
    model::Batch batch;
    for (;;) {
      if (!drain_inbox()) {
        if (ahead_) model::collect_tokens(model_.backend(), ahead_->out);  // nothing left in flight
        return;
      }
      if (!ahead_ && scheduler_.num_running() == 0 && scheduler_.num_waiting() == 0) continue;
      const auto iteration_start = Clock::now();
      IssuedStep step;
      if (ahead_) {  // issued during the last iteration: its tokens follow the last step's
        step = std::move(*ahead_);
        ahead_.reset();
        batch.clear();  // (what the processing below reads of it: no hidden rows)
      } else if (!schedule_and_issue(batch, step)) {
        continue;
      }
      auto& [plan, out, t0, timed, decode_only, step_drafts, drafting_seconds, failure] = step;
      if (failure.empty() && out.tokens_pending) {
        issue_ahead(plan, out);
        try {
          model::collect_tokens(model_.backend(), out);
        } catch (const std::exception& e) {
          failure = e.what();
        }
        if (ahead_) ahead_->t0 = Clock::now();  // the device goes on to it now
      }
      if (!failure.empty()) {
        log::error("forward failed: {}", failure);
        for (const auto& c : plan.chunks) finish(c.id, FinishReason::Error, failure);
        continue;
      }
      drop_retired_rows(plan, out);
      if (plan.chunks.empty()) continue;
      const double step_seconds = seconds_between(t0, Clock::now());
      // Prefill chunks are not decode steps: their cost would inflate the plain step cost that
      // verify rows are compared with (and, early on, hide every draft's cost from the gates).
      if (timed && decode_only) record_step_cost(step_seconds, plan.chunks.size(), step_drafts);
      const double share = step_seconds / static_cast<double>(plan.chunks.size());
      gate_buckets_.assign(plan.chunks.size(), nullptr);
      for (size_t i = 0; i < plan.chunks.size(); ++i) {
        const ScheduledChunk& c = plan.chunks[i];
        Active& a = active_.at(c.id);
        a.step_timed = timed && !a.draft_warmup;
        a.step_seconds = a.step_timed && a.num_drafts > 0 ? share + a.draft_seconds : 0;
        if (a.step_timed && a.num_drafts > 0) {
          a.spec_seconds += share + a.draft_seconds;
          if (decode_only) (a.tree_parents.empty() ? spec_costs_ : tree_costs_).record(a.num_drafts, share + a.draft_seconds);
          gate_buckets_[i] = &a.spec_seconds;
        } else if (a.step_timed && c.count == 1 && c.completes && speculation_on(a)) {
          a.plain_seconds += share;
          ++a.plain_tokens;
          gate_buckets_[i] = &a.plain_seconds;
        }
        a.draft_seconds = 0;
        a.draft_warmup = false;
      }
      size_t logit_row = 0, hidden_row = 0;
      uint64_t computed_prompt = 0, generated = 0;
      for (const auto& c : plan.chunks) {
        Active& a = active_.at(c.id);
        computed_prompt += static_cast<uint64_t>(std::max(0, std::min(c.begin + c.count, a.num_prompt) - c.begin));
        const bool has_hidden = !batch.hidden_rows.empty() && hidden_row < batch.hidden_rows.size() &&
                                batch.row_seq[batch.hidden_rows[hidden_row]] ==
                                    static_cast<int32_t>(&c - plan.chunks.data());
        const float* hidden = has_hidden ? out.hidden.data() + hidden_row * static_cast<size_t>(out.hidden_size) : nullptr;
        if (has_hidden) hidden_row += static_cast<size_t>(c.count);
        if (a.num_drafts > 0) {
          generated += verify_drafts(c, a, out, logit_row, hidden);
          logit_row += static_cast<size_t>(c.count);
          continue;
        }
        if (hidden && a.pending.finish == FinishReason::None)
          config_.drafter->observe_hidden(c.id, c.begin, {hidden, static_cast<size_t>(c.count * out.hidden_size)}, c.count);
        const bool all_rows = a.request.prompt_logprobs && c.begin < a.num_prompt;
        if (all_rows) {  // logprob of each next prompt token
          for (int32_t r = 0; r < c.count; ++r) {
            const int32_t t = c.begin + r;
            if (t + 1 < a.num_prompt)
              a.prompt_logprobs.push_back(logprob_of(out.logits_row(logit_row + r), a.tokens[t + 1], a.request.logprobs));
          }
        }
        scheduler_.on_computed(c.id, c.count);
        if (config_.prefix_cache) kv_.register_blocks(a.seq, a.tokens, c.begin + c.count);
        const size_t rows_used = all_rows ? static_cast<size_t>(c.count) : (c.completes ? 1 : 0);
        if (c.completes && !out.argmax.empty()) {
          emit(c.id, a, out.argmax[logit_row + rows_used - 1]);
          ++generated;
        } else if (c.completes) {
          const auto logits = out.logits_row(logit_row + rows_used - 1);
          row.assign(logits.begin(), logits.end());
          if (a.constraint && a.constraint->mask_logits(row) == 0) {  // constrained decoding
            a.pending.finish = FinishReason::Error;
            a.pending.error = "constrained decoding: no token of the vocabulary continues the grammar";
          } else {
            const int32_t token = a.sampler->sample(row, {std::span<const int32_t>(a.tokens.data(), a.num_prompt),
                                                          std::span<const int32_t>(a.tokens.data() + a.num_prompt,
                                                                                   a.tokens.size() - a.num_prompt)});
            if (a.request.logprobs >= 0) a.pending.logprobs.push_back(logprob_of(logits, token, a.request.logprobs));
            emit(c.id, a, token);
            ++generated;
          }
        }
        logit_row += rows_used;
      }
      // The rest of the iteration (scheduling, verification, sampling, emitting: host work that
      // a speculative step spreads over several tokens) counts for the throughput gate too, so
      // it compares tokens per second of wall time. (Requests are only removed at delivery.)
      const double rest = seconds_between(iteration_start, Clock::now()) - drafting_seconds - step_seconds;
      for (double* bucket : gate_buckets_)
        if (bucket) *bucket += std::max(0.0, rest) / static_cast<double>(plan.chunks.size());
      // Trees and chains are compared on whole iterations too: a tree's verification moves
      // the accepted branch's KV and walks the tree on the host.
      for (const auto& c : plan.chunks) {
        Active& a = active_.at(c.id);
        if (a.step_tokens > 0)
          tree_or_chain_.record(a.tree_step, a.step_tokens,
                                a.step_seconds + std::max(0.0, rest) / static_cast<double>(plan.chunks.size()));
        a.step_tokens = 0;
      }
      {
        std::lock_guard lock(stats_mutex_);
        if (decode_only && timed) {
          const double wall = seconds_between(iteration_start, Clock::now());
          if (step_drafts > 0) {
            stats_.spec_step_seconds += wall;
            stats_.spec_draft_seconds += drafting_seconds;
            ++stats_.spec_decode_steps;
          } else {
            stats_.plain_step_seconds += wall;
            ++stats_.plain_decode_steps;
          }
        }
        stats_.computed_prompt_tokens += computed_prompt;
        stats_.generated_tokens += generated;
        ++stats_.steps;
      }
      for (const auto& c : plan.chunks) deliver(c.id);
    }
  }

  // A step sent to the backend, and what the iteration that reads its tokens needs of it.
  struct IssuedStep {
    StepPlan plan;
    model::StepOutput out;
    Clock::time_point t0;     // when the device started on it (issued ahead: when the step before was read)
    bool timed = true;        // no one-time work (a graph captured) during its forward
    bool decode_only = true;  // every chunk is one committed token (+ its drafts): no prompt rows
    int32_t step_drafts = 0;  // draft rows this step verifies
    double drafting_seconds = 0;
    std::string failure;      // its forward's error, reported to its requests when it is read
  };

  // Drafts, schedules and issues the next step into `step` (its tokens read later where
  // read_tokens_later allows, else read). False when nothing could be scheduled.
  bool schedule_and_issue(model::Batch& batch, IssuedStep& step) {
    step.drafting_seconds = propose_drafts();
    StepPlan& plan = step.plan;
    plan = scheduler_.schedule();
    for (RequestId id : plan.preempted) {
      log::debug("request {} preempted (KV full)", id);
      drop_drafts(id);
    }
    if (plan.chunks.empty()) {
      // Nothing fits now and nothing runs: the waiting request can never be served.
      fail_head_of_line();
      return false;
    }
    batch.clear();
    // Requests whose tokens come from the raw logits alone (no bias, penalty, logprobs or
    // grammar; sampled ones without drafts to verify) need only their tokens: the backend takes
    // each row's argmax, or draws it with the request's next uniform, where the logits are
    // (Backend::argmax / sample_tokens; a backend that has them on the device returns only
    // ids). The draw is the host sampler's arithmetic (kernels/token_sampling.h) and takes one
    // uniform per sampled row, as the host sampler does.
    const bool tokens_only = std::all_of(plan.chunks.begin(), plan.chunks.end(), [&](const ScheduledChunk& c) {
      const Active& a = active_.at(c.id);
      const auto& s = a.request.sampling;
      return s.raw_logits() && (s.greedy() || a.num_drafts == 0) && a.request.logprobs < 0 &&
             !a.request.prompt_logprobs && !a.constraint;
    });
    // (A sampled request's prefill chunk that does not complete draws nothing: plain argmax then.)
    const bool any_sampled = std::any_of(plan.chunks.begin(), plan.chunks.end(), [&](const ScheduledChunk& c) {
      return c.completes && !active_.at(c.id).request.sampling.greedy();
    });
    if (tokens_only) batch.outputs.tokens = any_sampled ? model::StepOutputs::Tokens::Sampled
                                                        : model::StepOutputs::Tokens::Argmax;
    const bool draw_on_backend = tokens_only && any_sampled;
    bool any_tree = false;  // a draft tree's shape changes from step to step
    for (auto& c : plan.chunks) {
      Active& a = active_.at(c.id);
      if (a.num_cached_prompt < 0) {
        a.num_cached_prompt = c.begin;
        std::lock_guard lock(stats_mutex_);
        stats_.prefix_cache_hit_tokens += static_cast<uint64_t>(c.begin);
      }
      if (a.num_drafts > 0) {
        // Verify only the drafts this step computes; the rest are dropped.
        const int32_t unscheduled = static_cast<int32_t>(a.tokens.size()) - (c.begin + c.count);
        if (unscheduled > 0) trim_drafts(c.id, std::min(unscheduled, a.num_drafts));
        c.completes = c.begin + c.count == static_cast<int32_t>(a.tokens.size());
        step.step_drafts += a.num_drafts;
      }
      step.decode_only &= c.count == 1 + a.num_drafts && c.completes && c.begin >= a.num_prompt - 1;
      const auto span = std::span<const int32_t>(a.tokens.data() + c.begin, static_cast<size_t>(c.count));
      const bool all_rows = a.num_drafts > 0 || (a.request.prompt_logprobs && c.begin < a.num_prompt);
      const bool want_hidden = config_.drafter && config_.drafter->wants_hidden() && speculation_on(a);
      const size_t logit_rows_before = batch.logit_rows.size();
      if (!a.tree_parents.empty()) {  // a draft tree: node 0 is the last committed token
        any_tree = true;
        tree_rows_parents_.assign(1, -1);
        tree_rows_parents_.insert(tree_rows_parents_.end(), a.tree_parents.begin(), a.tree_parents.end());
        batch.add_tree(a.seq, span, tree_rows_parents_, c.begin, want_hidden);
      } else {
        batch.add(a.seq, span, c.begin,
                  all_rows ? model::LogitRows::All : (c.completes ? model::LogitRows::Last : model::LogitRows::None),
                  want_hidden);
      }
      if (draw_on_backend) {  // sampled rows (one: the completing one) draw from the request's generator
        for (size_t r = logit_rows_before; r < batch.logit_rows.size(); ++r)
          batch.outputs.sampling.push_back(next_draw(a));
      }
    }
    // Plain decode rows whose tokens only the backend picks: the forward returns before they
    // are read, so that the next step can be issued first (issue_ahead).
    batch.outputs.read_tokens_later = overlap_ && tokens_only && step.decode_only && step.step_drafts == 0 && !any_tree &&
                              batch.hidden_rows.empty();
    step.t0 = Clock::now();
    const uint64_t warmups = model_.backend().warmup_events();
    try {
      // Decode steps of plain rows and draft chains repeat their shapes (k settles): the
      // backend may replay them as graphs. Both kinds alike, so that the step-cost model
      // compares like with like (a replayed plain step against a directly issued verify
      // step made every draft row look expensive to auto-k).
      const kernels::RepeatingStepHint hint(model_.backend(), step.decode_only && !any_tree);
      step.out = model_.forward(batch, kv_);
    } catch (const std::exception& e) {
      step.failure = e.what();
    }
    // A step that also did one-time work (a CUDA graph captured) says nothing about the
    // steady cost of its shape: the gates and auto-k skip it.
    step.timed = model_.backend().warmup_events() == warmups;
    return true;
  }

  // ---- overlapped decoding ---------------------------------------------------------------

  // While the device runs `plan`'s step, whose tokens are not read yet, the next step of the
  // same requests is issued, each row reading its token where that step left it
  // (Batch::device_tokens = out.device_ids): the device goes from one step to the next without
  // waiting for the host to read, decide and record (host time per step on the H200: 80-190
  // us of ~4.4 ms at batch 1). Only for plain decode rows (what read_tokens_later allows) of
  // live requests that may generate another token, with KV for it, and while no waiting request
  // could be admitted (one that could joins the step after: one step later than it would without
  // the overlap; a full batch overlaps whatever waits). A request that
  // stops at this step's token has the next step's row dropped (drop_retired_rows); its KV
  // blocks are written by that row before any later step, ordered on the device, can reuse them.
  void issue_ahead(const StepPlan& plan, const model::StepOutput& out) {
    // Every running request is in the step (none left out by the token budget), and no waiting
    // request could join the next step (a full batch: then waiting requests do not stop it).
    if (!out.device_ids || static_cast<int32_t>(plan.chunks.size()) != scheduler_.num_running() ||
        (scheduler_.num_waiting() > 0 && scheduler_.num_running() < config_.max_concurrent))
      return;
    bool any_sampled = false;
    for (const auto& c : plan.chunks) {
      const auto it = active_.find(c.id);
      if (it == active_.end()) return;
      const Active& a = it->second;
      if (c.count != 1 || !c.completes || a.num_drafts > 0 || speculation_on(a) ||
          a.pending.finish != FinishReason::None ||
          static_cast<int32_t>(a.tokens.size()) + 1 - a.num_prompt >= a.request.max_tokens)
        return;
      any_sampled |= !a.request.sampling.greedy();
    }
    for (const auto& c : plan.chunks)
      if (!kv_.reserve(active_.at(c.id).seq, c.begin + 2)) return;
    static constexpr int32_t kOnDevice = 0;  // placeholder: the row reads its token from out.device_ids
    ahead_batch_.clear();
    IssuedStep next;
    for (const auto& c : plan.chunks) {
      Active& a = active_.at(c.id);
      ahead_batch_.add(a.seq, std::span<const int32_t>(&kOnDevice, 1), c.begin + 1, model::LogitRows::Last);
      if (any_sampled) ahead_batch_.outputs.sampling.push_back(next_draw(a));  // drawn in the order without the overlap
      next.plan.chunks.push_back({c.id, c.begin + 1, 1, true});
    }
    ahead_batch_.outputs.tokens = any_sampled ? model::StepOutputs::Tokens::Sampled : model::StepOutputs::Tokens::Argmax;
    ahead_batch_.device_tokens = out.device_ids;
    ahead_batch_.outputs.read_tokens_later = true;
    const uint64_t warmups = model_.backend().warmup_events();
    try {
      const kernels::RepeatingStepHint hint(model_.backend(), true);
      next.out = model_.forward(ahead_batch_, kv_);
    } catch (const std::exception& e) {
      next.failure = e.what();
    }
    next.timed = model_.backend().warmup_events() == warmups;
    ahead_ = std::move(next);
    std::lock_guard lock(stats_mutex_);
    ++stats_.overlapped_steps;
  }

  // Rows of requests retired since their step was issued ahead (stopped at the step before,
  // cancelled): their chunks and tokens are dropped. Each chunk of such a step has one row.
  void drop_retired_rows(StepPlan& plan, model::StepOutput& out) {
    size_t kept = 0;
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      if (!active_.count(plan.chunks[i].id)) continue;
      if (!out.argmax.empty()) out.argmax[kept] = out.argmax[i];
      plan.chunks[kept++] = plan.chunks[i];
    }
    if (kept == plan.chunks.size()) return;
    TACHYON_CHECK(out.logits.empty() && out.hidden.empty(), "a step with dropped rows returned logits");
    plan.chunks.resize(kept);
    if (!out.argmax.empty()) out.argmax.resize(kept);
  }

  // The request's next device draw (Batch::sampling): temperature 0 for greedy rows, else its
  // sampler's next uniform (one per sampled row, as the host sampler takes).
  kernels::TokenSampling next_draw(Active& a) {
    const auto& s = a.request.sampling;
    return s.greedy() ? kernels::TokenSampling{} : s.token_sampling(a.sampler->uniform());
  }

  // Appends a sampled token; decides whether the request is finished.
  void emit(RequestId id, Active& a, int32_t token) {
    a.tokens.push_back(token);
    a.pending.tokens.push_back(token);
    scheduler_.on_token_appended(id);
    on_token_timing(a);
    const int32_t num_generated = static_cast<int32_t>(a.tokens.size()) - a.num_prompt;
    const auto& stops = a.request.stop_token_ids;
    if (a.constraint) a.constraint->accept(token);  // the mask allowed it
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) a.pending.finish = FinishReason::Stop;
    else if (a.constraint && a.constraint->is_terminal()) a.pending.finish = FinishReason::Stop;
    else if (num_generated >= a.request.max_tokens) a.pending.finish = FinishReason::Length;
  }

  // ---- speculation -------------------------------------------------------------------

  bool speculation_on(const Active& a) const {
    // Constrained requests decode without speculation: verification would need the grammar's
    // mask on every draft row (and the drafts replayed through the matcher).
    if (!config_.drafter || a.spec_off || a.constraint) return false;
    return a.request.speculate.value_or(true);
  }

  // Drafts for every running request whose only pending token is its last sampled one.
  // Returns the seconds spent drafting (every request's, one-time catch-ups included).
  double propose_drafts() {
    const auto start = Clock::now();
    if (!config_.drafter) return 0;
    for (RequestId id : scheduler_.running_ids()) {
      Active& a = active_.at(id);
      if (!speculation_on(a) || a.num_drafts > 0 || a.pending.finish != FinishReason::None) continue;
      if (scheduler_.num_computed(id) != static_cast<int32_t>(a.tokens.size()) - 1) continue;
      const int32_t generated = static_cast<int32_t>(a.tokens.size()) - a.num_prompt;
      const int32_t room = std::min(a.request.max_tokens - generated - 1,
                                    engine_.max_context() - static_cast<int32_t>(a.tokens.size()) - 1);
      a.shape_measured = auto_tree_eligible(a);
      a.tree_step = a.shape_measured && tree_or_chain_.trees(shape_decisions_++);
      int32_t k = std::min(choose_k(a), room);
      if (kv_.has_state()) k = std::min(k, kv_.layout().state_rollback_rows - 1);  // what the ring can undo
      if (k <= 0) continue;
      if (a.probe_plain > 0) {  // a few plain steps measure what speculation competes with
        --a.probe_plain;
        continue;
      }
      // Payoff gate: a model drafter's first proposal pays its catch-up over the whole prompt.
      if (config_.gates && !config_.model_free_drafter && !a.payoff_checked) {
        a.payoff_checked = true;
        const int32_t max_new = std::min(a.request.max_tokens - generated,
                                         engine_.max_context() - static_cast<int32_t>(a.tokens.size()));
        if (!payoff_.worth_drafting(static_cast<int64_t>(a.tokens.size()), max_new, spec_costs_.plain())) {
          switch_off_speculation(a, "payoff_gate");
          continue;
        }
      }
      const auto t0 = Clock::now();
      const uint64_t warmups = model_.backend().warmup_events();
      std::vector<int32_t> drafts;
      if (const int32_t nodes = tree_nodes(a, k); nodes > k) {
        auto tree = config_.drafter->propose_tree(id, a.tokens, std::min(k, kernels::kMaxTreeDepth - 1), nodes);
        a.draft_depth = tree.depth();
        if (!tree.is_chain()) a.tree_parents = std::move(tree.parents);
        drafts = std::move(tree.tokens);
      } else {
        drafts = config_.drafter->propose(id, a.tokens, k);
        a.draft_depth = static_cast<int32_t>(drafts.size());
      }
      const double seconds = seconds_between(t0, Clock::now());
      // The first proposal also catches a model drafter up over the whole prompt (its own
      // prefill): a one-time cost like the target's prefill, kept out of the per-token costs
      // that the throughput gate and auto-k compare (it made the gate switch draft/MTP off
      // on long prompts where they then ran faster).
      if (!a.drafter_primed && !config_.model_free_drafter)
        payoff_.record_catch_up(static_cast<int64_t>(a.tokens.size()), seconds);
      const bool catch_up = !a.drafter_primed || model_.backend().warmup_events() != warmups;
      a.drafter_primed = true;
      a.draft_warmup = catch_up;
      if (!catch_up) a.draft_seconds += seconds;
      if (drafts.empty()) continue;
      a.tokens.insert(a.tokens.end(), drafts.begin(), drafts.end());
      a.num_drafts = static_cast<int32_t>(drafts.size());
      scheduler_.on_token_appended(id, a.num_drafts);
    }
    return seconds_between(start, Clock::now());
  }

  // Nodes of this request's next draft tree; <= k means a chain. Trees are verified greedily
  // from every node's logits, so they serve greedy requests without per-token logprobs, on
  // models whose only per-sequence state is the paged KV (a recurrent state follows one branch).
  bool trees_possible(const Active& a) const {
    return config_.drafter->proposes_trees() && !kv_.has_state() && a.request.sampling.greedy() &&
           a.request.logprobs < 0;
  }
  // Auto (max_tree_nodes -1): trees of 2k nodes or chains, whichever measures faster
  // (TreeOrChain), for drafters whose trees are worth trying.
  bool auto_tree_eligible(const Active& a) const {
    return config_.max_tree_nodes < 0 && config_.drafter->trees_by_default() && trees_possible(a);
  }
  int32_t tree_nodes(const Active& a, int32_t k) const {
    if (!trees_possible(a)) return 0;
    if (config_.max_tree_nodes >= 0) return config_.max_tree_nodes;
    return a.tree_step ? 2 * k : 0;
  }
  // Evidence before a sticky gate may stop a request's speculation. The first steps of a
  // generation are unrepresentative (prompt lookup on code completion accepts ~0.6 drafts per
  // step over its first 8-16 steps and ~1.4 over 384 tokens on the demo model): with 8 steps and
  // 16 tokens the gates stopped it at 1.0x where it runs at 1.47x (CPU, bench/results).
  static constexpr int32_t kAcceptanceEvidenceSteps = 32;
  static constexpr double kMinRowCost = 0.02;
  static constexpr int32_t kThroughputEvidenceTokens = 64;

  // Auto-k: the k with the most expected tokens per second (spec/spec_step_costs.h), from the
  // request's measured acceptance per draft level and the measured cost of steps by drafts
  // verified. The first steps, and every kExploreEvery-th, draft k_max: they measure the deep
  // levels that shorter chains never reach.
  int32_t choose_k(const Active& a) const {
    const int32_t k_max = a.request.num_speculative_tokens.value_or(config_.num_speculative_tokens);
    if (!config_.auto_k || a.request.num_speculative_tokens || a.acceptance.steps() < kFirstStepsAtKMax ||
        a.acceptance.steps() % kExploreEvery == 0)
      return k_max;
    const bool tree = tree_nodes(a, k_max) > k_max;
    return (tree ? tree_costs_ : spec_costs_).best_k(a.acceptance, k_max, [&](int32_t k) { return std::max(k, tree_nodes(a, k)); });
  }
  static constexpr int32_t kFirstStepsAtKMax = 2, kExploreEvery = 8;

  // Step-cost model from measured forwards: per-request time of plain decode steps, and of
  // steps that verify drafts with the drafts they verified (per verified row beyond the first).
  void record_step_cost(double seconds, size_t num_requests, int32_t num_drafts) {
    const double n = static_cast<double>(std::max<size_t>(1, num_requests)), per_request = seconds / n;
    if (num_drafts == 0) {
      tree_costs_.record_plain(per_request);
      return spec_costs_.record_plain(per_request);
    }
    ema_update(spec_step_cost_, per_request, 0.1);
    const double drafts = num_drafts / n;
    ema_update(spec_step_drafts_, drafts, 0.1);
  }
  double marginal_row_cost() const {
    const double plain = spec_costs_.plain();
    if (plain <= 0 || spec_step_cost_ <= 0) return 0.1;  // until measured
    return std::max(0.0, spec_step_cost_ / plain - 1.0) / std::max(1.0, spec_step_drafts_);
  }

  // Verifies the drafted chunk, commits accepted tokens + the bonus token, rolls back the
  // rest (KV truncated; nothing copied). Returns the number of tokens emitted.
  uint64_t verify_drafts(const ScheduledChunk& c, Active& a, const model::StepOutput& out, size_t logit_row,
                         const float* hidden) {
    const int32_t committed = c.begin + 1;  // the last sampled token is committed; drafts follow
    // The drafts are the tail of a.tokens; read before the tail is cut below.
    const auto drafts = std::span<const int32_t>(a.tokens).subspan(static_cast<size_t>(committed));
    const size_t num_drafted = drafts.size();
    const auto prompt = std::span<const int32_t>(a.tokens.data(), a.num_prompt);
    const auto generated = std::span<const int32_t>(a.tokens.data() + a.num_prompt, committed - a.num_prompt);
    const bool tree = !a.tree_parents.empty();
    const auto result =
        tree ? verify_tree(a, drafts, out, logit_row, prompt, generated)
        : out.argmax.empty()
            ? spec::verify_chain(
                  drafts, [&](size_t i) { return out.logits_row(logit_row + i); }, *a.sampler, prompt, generated)
            : spec::verify_chain_greedy(drafts, std::span<const int32_t>(out.argmax).subspan(logit_row, num_drafted + 1));
    // Tree: the accepted branch's K/V move to consecutive positions after the root (one op).
    tree_moves_.clear();
    for (size_t d = 0; d < result.nodes.size(); ++d)
      tree_moves_.emplace_back(c.begin + result.nodes[d], c.begin + static_cast<int32_t>(d) + 1);
    kv_.copy_positions(a.seq, tree_moves_);
    a.tree_parents.clear();
    a.acceptance.record(std::min<int32_t>(a.draft_depth, static_cast<int32_t>(num_drafted)), result.num_accepted);
    int32_t num_computed = committed + result.num_accepted;
    if (hidden) {  // rows of the last committed token and of the accepted drafts are real
      const int32_t valid = 1 + result.num_accepted;
      const size_t h = static_cast<size_t>(out.hidden_size);
      if (tree) {  // the accepted nodes' rows, gathered in depth order after the root's
        std::vector<float> branch(hidden, hidden + h);
        for (int32_t node : result.nodes) branch.insert(branch.end(), hidden + node * h, hidden + (node + 1) * h);
        config_.drafter->observe_hidden(c.id, c.begin, branch, valid);
      } else {
        config_.drafter->observe_hidden(c.id, c.begin, {hidden, valid * h}, valid);
      }
    }
    a.tokens.resize(static_cast<size_t>(committed));
    a.num_drafts = 0;
    scheduler_.rollback(c.id, committed, std::min(num_computed, committed));
    kv_.truncate(a.seq, num_computed);
    // A recurrent state that cannot resume exactly here (not expected: the ring holds k + 1
    // rows) is recomputed from the last snapshot rather than continued wrongly.
    if (const int32_t resume = kv_.resume_position(a.seq, num_computed); resume < num_computed) {
      scheduler_.rollback(c.id, committed, std::min(resume, committed));
      kv_.truncate(a.seq, resume);
      num_computed = resume;
    }
    // KV is valid for the accepted drafts: the scheduler counts them as computed once appended.
    uint64_t emitted = 0;
    for (size_t i = 0; i < result.tokens.size() && a.pending.finish == FinishReason::None; ++i) {
      if (a.request.logprobs >= 0)
        a.pending.logprobs.push_back(logprob_of(out.logits_row(logit_row + i), result.tokens[i], a.request.logprobs));
      emit(c.id, a, result.tokens[i]);
      if (static_cast<int32_t>(a.tokens.size()) - 1 < num_computed) scheduler_.on_computed(c.id, 1);  // an accepted draft
      ++emitted;
    }
    if (config_.prefix_cache) kv_.register_blocks(a.seq, a.tokens, std::min<int32_t>(num_computed, a.tokens.size()));
    a.spec.num_drafted += static_cast<int32_t>(num_drafted);
    a.spec.num_accepted += result.num_accepted;
    ++a.spec.num_steps;
    a.pending.spec = a.spec;
    // Runtime gate (sticky): after enough evidence, stop when the accepted tokens per step no
    // longer pay for the measured extra cost of verifying them.
    if (a.step_timed) a.spec_tokens += static_cast<int32_t>(emitted);
    if (a.shape_measured && a.step_seconds > 0) a.step_tokens = 1 + result.num_accepted;  // recorded with the step's rest
    // Throughput gate (sticky): speculation stays only while it emits more tokens per second
    // than plain decoding of the same request, both measured.
    if (config_.gates && a.spec.num_steps % 4 == 0 && a.plain_tokens < 4) a.probe_plain = 4;
    if (config_.gates && a.spec_tokens >= kThroughputEvidenceTokens && a.plain_tokens >= 4 && a.spec_seconds > 0 &&
        a.plain_seconds > 0 && a.spec_tokens / a.spec_seconds < a.plain_tokens / a.plain_seconds)
      switch_off_speculation(a, "throughput_gate");
    if (config_.gates && !a.spec_off && a.spec.num_steps >= kAcceptanceEvidenceSteps) {
      const double accepted_per_step = static_cast<double>(a.spec.num_accepted) / a.spec.num_steps;
      // A verified row is never free (at least its share of the step and the bookkeeping): with
      // the floor, drafts that are never accepted are stopped even where a timing sample made
      // rows look free. Nor is it charged more than a plain step (an accepted draft saves one):
      // with the ceiling, drafts that are always accepted are never stopped here, even where a
      // sample on a busy host made rows look dearer than steps; whether speculation still pays
      // then is the throughput gate's measurement.
      const double row_cost = std::clamp(marginal_row_cost(), kMinRowCost, 1.0);
      const double extra_cost = row_cost * static_cast<double>(a.spec.num_drafted) / a.spec.num_steps;
      if (accepted_per_step < extra_cost) switch_off_speculation(a, "acceptance_gate");
    }
    std::lock_guard lock(stats_mutex_);
    stats_.spec_drafted_tokens += num_drafted;
    stats_.spec_accepted_tokens += static_cast<uint64_t>(result.num_accepted);
    ++stats_.spec_steps;
    stats_.spec_tree_steps += tree;
    return emitted;
  }

  // Greedy verification of a's draft tree (rows logit_row.. hold the root and every node).
  spec::VerifyResult verify_tree(Active& a, std::span<const int32_t> drafts, const model::StepOutput& out,
                                 size_t logit_row, std::span<const int32_t> prompt, std::span<const int32_t> generated) {
    spec::DraftTree tree{{drafts.begin(), drafts.end()}, a.tree_parents};
    if (!out.argmax.empty())
      return spec::verify_tree_greedy(tree, [&](int32_t node) { return out.argmax[logit_row + static_cast<size_t>(node)]; });
    // Logits processors (penalties, logit bias) see the branch so far as generated history; the
    // walk descends one accepted node at a time, so that branch is the nodes it was called with.
    std::vector<int32_t> history(generated.begin(), generated.end());
    std::vector<float> logits;
    return spec::verify_tree_greedy(tree, [&](int32_t node) {
      if (node > 0) history.push_back(tree.tokens[static_cast<size_t>(node) - 1]);
      const auto raw = out.logits_row(logit_row + static_cast<size_t>(node));
      logits.assign(raw.begin(), raw.end());
      sampling::apply_processors(a.request.sampling, {prompt, history}, logits);
      return sampling::argmax(logits);
    });
  }

  void switch_off_speculation(Active& a, const char* why) {
    a.spec_off = true;
    a.spec.stopped_by = why;
    a.pending.spec = a.spec;
    std::lock_guard lock(stats_mutex_);
    ++stats_.spec_gated_requests;
    for (size_t g = 0; g < kSpecGates.size(); ++g)
      if (std::string_view(why) == kSpecGates[g]) ++stats_.spec_gated_by[g];
  }

  void trim_drafts(RequestId id, int32_t n) {
    Active& a = active_.at(id);
    a.tokens.resize(a.tokens.size() - static_cast<size_t>(n));
    a.num_drafts -= n;
    // Parents precede children, so the remaining nodes still form a tree.
    a.tree_parents.resize(a.tree_parents.empty() ? 0 : static_cast<size_t>(a.num_drafts));
    scheduler_.rollback(id, static_cast<int32_t>(a.tokens.size()),
                        std::min(scheduler_.num_computed(id), static_cast<int32_t>(a.tokens.size())));
  }
  void drop_drafts(RequestId id) {
    auto it = active_.find(id);
    if (it != active_.end() && it->second.num_drafts > 0) trim_drafts(id, it->second.num_drafts);
  }

  TokenLogprob logprob_of(std::span<const float> logits, int32_t token, int32_t top) {
    const auto lp = sampling::log_softmax(logits);
    TokenLogprob t{token, lp[token], {}};
    if (top > 0) {
      std::vector<int32_t> idx(lp.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
      const size_t k = std::min<size_t>(static_cast<size_t>(top), idx.size());
      std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                        [&](int32_t x, int32_t y) { return lp[x] > lp[y] || (lp[x] == lp[y] && x < y); });
      for (size_t i = 0; i < k; ++i) t.top.emplace_back(idx[i], lp[idx[i]]);
    }
    return t;
  }

  void on_token_timing(Active& a) {
    const auto now = Clock::now();
    std::lock_guard lock(stats_mutex_);
    if (!a.first_token_sent) stats_.ttft.observe(seconds_between(a.submitted, now));
    else stats_.inter_token.observe(seconds_between(a.last_token, now));
    a.first_token_sent = true;
    a.last_token = now;
  }

  // Sends what the request accumulated this step; retires it when finished.
  void deliver(RequestId id) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    Active& a = it->second;
    if (a.pending.tokens.empty() && a.pending.finish == FinishReason::None && a.prompt_logprobs.empty()) return;
    RequestOutput out = std::move(a.pending);
    a.pending = RequestOutput{};
    out.num_prompt_tokens = a.num_prompt;
    out.num_cached_prompt_tokens = std::max(0, a.num_cached_prompt);
    out.num_generated_tokens = static_cast<int32_t>(a.tokens.size()) - a.num_prompt - a.num_drafts;
    out.spec = a.spec;
    if (a.request.prompt_logprobs && static_cast<int32_t>(a.prompt_logprobs.size()) >= a.num_prompt - 1) {
      out.prompt_logprobs = std::move(a.prompt_logprobs);  // complete: sent once, with this delivery
      a.prompt_logprobs.clear();
      a.request.prompt_logprobs = false;
    }
    const bool done = out.finish != FinishReason::None;
    if (auto stream = a.stream.lock()) stream->push(std::move(out));
    if (done) retire(id, false);
  }

  void finish(RequestId id, FinishReason reason, const std::string& error) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    it->second.pending.finish = reason;
    it->second.pending.error = error;
    deliver(id);
  }

  void retire(RequestId id, bool cancelled) {
    if (config_.drafter) {
      const Active& a = active_.at(id);
      if (!config_.model_free_drafter) payoff_.record_request(a.spec_tokens, a.spec_seconds, a.plain_tokens, a.plain_seconds);
      config_.drafter->on_finish(id, std::span<const int32_t>(a.tokens.data(), a.tokens.size() - a.num_drafts),
                                 a.num_prompt);
    }
    scheduler_.remove(id);
    active_.erase(id);
    std::lock_guard lock(stats_mutex_);
    ++(cancelled ? stats_.requests_cancelled : stats_.requests_finished);
    refresh_gauges();
  }

  void fail_head_of_line() {
    // Only reachable when a single request needs more KV than the pool holds.
    for (auto& [id, a] : active_) {
      if (a.seq < 0 && scheduler_.num_running() == 0) {
        finish(id, FinishReason::Error, "the request needs more KV cache than the server has");
        return;
      }
    }
  }

  void refresh_gauges() {  // with stats_mutex_ held
    stats_.queue_depth = scheduler_.num_waiting();
    stats_.running = scheduler_.num_running();
    stats_.kv_blocks_free = kv_.pool().num_free();
    stats_.kv_blocks_cached = kv_.pool().num_cached();
    stats_.preemptions = scheduler_.num_preemptions();
  }

  // Moves submissions and cancellations in; waits when idle. Returns false to stop.
  bool drain_inbox() {
    std::vector<Incoming> incoming;
    std::vector<RequestId> cancelled;
    {
      std::unique_lock lock(inbox_mutex_);
      const bool idle = scheduler_.num_running() == 0 && scheduler_.num_waiting() == 0;
      if (idle) inbox_ready_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancelled_.empty(); });
      if (stopping_) return false;
      incoming.swap(inbox_);
      cancelled.swap(cancelled_);
    }
    for (auto& in : incoming) {
      Active a;
      a.tokens = in.request.prompt;
      a.num_prompt = static_cast<int32_t>(in.request.prompt.size());
      a.sampler = std::make_unique<sampling::Sampler>(in.request.sampling);
      if (in.request.grammar)
        a.constraint = std::make_unique<sampling::TokenConstraint>(in.request.grammar, config_.vocabulary,
                                                                   in.request.stop_token_ids);
      a.stream = std::move(in.stream);
      a.submitted = in.submitted;
      a.request = std::move(in.request);
      if (config_.drafter) {
        a.spec.method = config_.drafter->name();
        if (!a.request.speculate.value_or(true)) a.spec_off = true;
        // Prompt-time gate: a model-free drafter only helps on text that repeats itself.
        else if (config_.gates && config_.model_free_drafter && a.tokens.size() >= 64 &&
                 spec::trigram_repetition(a.tokens) < config_.min_prompt_repetition)
          switch_off_speculation(a, "prompt_gate");
      }
      active_.emplace(in.id, std::move(a));
      scheduler_.add(in.id, active_.at(in.id).num_prompt);
      std::lock_guard lock(stats_mutex_);
      ++stats_.requests_started;
      stats_.prompt_tokens += static_cast<uint64_t>(active_.at(in.id).num_prompt);
    }
    for (RequestId id : cancelled) {
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      if (auto stream = it->second.stream.lock()) {
        RequestOutput out;
        out.finish = FinishReason::Abort;
        stream->push(std::move(out));
      }
      retire(id, true);
    }
    std::lock_guard lock(stats_mutex_);
    refresh_gauges();
    return true;
  }

  Engine& engine_;
  model::Model& model_;
  EngineConfig config_;
  kv::KvCache kv_;
  Scheduler scheduler_;
  std::unordered_map<RequestId, Active> active_;
  double spec_step_cost_ = 0;                        // EMA seconds per request of a verifying forward
  // Auto-k: plain and speculative steps by drafts verified, chains and trees apart (a tree of n
  // nodes is an op-by-op step of n rows, a chain step of n drafts a graph replay: mixing them in
  // one line made the chains' k look expensive where both ran).
  SpecStepCosts spec_costs_, tree_costs_;
  TreeOrChain tree_or_chain_;                        // auto trees: which shape emits faster
  DrafterPayoff payoff_;                             // whether a model drafter starts on a request
  uint64_t shape_decisions_ = 0;
  std::vector<double*> gate_buckets_;  // per chunk of the step: the throughput-gate clock it counts on
  std::vector<std::pair<int32_t, int32_t>> tree_moves_;  // scratch: a verified branch's KV moves
  double spec_step_drafts_ = 0;                      // EMA drafts per request of a verifying step
  std::vector<int32_t> tree_rows_parents_;  // scratch: a tree's parents with the root's
  std::optional<IssuedStep> ahead_;          // issued, its tokens not read yet (issue_ahead)
  const bool overlap_ = config_.overlap_steps == EngineConfig::Overlap::On ||
                        (config_.overlap_steps == EngineConfig::Overlap::Auto && model_.backend().runs_asynchronously());
  model::Batch ahead_batch_;

  std::mutex inbox_mutex_;
  std::condition_variable inbox_ready_;
  std::vector<Incoming> inbox_;
  std::vector<RequestId> cancelled_;
  bool stopping_ = false;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  std::thread thread_;
};

// ---- Engine ------------------------------------------------------------------------------

namespace {
std::atomic<RequestId> next_request_id{1};
}

Engine::Engine(model::Model& model, const EngineConfig& config) : model_(model), config_(config) {
  const auto& c = model.config();
  max_context_ = config.max_context > 0 ? config.max_context : static_cast<int32_t>(c.max_position_embeddings);
  int32_t num_blocks = config.num_blocks;
  if (num_blocks <= 0) {
    const size_t per_block = model.kv_layout(1, config.block_size).bytes_per_block();
    num_blocks = static_cast<int32_t>(std::max<size_t>(1, config.kv_memory_bytes / per_block));
  }
  if (static_cast<int64_t>(num_blocks) * config.block_size < max_context_)
    log::warn("KV cache holds {} tokens, less than the context of {}: long requests will be refused",
              static_cast<int64_t>(num_blocks) * config.block_size, max_context_);
  config_.num_blocks = num_blocks;
  loop_ = std::make_unique<EngineLoop>(*this, model, config_, num_blocks);
}

Engine::~Engine() = default;

std::shared_ptr<RequestStream> Engine::submit(GenerationRequest request) {
  const int64_t vocab = model_.config().vocab_size;
  if (request.prompt.empty()) throw Error("the prompt is empty");
  for (int32_t t : request.prompt)
    if (t < 0 || t >= vocab) throw Error("prompt token id {} is outside the vocabulary [0, {})", t, vocab);
  if (request.max_tokens < 1) throw Error("max_tokens must be at least 1, got {}", request.max_tokens);
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (static_cast<int64_t>(request.prompt.size()) >= max_context_)
    throw Error("the prompt has {} tokens; the context is {} tokens", request.prompt.size(), max_context_);
  if (total > max_context_)
    throw Error("prompt ({} tokens) + max_tokens ({}) exceed the context of {} tokens", request.prompt.size(),
                request.max_tokens, max_context_);
  const int64_t kv_capacity = static_cast<int64_t>(config_.num_blocks) * config_.block_size;
  if (total > kv_capacity)
    throw Error("prompt + max_tokens ({} tokens) exceed the KV cache of {} tokens", total, kv_capacity);
  request.sampling.validate(vocab);
  if (request.grammar) {
    if (!config_.vocabulary) throw Error("this engine has no token vocabulary, so it cannot constrain decoding");
    sampling::GrammarMatcher check(*request.grammar);  // throws on a malformed grammar
  }
  const RequestId id = next_request_id.fetch_add(1);
  auto stream = std::shared_ptr<RequestStream>(new RequestStream(this, id));
  loop_->submit(id, std::move(request), stream);
  return stream;
}

void Engine::cancel(RequestId id) { loop_->cancel(id); }
EngineStats Engine::stats() const { return loop_->stats(); }

}  // namespace tachyon::engine
