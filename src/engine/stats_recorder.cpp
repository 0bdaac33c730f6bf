#include "engine/stats_recorder.h"

#include <string_view>

#include "engine/loop_state.h"

namespace tachyon::engine {

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts[i];
  sum += seconds;
  ++count;
}

EngineStats StatsRecorder::snapshot() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void StatsRecorder::set_gauges(const Gauges& g) {
  stats_.queue_depth = g.queue_depth;
  stats_.running = g.running;
  stats_.kv_blocks_free = g.kv_blocks_free;
  stats_.kv_blocks_cached = g.kv_blocks_cached;
  stats_.kv_sliding_blocks_used = g.kv_sliding_blocks_in_use;
  stats_.kv_sliding_blocks_peak = std::max(stats_.kv_sliding_blocks_peak, g.kv_sliding_blocks_in_use);
  stats_.preemptions = g.preemptions;
}

void StatsRecorder::record_admitted(int32_t num_prompt_tokens) {
  std::lock_guard lock(mutex_);
  ++stats_.requests_started;
  stats_.prompt_tokens += static_cast<uint64_t>(num_prompt_tokens);
}

void StatsRecorder::record_retired(bool cancelled, const Gauges& gauges) {
  std::lock_guard lock(mutex_);
  ++(cancelled ? stats_.requests_cancelled : stats_.requests_finished);
  set_gauges(gauges);
}

void StatsRecorder::refresh_gauges(const Gauges& gauges) {
  std::lock_guard lock(mutex_);
  set_gauges(gauges);
}

void StatsRecorder::record_pflash(PflashOutcome outcome, int32_t dropped_tokens, double scoring_seconds) {
  std::lock_guard lock(mutex_);
  switch (outcome) {
    case PflashOutcome::Compressed: ++stats_.pflash_compressed; break;
    case PflashOutcome::BypassedIntact: ++stats_.pflash_bypassed_intact; break;
    case PflashOutcome::BypassedShort: ++stats_.pflash_bypassed_short; break;
    case PflashOutcome::Refused: ++stats_.pflash_refused; break;
  }
  stats_.pflash_dropped_tokens += static_cast<uint64_t>(dropped_tokens);
  stats_.pflash_scoring_seconds += scoring_seconds;
}

void StatsRecorder::record_resume(int32_t recomputed) {
  std::lock_guard lock(mutex_);
  ++stats_.preempted_resumes;
  if (recomputed > 0) {
    ++stats_.preempted_recompute_fallbacks;
    stats_.preempted_recomputed_tokens += static_cast<uint64_t>(recomputed);
  }
}

void StatsRecorder::record_cached_prompt(int32_t num_tokens) {
  std::lock_guard lock(mutex_);
  stats_.prefix_cache_hit_tokens += static_cast<uint64_t>(num_tokens);
}

void StatsRecorder::record_token(ActiveRequest& a) {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  if (!a.first_token_sent) stats_.ttft.observe(seconds_between(a.submitted, now));
  else stats_.inter_token.observe(seconds_between(a.last_token, now));
  a.first_token_sent = true;
  a.last_token = now;
}

void StatsRecorder::record_gate(const char* gate) {
  std::lock_guard lock(mutex_);
  ++stats_.spec_gated_requests;
  for (size_t g = 0; g < kSpecGates.size(); ++g)
    if (std::string_view(gate) == kSpecGates[g]) ++stats_.spec_gated_by[g];
}

void StatsRecorder::record_drafter_figures(std::vector<DrafterKindFigures> figures) {
  std::lock_guard lock(mutex_);
  stats_.drafter_figures = std::move(figures);
}

void StatsRecorder::record_verification(int32_t num_drafted, int32_t num_accepted, bool tree) {
  std::lock_guard lock(mutex_);
  stats_.spec_drafted_tokens += static_cast<uint64_t>(num_drafted);
  stats_.spec_accepted_tokens += static_cast<uint64_t>(num_accepted);
  ++stats_.spec_steps;
  stats_.spec_tree_steps += tree;
}

void StatsRecorder::record_grammar_pruned_drafts(size_t num_drafts) {
  if (num_drafts == 0) return;
  std::lock_guard lock(mutex_);
  stats_.spec_grammar_pruned_drafts += num_drafts;
}

void StatsRecorder::record_overlapped_step() {
  std::lock_guard lock(mutex_);
  ++stats_.overlapped_steps;
}

void StatsRecorder::record_step(const StepTotals& step) {
  std::lock_guard lock(mutex_);
  if (step.timed_decode) {
    if (step.speculative) {
      stats_.spec_step_seconds += step.wall_seconds;
      stats_.spec_draft_seconds += step.drafting_seconds;
      ++stats_.spec_decode_steps;
    } else {
      stats_.plain_step_seconds += step.wall_seconds;
      ++stats_.plain_decode_steps;
    }
  }
  stats_.computed_prompt_tokens += step.computed_prompt_tokens;
  stats_.generated_tokens += step.generated_tokens;
  ++stats_.steps;
}

void StatsRecorder::record_failed_step() {
  std::lock_guard lock(mutex_);
  ++stats_.failed_steps;
}

void StatsRecorder::record_failed_request() {
  std::lock_guard lock(mutex_);
  ++stats_.requests_failed;
}

}  // namespace tachyon::engine
