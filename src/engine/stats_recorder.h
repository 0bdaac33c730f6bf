// The engine's counters (EngineStats), updated on the engine thread and read from any thread
// (Engine::stats). Every update takes the lock once; the step's totals arrive in one call.
#pragma once

#include <cstdint>
#include <mutex>

#include "engine/stats.h"

namespace tachyon::engine {

struct ActiveRequest;

class StatsRecorder {
 public:
  explicit StatsRecorder(int32_t kv_blocks_total, int32_t kv_sliding_blocks_total = 0) {
    stats_.kv_blocks_total = kv_blocks_total;
    stats_.kv_sliding_blocks_total = kv_sliding_blocks_total;
  }

  EngineStats snapshot() const;

  // Gauges of the scheduler and the KV pool, refreshed after admission and retirement.
  struct Gauges {
    int32_t queue_depth = 0, running = 0, kv_blocks_free = 0, kv_blocks_cached = 0, kv_sliding_blocks_in_use = 0;
    uint64_t preemptions = 0;
  };
  void record_admitted(int32_t num_prompt_tokens);
  void record_retired(bool cancelled, const Gauges& gauges);
  void refresh_gauges(const Gauges& gauges);

  // A preempted request admitted again: `recomputed` tokens of KV it had were no longer cached.
  void record_resume(int32_t recomputed);
  void record_cached_prompt(int32_t num_tokens);  // a request's prompt tokens served by the prefix cache
  void record_token(ActiveRequest& a);            // time to first token, or between tokens
  void record_gate(const char* gate);             // a gate (kSpecGates) switched a request's speculation off
  void record_verification(int32_t num_drafted, int32_t num_accepted, bool tree);
  void record_drafter_figures(std::vector<DrafterKindFigures> figures);  // the drafter choice's, after a request
  void record_grammar_pruned_drafts(size_t num_drafts);  // cut before verification (spec/grammar_drafts.h)
  void record_overlapped_step();
  enum class PflashOutcome { Compressed, BypassedIntact, BypassedShort, Refused };
  void record_pflash(PflashOutcome outcome, int32_t dropped_tokens, double scoring_seconds);
  void record_failed_step();
  void record_failed_request();

  // One step's totals. Decode steps (no prompt rows) that did no one-time work are timed:
  // speculative ones (drafts verified) and plain ones apart.
  struct StepTotals {
    uint64_t computed_prompt_tokens = 0, generated_tokens = 0;
    bool timed_decode = false;
    bool speculative = false;
    double wall_seconds = 0, drafting_seconds = 0;
  };
  void record_step(const StepTotals& step);

 private:
  void set_gauges(const Gauges& gauges);  // with mutex_ held

  mutable std::mutex mutex_;
  EngineStats stats_;
};

}  // namespace tachyon::engine
