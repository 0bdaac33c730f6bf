#include "server/metrics.h"

#include <iterator>

#include <fmt/format.h>

namespace tachyon::server {

const char* HttpCounters::route_name(Route route) {
  static constexpr const char* kNames[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
                                           "/v1/models", "/api/chat", "/api/generate", "/api/*", "/health", "/metrics",
                                           "other"};
  static_assert(std::size(kNames) == kNumRoutes);
  return kNames[route];
}

void HttpCounters::count(Route route, int status) {
  const int cls = status / 100 - 2;
  if (cls >= 0 && cls < 4) counts_[route][static_cast<size_t>(cls)].fetch_add(1, std::memory_order_relaxed);
}

uint64_t HttpCounters::get(Route route, int status_class) const {
  return counts_[route][static_cast<size_t>(status_class - 2)].load(std::memory_order_relaxed);
}

namespace {

void counter(std::string& out, const char* name, const char* help, const std::string& labels, uint64_t value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {}\n", name, help, name, name, labels, value);
}

void counter_seconds(std::string& out, const char* name, const char* help, const std::string& labels, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{}{{{}}} {:.6f}\n", name, help, name, name, labels, value);
}

void gauge(std::string& out, const char* name, const char* help, const std::string& labels, int64_t value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{}{{{}}} {}\n", name, help, name, name, labels, value);
}

void histogram(std::string& out, const char* name, const char* help, const std::string& labels,
               const engine::Histogram& h) {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  for (size_t i = 0; i < engine::Histogram::kBounds.size(); ++i)
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, engine::Histogram::kBounds[i], h.counts[i]);
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, h.counts.back());
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, h.sum, name, labels, h.count);
}

}  // namespace

