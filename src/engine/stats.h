// Counters and latency histograms the engine keeps for /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <string>

#include "spec/drafter_choice.h"
#include "spec/spec_usage.h"

namespace tachyon::engine {

// A cumulative histogram with fixed bucket bounds (seconds), Prometheus-style.
struct Histogram {
  static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  std::array<uint64_t, kBounds.size() + 1> counts{};  // last: +Inf
  double sum = 0;
  uint64_t count = 0;
  void observe(double seconds);
};

// The gates that switch a request's speculation off (SpecUsage::stopped_by).
using spec::kSpecGates;

// The drafter choice's live figures of one drafter on one kind of request (spec/drafter_choice.h).
using DrafterFigures = spec::DrafterFigures;

struct DrafterKindFigures {
  std::string drafter, kind;
  spec::DrafterFigures figures;
};

struct EngineStats {
  uint64_t requests_started = 0, requests_finished = 0, requests_cancelled = 0;
  uint64_t requests_failed = 0;  // finished with an error (a failed forward); counted in requests_finished too
  uint64_t failed_steps = 0;     // forwards that failed (device error, allocation failure)
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t prefix_cache_hit_tokens = 0;  // prompt tokens whose KV came from the cache
  uint64_t computed_prompt_tokens = 0;   // prompt tokens actually run through the model
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  uint64_t spec_drafted_tokens = 0, spec_accepted_tokens = 0, spec_steps = 0;
  uint64_t spec_gated_requests = 0;  // speculation switched off by a gate
  std::array<uint64_t, kSpecGates.size()> spec_gated_by{};  // ... by each of kSpecGates
  std::vector<DrafterKindFigures> drafter_figures;  // with several drafters: per drafter and kind chosen
  uint64_t spec_tree_steps = 0;      // verify steps whose drafts formed a tree
  uint64_t spec_grammar_pruned_drafts = 0;  // drafted tokens of constrained requests cut as their grammar forbids
  // Wall time of decode steps (no prompt rows), host work included: steps that verify drafts
  // (their drafting included, and counted apart) and plain ones. What speculation costs per step.
  double spec_step_seconds = 0, spec_draft_seconds = 0, plain_step_seconds = 0;
  uint64_t spec_decode_steps = 0, plain_decode_steps = 0;
  // PFlash: prompts compressed, and prompts it was asked to compress but left whole because
  // they needed it intact (constrained, tools, prompt logprobs), were too short for auto, or
  // left no middle in the budget; prompt tokens dropped; seconds spent scoring.
  uint64_t pflash_compressed = 0, pflash_bypassed_intact = 0, pflash_bypassed_short = 0, pflash_refused = 0;
  uint64_t pflash_dropped_tokens = 0;
  double pflash_scoring_seconds = 0;
  uint64_t overlapped_steps = 0;  // decode steps issued before the last step's tokens were read (overlap_steps)
  int32_t queue_depth = 0, running = 0;
  int32_t kv_blocks_total = 0, kv_blocks_free = 0, kv_blocks_cached = 0;
  // The sliding-window layers' own blocks (EngineConfig::release_sliding_blocks; 0 without), those
  // in use after the last scheduled step, and the most of them in use at once.
  int32_t kv_sliding_blocks_total = 0, kv_sliding_blocks_used = 0, kv_sliding_blocks_peak = 0;
  Histogram ttft, inter_token;
  // The prefix cache's disk tier (EngineConfig::prefix_cache_dir; all zero without one).
  bool disk_prefix_enabled = false;
  uint64_t disk_prefix_hit_blocks = 0, disk_prefix_miss_blocks = 0, disk_prefix_writes = 0,
           disk_prefix_bytes_written = 0, disk_prefix_evictions = 0, disk_prefix_rejected = 0,
           disk_prefix_dropped = 0;
  int64_t disk_prefix_bytes = 0, disk_prefix_files = 0;
  // The prefix cache's host tier, the KV swap space (EngineConfig::swap_space_bytes; zero without
  // one): blocks and bytes copied out at the pool's evictions and back at prefix lookups, blocks
  // it dropped for newer ones, its bound and slots in use.
  bool host_swap_enabled = false;
  uint64_t swap_out_blocks = 0, swap_out_bytes = 0, swap_in_blocks = 0, swap_in_bytes = 0, swap_evictions = 0;
  int64_t swap_space_bytes = 0, swap_blocks = 0, swap_blocks_used = 0;
  // Preempted requests admitted again; of those, the ones that had to recompute KV they had
  // (fallbacks to recompute: neither the pool nor the host tier still held it), and the tokens
  // recomputed so (a request's last partial block, never cached, is not counted).
  uint64_t preempted_resumes = 0, preempted_recompute_fallbacks = 0, preempted_recomputed_tokens = 0;
};

}  // namespace tachyon::engine