std::string render_metrics(const std::string& model, const engine::EngineStats& s, const HttpCounters& http,
                           int32_t in_flight, const ResponseCacheStats* response_cache) {
  const std::string m = fmt::format("model=\"{}\"", model);
  std::string out;
  counter(out, "tachyon_requests_started_total", "Requests admitted by the engine.", m, s.requests_started);
  counter(out, "tachyon_requests_finished_total", "Requests that ran to completion.", m, s.requests_finished);
  counter(out, "tachyon_requests_cancelled_total", "Requests cancelled (client gone or stop string).", m,
          s.requests_cancelled);
  counter(out, "tachyon_requests_failed_total",
          "Requests ended by an error in their forward (also counted as finished).", m, s.requests_failed);
  counter(out, "tachyon_failed_steps_total", "Forwards that failed (device error, allocation failure).", m,
          s.failed_steps);
  counter(out, "tachyon_prompt_tokens_total", "Prompt tokens of admitted requests.", m, s.prompt_tokens);
  counter(out, "tachyon_generation_tokens_total", "Generated tokens.", m, s.generated_tokens);
  counter(out, "tachyon_prefix_cache_hit_tokens_total", "Prompt tokens whose KV came from the prefix cache.", m,
          s.prefix_cache_hit_tokens);
  counter(out, "tachyon_computed_prompt_tokens_total", "Prompt tokens run through the model.", m,
          s.computed_prompt_tokens);
  counter(out, "tachyon_preemptions_total", "Requests preempted for KV space.", m, s.preemptions);
  counter(out, "tachyon_spec_drafted_tokens_total", "Draft tokens verified by speculative decoding.", m,
          s.spec_drafted_tokens);
  counter(out, "tachyon_spec_accepted_tokens_total", "Draft tokens accepted.", m, s.spec_accepted_tokens);
  counter(out, "tachyon_spec_verify_steps_total", "Speculative verification steps.", m, s.spec_steps);
  out += "# HELP tachyon_spec_gated_requests_total Requests whose speculation a gate switched off, by gate.\n"
         "# TYPE tachyon_spec_gated_requests_total counter\n";
  for (size_t g = 0; g < engine::kSpecGates.size(); ++g)
    out += fmt::format("tachyon_spec_gated_requests_total{{{},gate=\"{}\"}} {}\n", m, engine::kSpecGates[g],
                       s.spec_gated_by[g]);
  counter(out, "tachyon_spec_tree_steps_total", "Verification steps whose drafts formed a tree.", m,
          s.spec_tree_steps);
  // The drafter choice's live figures (several drafters held): per drafter and kind of request.
  if (!s.drafter_figures.empty()) {
    struct Series {
      const char* name;
      const char* help;
      double (*value)(const engine::DrafterFigures&);
    };
    static constexpr Series kSeries[] = {
        {"tachyon_spec_drafter_chosen_requests", "Requests the drafter was chosen for, by kind of request.",
         [](const engine::DrafterFigures& f) { return static_cast<double>(f.chosen); }},
        {"tachyon_spec_drafter_accepted_per_step", "Accepted drafts per verification step (EMA over requests).",
         [](const engine::DrafterFigures& f) { return f.accepted_per_step; }},
        {"tachyon_spec_drafter_step_seconds", "Seconds per speculative step of one request (EMA over requests).",
         [](const engine::DrafterFigures& f) { return f.seconds_per_step; }},
        {"tachyon_spec_drafter_tokens_per_second", "Tokens per second on speculative steps (EMA over requests).",
         [](const engine::DrafterFigures& f) { return f.tokens_per_second; }},
        {"tachyon_spec_drafter_speedup",
         "Speculative over plain speed of the same requests (geometric mean over ~32 requests; 0: not measured).",
         [](const engine::DrafterFigures& f) { return f.speedup; }},
    };
    for (const Series& series : kSeries) {
      out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", series.name, series.help, series.name);
      for (const engine::DrafterKindFigures& f : s.drafter_figures)
        out += fmt::format("{}{{{},drafter=\"{}\",kind=\"{}\"}} {}\n", series.name, m, f.drafter, f.kind,
                           series.value(f.figures));
    }
  }
  counter(out, "tachyon_spec_grammar_pruned_drafts_total",
          "Draft tokens of constrained requests cut before verification because their grammar forbids them.", m,
          s.spec_grammar_pruned_drafts);
  counter(out, "tachyon_pflash_compressed_total", "Prompts PFlash compressed.", m, s.pflash_compressed);
  out += "# HELP tachyon_pflash_bypassed_total Prompts PFlash was asked to compress but left whole, by reason.\n"
         "# TYPE tachyon_pflash_bypassed_total counter\n";
  for (const auto& [reason, n] : {std::pair{"intact", s.pflash_bypassed_intact}, std::pair{"short", s.pflash_bypassed_short},
                                  std::pair{"refused", s.pflash_refused}})
    out += fmt::format("tachyon_pflash_bypassed_total{{{},reason=\"{}\"}} {}\n", m, reason, n);
  counter(out, "tachyon_pflash_dropped_tokens_total", "Prompt tokens PFlash dropped (they got no KV).", m,
          s.pflash_dropped_tokens);
  out += fmt::format("# HELP tachyon_pflash_scoring_seconds_total Time PFlash spent scoring prompts.\n"
                     "# TYPE tachyon_pflash_scoring_seconds_total counter\ntachyon_pflash_scoring_seconds_total{{{}}} {}\n",
                     m, s.pflash_scoring_seconds);
  counter(out, "tachyon_engine_steps_total", "Engine steps (forward passes).", m, s.steps);
  counter(out, "tachyon_decode_steps_total", "Decode steps without drafts (no prompt rows).", m, s.plain_decode_steps);
  counter(out, "tachyon_overlapped_steps_total",
          "Decode steps issued before the tokens of the step before them were read (--step-overlap).", m,
          s.overlapped_steps);
  counter_seconds(out, "tachyon_decode_step_seconds_total", "Wall time of decode steps without drafts.", m,
                  s.plain_step_seconds);
  counter(out, "tachyon_spec_decode_steps_total", "Decode steps that verified drafts (no prompt rows).", m,
          s.spec_decode_steps);
  counter_seconds(out, "tachyon_spec_step_seconds_total",
                  "Wall time of decode steps that verified drafts, drafting included.", m, s.spec_step_seconds);
  counter_seconds(out, "tachyon_spec_draft_seconds_total", "Drafting time of decode steps that verified drafts.", m,
                  s.spec_draft_seconds);
  gauge(out, "tachyon_queue_depth", "Requests waiting for admission.", m, s.queue_depth);
  gauge(out, "tachyon_requests_running", "Requests in the running batch.", m, s.running);
  gauge(out, "tachyon_http_requests_in_flight", "Generation requests being served over HTTP.", m, in_flight);
  gauge(out, "tachyon_kv_blocks_total", "KV cache blocks.", m, s.kv_blocks_total);
  gauge(out, "tachyon_kv_blocks_free", "Free KV cache blocks.", m, s.kv_blocks_free);
  gauge(out, "tachyon_kv_blocks_used", "KV cache blocks in use.", m, s.kv_blocks_total - s.kv_blocks_free);
  gauge(out, "tachyon_kv_blocks_cached", "Free KV blocks still holding reusable prefix-cache content.", m,
        s.kv_blocks_cached);
  if (s.kv_sliding_blocks_total > 0) {  // sliding-window layers in a block pool of their own
    gauge(out, "tachyon_kv_sliding_blocks_total", "KV blocks of the sliding-window layers.", m,
          s.kv_sliding_blocks_total);
    gauge(out, "tachyon_kv_sliding_blocks_used", "Sliding-window KV blocks in use (released once out of every window).",
          m, s.kv_sliding_blocks_used);
    gauge(out, "tachyon_kv_sliding_blocks_peak", "The most sliding-window KV blocks in use at once.", m,
          s.kv_sliding_blocks_peak);
  }
  if (s.disk_prefix_enabled) {
    counter(out, "tachyon_prefix_cache_disk_hit_blocks_total", "KV blocks read back from the prefix cache's disk tier.",
            m, s.disk_prefix_hit_blocks);
    counter(out, "tachyon_prefix_cache_disk_miss_blocks_total", "Disk-tier lookups of blocks it did not have.", m,
            s.disk_prefix_miss_blocks);
    counter(out, "tachyon_prefix_cache_disk_writes_total", "KV blocks written to the disk tier.", m,
            s.disk_prefix_writes);
    counter(out, "tachyon_prefix_cache_disk_written_bytes_total", "Bytes written to the disk tier.", m,
            s.disk_prefix_bytes_written);
    counter(out, "tachyon_prefix_cache_disk_evictions_total", "Disk-tier files removed to stay within its bytes.", m,
            s.disk_prefix_evictions);
    counter(out, "tachyon_prefix_cache_disk_rejected_total",
            "Disk-tier files removed as corrupt, truncated or of another model.", m, s.disk_prefix_rejected);
    counter(out, "tachyon_prefix_cache_disk_dropped_total", "Evicted blocks not written (the write queue was full).",
            m, s.disk_prefix_dropped);
    gauge(out, "tachyon_prefix_cache_disk_bytes", "Bytes of the disk tier's files.", m, s.disk_prefix_bytes);
    gauge(out, "tachyon_prefix_cache_disk_blocks", "KV blocks in the disk tier.", m, s.disk_prefix_files);
  }
  counter(out, "tachyon_preempted_resumes_total", "Preempted requests admitted again.", m, s.preempted_resumes);
  counter(out, "tachyon_preempted_recompute_fallbacks_total",
          "Preempted requests that recomputed KV they had: neither the pool nor the swap space still held it.", m,
          s.preempted_recompute_fallbacks);
  counter(out, "tachyon_preempted_recomputed_tokens_total",
          "Tokens of KV preempted requests had and recomputed (their last partial block not counted).", m,
          s.preempted_recomputed_tokens);
  if (s.host_swap_enabled) {
    counter(out, "tachyon_kv_swap_out_blocks_total", "KV blocks copied to the host swap space as the pool evicted them.",
            m, s.swap_out_blocks);
    counter(out, "tachyon_kv_swap_out_bytes_total", "Bytes copied to the host swap space.", m, s.swap_out_bytes);
    counter(out, "tachyon_kv_swap_in_blocks_total", "KV blocks copied back from the host swap space.", m,
            s.swap_in_blocks);
    counter(out, "tachyon_kv_swap_in_bytes_total", "Bytes copied back from the host swap space.", m, s.swap_in_bytes);
    counter(out, "tachyon_kv_swap_evictions_total", "Blocks the full swap space dropped for newer ones.", m,
            s.swap_evictions);
    gauge(out, "tachyon_kv_swap_space_bytes", "Bytes of the host swap space.", m, s.swap_space_bytes);
    gauge(out, "tachyon_kv_swap_blocks", "KV blocks the host swap space holds at most.", m, s.swap_blocks);
    gauge(out, "tachyon_kv_swap_blocks_used", "KV blocks in the host swap space.", m, s.swap_blocks_used);
  }
  if (response_cache) {
    const ResponseCacheStats& r = *response_cache;
    counter(out, "tachyon_response_cache_hits_total", "Requests answered from the response cache.", m, r.hits);
    counter(out, "tachyon_response_cache_misses_total", "Cacheable requests the response cache did not have.", m,
            r.misses);
    counter(out, "tachyon_response_cache_insertions_total", "Answers kept by the response cache.", m, r.insertions);
    counter(out, "tachyon_response_cache_evictions_total", "Answers evicted to stay within its bytes.", m,
            r.evictions);
    gauge(out, "tachyon_response_cache_bytes", "Bytes held by the response cache.", m, r.bytes);
    gauge(out, "tachyon_response_cache_entries", "Answers held by the response cache.", m, r.entries);
  }
  histogram(out, "tachyon_time_to_first_token_seconds", "Time from arrival to the first generated token.", m, s.ttft);
  histogram(out, "tachyon_inter_token_latency_seconds", "Time between consecutive generated tokens.", m,
            s.inter_token);
  out += "# HELP tachyon_http_requests_total HTTP requests by route and status class.\n"
         "# TYPE tachyon_http_requests_total counter\n";
  for (int r = 0; r < HttpCounters::kNumRoutes; ++r)
    for (int cls = 2; cls <= 5; ++cls)
      out += fmt::format("tachyon_http_requests_total{{route=\"{}\",status=\"{}xx\"}} {}\n",
                         HttpCounters::route_name(static_cast<HttpCounters::Route>(r)), cls,
                         http.get(static_cast<HttpCounters::Route>(r), cls));
  return out;
}

}  // namespace tachyon::server
