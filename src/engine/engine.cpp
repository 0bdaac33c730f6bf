#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "base/byte_size.h"
#include "base/error.h"
#include "base/hash64.h"
#include "base/host_memory.h"
#include "base/logging.h"
#include "engine/commit.h"
#include "engine/delivery.h"
#include "engine/drafting.h"
#include "engine/inbox.h"
#include "engine/loop_state.h"
#include "engine/pflash_lexical.h"
#include "engine/stats_recorder.h"
#include "engine/step_shares.h"
#include "engine/step_runner.h"
#include "kv/disk_prefix_store.h"
#include "model/kv_format_choice.h"

namespace tachyon::engine {

kv::KvLayout with_sliding_pool(kv::KvLayout layout, const EngineConfig& config, int32_t max_context) {
  layout.num_sliding_blocks = 0;
  const int32_t window = layout.max_window();
  if (config.release_sliding_blocks && config.prefix_cache_dir.empty() && config.swap_space_bytes <= 0 &&
      layout.num_state_layers == 0 && window > 0 &&
      window < max_context)
    layout.num_sliding_blocks =
        config.num_sliding_blocks > 0
            ? config.num_sliding_blocks
            : sliding_pool_blocks(window, layout.block_size, config.max_concurrent, config.max_tokens_per_step);
  return layout;
}

namespace {

spec::SpecPolicyConfig spec_policy_config(const EngineConfig& c) {
  return {.num_speculative_tokens = c.num_speculative_tokens,
          .auto_k = c.auto_k,
          .max_tree_nodes = c.max_tree_nodes,
          .gates = c.gates,
          .model_free_drafter = c.model_free_drafter,
          .min_prompt_repetition = c.min_prompt_repetition};
}

// The deepest k of any drafter: what a recurrent state's rollback ring must undo.
int32_t max_speculative_tokens(const EngineConfig& config) {
  int32_t k = 0;
  for (const spec::DrafterLane& lane : config.drafter_lanes()) k = std::max(k, lane.num_speculative_tokens);
  return k;
}

// A hybrid model's recurrent state is sized by the engine: one working state per request
// that can run at once, and a rollback ring deep enough for every draft of a verify step
// to be rejected (k + 1 rows), so speculation never needs a recomputation.
kv::KvLayout sized_layout(model::Model& model, int32_t num_blocks, const EngineConfig& config, int32_t max_context) {
  kv::KvLayout layout = model.kv_layout(num_blocks, config.block_size);
  layout.format = model::resolve_kv_format(config.kv_format, model.config(), model.backend());
  layout = with_sliding_pool(std::move(layout), config, max_context);
  if (layout.num_state_layers > 0) {
    layout.max_sequences = std::max(1, config.max_concurrent);
    layout.state_rollback_rows = config.drafter_lanes().empty() ? 1 : std::max(1, max_speculative_tokens(config)) + 1;
  }
  return layout;
}

// Device memory once the weights are loaded and one step of the largest shape the engine runs
// (max_tokens_per_step prompt rows, every row's logits) has grown the backend's workspaces to
// their peak: what is free then is what the KV pool can have (vLLM's profiling run). nullopt
// on a backend in host memory.
std::optional<kernels::Backend::DeviceMemory> memory_after_warmup(model::Model& model, const EngineConfig& config,
                                                                  int32_t max_context) {
  kernels::Backend& backend = model.backend();
  if (!backend.device_memory()) return std::nullopt;
  const int32_t rows = std::max(1, std::min(config.max_tokens_per_step, max_context));
  {
    EngineConfig whole = config;  // the scratch keeps every layer in its few blocks: no sliding pool
    whole.release_sliding_blocks = false;
    kv::KvCache scratch(backend,
                        sized_layout(model, (rows + config.block_size - 1) / config.block_size, whole, max_context));
    const kv::SeqId seq = scratch.add_sequence();
    TACHYON_CHECK(scratch.reserve(seq, rows), "the warm-up KV cache is too small");
    model::Batch batch;
    batch.add(seq, std::vector<int32_t>(static_cast<size_t>(rows), 0), 0, model::LogitRows::All);
    model.forward(batch, scratch);
    backend.synchronize();
  }  // the scratch cache is freed before measuring
  // PFlash's scorer reads prompts on the same device at admission: its largest pass (its KV
  // cache and workspaces) is held while the free memory is measured, so the pool leaves room
  // for it rather than the scorer running out of memory on the first long prompt.
  std::shared_ptr<void> scorer_peak;
  try {
    if (config.pflash_scorer) scorer_peak = config.pflash_scorer->hold_peak_memory(max_context);
  } catch (const Error& e) {
    throw Error("the PFlash {} scorer's largest pass ({}-token prompts) does not fit beside the model: {} (a "
                "smaller --pflash-scorer-chunk or --ctx-size needs less)",
                config.pflash_scorer->name(), max_context, e.what());
  }
  return backend.device_memory();
}

// Bytes a KV cache holds whatever its number of blocks: a hybrid model's working states and
// rollback rings (the snapshot pool is in bytes_per_block), the sliding-window layers' own pool.
int64_t fixed_kv_bytes(const kv::KvLayout& layout) {
  return static_cast<int64_t>(layout.num_state_layers) * layout.state_floats * layout.max_sequences *
             (1 + layout.state_rollback_rows) * static_cast<int64_t>(sizeof(float)) +
         static_cast<int64_t>(layout.sliding_pool_bytes());
}

// The full group's pool (every block of every layer without a split).
KvPoolSize size_full_kv_pool(model::Model& model, const kv::KvLayout& one, const EngineConfig& config,
                             int32_t max_context) {
  const KvDemand demand{.bytes_per_block = static_cast<int64_t>(one.bytes_per_block()),
                        .block_size = config.block_size,
                        .max_context = max_context,
                        .max_concurrent = config.max_concurrent};
  if (config.num_blocks > 0) return kv_pool_from_blocks(config.num_blocks, demand);
  const int64_t fixed = fixed_kv_bytes(one);
  if (config.kv_memory_bytes > 0) return kv_pool_from_bytes(config.kv_memory_bytes - fixed, demand);
  if (auto memory = memory_after_warmup(model, config, max_context))
    return kv_pool_on_device(static_cast<int64_t>(memory->free_bytes) - fixed,
                             static_cast<int64_t>(memory->total_bytes), config.gpu_memory_utilization, demand);
  return kv_pool_on_host(host_available_bytes() - fixed, demand);
}

// With sliding-window layers in a pool of their own: explicit blocks are the full layers'; a
// budget (bytes, device, host share) is what the whole pool would take without the split, shared
// by split_kv_pool (the sliding pool by its rule, at most half of it).
KvPoolSize size_kv_pool(model::Model& model, const EngineConfig& config, int32_t max_context) {
  const kv::KvLayout one = sized_layout(model, 1, config, max_context);
  if (!one.splits_sliding()) return size_full_kv_pool(model, one, config, max_context);
  const std::string sliding = fmt::format("; the {} sliding-window layers release their blocks once out of the "
                                          "{}-token window",
                                          one.num_sliding_layers(), one.max_window());
  if (config.num_blocks > 0) {
    KvPoolSize size = size_full_kv_pool(model, one, config, max_context);
    size.num_sliding_blocks = one.num_sliding_blocks;
    size.bytes += static_cast<int64_t>(one.sliding_pool_bytes());
    size.why += fmt::format(" and {} blocks of their own ({}){}", one.num_sliding_blocks,
                            format_byte_size(static_cast<int64_t>(one.sliding_pool_bytes())), sliding);
    return size;
  }
  kv::KvLayout whole = one;
  whole.num_sliding_blocks = 0;
  const KvPoolSize unsplit = size_full_kv_pool(model, whole, config, max_context);
  const KvDemand full{.bytes_per_block = static_cast<int64_t>(one.bytes_per_block()),
                      .block_size = config.block_size,
                      .max_context = max_context,
                      .max_concurrent = config.max_concurrent};
  const bool host_rule = config.kv_memory_bytes == 0 && !model.backend().device_memory();  // capped at full use
  KvPoolSize size = split_kv_pool(unsplit, static_cast<int64_t>(whole.bytes_per_block()),
                                  static_cast<int64_t>(one.bytes_per_block()),
                                  static_cast<int64_t>(one.sliding_bytes_per_block()), one.num_sliding_blocks,
                                  one.sliding_blocks_per_sequence(config.max_tokens_per_step) + 1,
                                  host_rule ? full.blocks_for_full_use() : 0);
  size.why += sliding;
  return size;
}

}  // namespace

std::vector<spec::DrafterLane> EngineConfig::drafter_lanes() const {
  if (!drafters.empty()) return drafters;
  if (!drafter) return {};
  return {{drafter, model_free_drafter, num_speculative_tokens}};
}

// The engine thread: its state, and the step loop over the stages in their own files.
class EngineLoop : public KvAllocator {
 public:
  EngineLoop(Engine& engine, model::Model& model, const EngineConfig& config, int32_t num_blocks)
      : config_(config),
        model_(model),
        kv_(model.backend(), sized_layout(model, num_blocks, config, engine.max_context())),
        scheduler_({config.max_concurrent, config.max_tokens_per_step}, *this),
        policy_(config.drafter_lanes(), spec_policy_config(config), kv_.has_state()),
        stats_(num_blocks, kv_.layout().splits_sliding() ? kv_.layout().num_sliding_blocks : 0),
        state_{config_, engine.max_context(), model_, kv_, scheduler_, active_, policy_, stats_},
        runner_(state_),
        commit_(state_) {
    if (config.swap_space_bytes > 0) attach_swap_space(engine);
    if (config.prefix_cache && !config.prefix_cache_dir.empty()) attach_disk_tier();
    thread_ = std::thread([this] { run(); });
  }

  // A host slot holds a block of every layer plus a hybrid model's state snapshot, so a small
  // pool's auto-sized swap space can hold no slot: then the tier is off, not a start-up error.
  // A size the user gave still fails naming both sizes (KvCache::attach_host_tier).
  void attach_swap_space(Engine& engine) {
    const auto slot = static_cast<int64_t>(kv_.host_slot_bytes());
    if (engine.swap_space_.automatic && config_.swap_space_bytes < slot) {
      engine.swap_space_ = {0, fmt::format("off: the auto size ({}) holds no block of this model ({} a block with its "
                                           "state); --swap-space BYTES sets it",
                                           format_byte_size(config_.swap_space_bytes), format_byte_size(slot))};
      engine.config_.swap_space_bytes = 0;
      return;
    }
    kv_.attach_host_tier(config_.swap_space_bytes);
  }

  ~EngineLoop() override {
    inbox_.close();
    thread_.join();
    if (kv_.disk_tier()) {  // the next server on this model starts with this one's cache
      const int64_t n = kv_.spill_to_disk();
      log::info("disk prefix cache: wrote {} cached blocks to {}", n, kv_.disk_tier()->folder());
    }
  }

  void submit(RequestId id, GenerationRequest request, std::weak_ptr<RequestStream> stream) {
    inbox_.post_submission(id, std::move(request), std::move(stream));
  }
  void cancel(RequestId id) { inbox_.post_cancellation(id); }
  EngineStats stats() const {
    EngineStats s = stats_.snapshot();
    if (const kv::DiskPrefixStore* disk = kv_.disk_tier()) {
      const kv::DiskPrefixStats d = disk->stats();
      s.disk_prefix_enabled = true;
      s.disk_prefix_hit_blocks = d.hits;
      s.disk_prefix_miss_blocks = d.misses;
      s.disk_prefix_writes = d.writes;
      s.disk_prefix_bytes_written = d.bytes_written;
      s.disk_prefix_evictions = d.evictions;
      s.disk_prefix_rejected = d.rejected;
      s.disk_prefix_dropped = d.dropped;
      s.disk_prefix_bytes = d.bytes_on_disk;
      s.disk_prefix_files = d.files;
    }
    if (kv_.has_host_tier()) {
      const kv::HostTierStats h = kv_.host_tier_stats();
      s.host_swap_enabled = true;
      s.swap_out_blocks = h.swapped_out_blocks;
      s.swap_out_bytes = h.swapped_out_bytes;
      s.swap_in_blocks = h.swapped_in_blocks;
      s.swap_in_bytes = h.swapped_in_bytes;
      s.swap_evictions = h.evictions;
      s.swap_space_bytes = static_cast<int64_t>(h.slots) * h.slot_bytes;
      s.swap_blocks = h.slots;
      s.swap_blocks_used = h.slots_used;
    }
    return s;
  }

  // KvAllocator
  int32_t begin_sequence(RequestId id, int32_t budget) override {
    ActiveRequest& a = active_.at(id);
    a.seq = kv_.add_sequence();
    a.wait_for_room = false;
    const int32_t cached = config_.prefix_cache && a.prefix_cacheable() && !a.request.prompt_logprobs
                               ? kv_.match_prefix(a.seq, a.tokens, budget, &a.wait_for_room)
                               : 0;
    if (a.resume_tokens >= 0) a.resume_cached = cached;  // counted once the admission succeeds (reserve)
    return cached;
  }
  bool reserve(RequestId id, int32_t num_computed, int32_t num_tokens) override {
    ActiveRequest& a = active_.at(id);
    // Its prefix is in the swap space (or on disk) but the pool cannot take it whole yet: it
    // waits for blocks rather than recompute (a request alone always fits: the context does).
    if (std::exchange(a.wait_for_room, false)) return false;
    if (!kv_.reserve(a.seq, num_tokens, num_computed)) return false;
    if (a.resume_cached >= 0) {  // a preempted request is back: what of its KV did not come back is recomputed
      const int32_t bs = config_.block_size;
      const int32_t whole = static_cast<int32_t>(a.tokens.size() - 1) / bs * bs;  // a hit never has the last token
      stats_.record_resume(std::max(0, std::min(a.resume_tokens, whole) - a.resume_cached));
      a.resume_tokens = a.resume_cached = -1;
    }
    return true;
  }
  void on_preempted(RequestId id, int32_t num_computed) override {
    // The whole blocks registered for prefix sharing (commit.cpp cacheable_tokens); none when
    // the request is not prefix-cached (it recomputes everything, as expected).
    ActiveRequest& a = active_.at(id);
    const bool cached = config_.prefix_cache && a.prefix_cacheable() && !a.request.prompt_logprobs;
    const int32_t cacheable = model_.has_decode_weights() ? std::min(num_computed, a.num_prompt) : num_computed;
    a.resume_tokens = cached ? cacheable / config_.block_size * config_.block_size : 0;
  }
  void end_sequence(RequestId id) override {
    ActiveRequest& a = active_.at(id);
    if (a.seq >= 0) kv_.remove_sequence(a.seq);
    a.seq = -1;
  }

 private:
  // The store's folder is named by everything that decides a block's bytes: the weights (the
  // caller's fingerprint), the KV layout and storage format, and the backend's arithmetic.
  void attach_disk_tier() {
    if (config_.model_fingerprint == 0)
      throw Error("the disk prefix cache needs the model's fingerprint (EngineConfig::model_fingerprint)");
    uint64_t fingerprint = hash64_combine(config_.model_fingerprint, kv_.layout_fingerprint());
    fingerprint = hash64_combine(fingerprint, hash64(model_.backend().name()));
    kv_.attach_disk_tier(std::make_shared<kv::DiskPrefixStore>(kv::DiskPrefixStore::Options{
        .dir = config_.prefix_cache_dir, .max_bytes = config_.prefix_cache_disk_bytes, .fingerprint = fingerprint}));
    const kv::DiskPrefixStats d = kv_.disk_tier()->stats();
    log::info("disk prefix cache: {} ({} blocks, {} bytes found)", kv_.disk_tier()->folder(), d.files, d.bytes_on_disk);
    if (kv_.layout().max_window() > 0)
      log::info("disk prefix cache: the sliding-window layers keep every block (the tier stores whole-model blocks)");
  }

  // drain → draft → schedule → execute → commit → deliver. Drafting comes before scheduling:
  // the drafts are tokens the scheduler schedules like any other.
  void run() {
    // The model's device current on this thread (CUDA: a model on cuda:1 issues there, and a
    // driver call such as a tensor-map encode finds its context even before any runtime call).
    model_.backend().bind_thread();
    for (;;) {
      if (!drain_inbox()) return runner_.wait_in_flight();
      if (!runner_.has_step_ahead() && scheduler_.num_running() == 0 && scheduler_.num_waiting() == 0) continue;
      const auto iteration_start = Clock::now();
      // A step issued during the last iteration (overlapped decoding): its tokens follow the last step's.
      std::optional<IssuedStep> step = runner_.take_step_ahead();
      if (!step) {
        step.emplace();
        step->drafting_seconds = propose_drafts(state_);
        if (!schedule_step(step->plan)) continue;
        runner_.execute(*step);
      }
      if (!runner_.collect_outputs(*step)) {
        on_failed_step(*step);
        continue;
      }
      if (!isolate_.empty() && step->plan.chunks.size() == 1 && step->plan.chunks[0].id == isolate_.front())
        isolate_.pop_front();  // its step alone succeeded: the fault was not its
      if (step->plan.chunks.empty()) continue;
      commit_and_time(*step, iteration_start);
      for (const auto& c : step->plan.chunks) deliver_to(c.id);
    }
  }

  // The scheduler's plan for the next step; false when nothing could be scheduled.
  bool schedule_step(StepPlan& plan) {
    plan = scheduler_.schedule();
    if (kv_.layout().splits_sliding()) stats_.refresh_gauges(gauges());  // the sliding blocks' peak
    for (RequestId id : plan.preempted) {
      log::debug("request {} preempted (KV full)", id);
      drop_drafts(id);
    }
    if (!isolate_.empty()) run_alone(plan);
    if (!plan.chunks.empty()) return true;
    // Nothing fits now and nothing runs: the waiting request can never be served.
    fail_head_of_line();
    return false;
  }

  // Commits the step's outputs and accounts its time: to the speculation policy (step costs,
  // each request's gate clocks) and to the stats.
  void commit_and_time(const IssuedStep& step, Clock::time_point iteration_start) {
    const size_t num_chunks = step.plan.chunks.size();
    const double step_seconds = seconds_between(step.t0, Clock::now());
    // Prefill chunks are not decode steps: their cost would inflate the plain step cost that
    // verify rows are compared with (and, early on, hide every draft's cost from the gates).
    const int64_t rows = step.plan.num_tokens();
    if (step.timed && step.decode_only) {
      policy_.record_step_cost(step_seconds, num_chunks, step.step_drafts);
      step_shares_.record(rows, step_seconds);
    }
    for (const auto& c : step.plan.chunks)
      policy_.time_step(active_.at(c.id).spec, step.timed, step.decode_only,
                        step_shares_.share(step_seconds, c.count, rows, num_chunks), c.count == 1 && c.completes);
    const Commit::Totals totals = commit_.commit_step(step.plan, runner_.batch(), step.out);
    // The rest of the iteration (scheduling, verification, sampling, emitting) is shared among
    // the step's requests. (Requests are only removed at delivery.)
    const double rest = seconds_between(iteration_start, Clock::now()) - step.drafting_seconds - step_seconds;
    for (const auto& c : step.plan.chunks)
      policy_.finish_step(active_.at(c.id).spec, std::max(0.0, rest) / static_cast<double>(num_chunks));
    stats_.record_step({.computed_prompt_tokens = totals.computed_prompt_tokens,
                        .generated_tokens = totals.generated_tokens,
                        .timed_decode = step.decode_only && step.timed,
                        .speculative = step.step_drafts > 0,
                        .wall_seconds = seconds_between(iteration_start, Clock::now()),
                        .drafting_seconds = step.drafting_seconds});
  }

  // A failed forward (a device error, an allocation failure) does not say which of its rows
  // caused it. Nothing of the step was committed (KV rows past num_computed are rewritten, no
  // block was registered for prefix sharing), so no request lost anything: alone in its step,
  // the request fails; in a step with others, each of them runs its chunk again in a step of its
  // own, and only those whose own step fails get the error. The others go on. A model with
  // recurrent state is the exception: a failed forward may have moved its requests' states
  // part of the way, so all of them fail.
  void on_failed_step(const IssuedStep& step) {
    stats_.record_failed_step();
    if (step.plan.chunks.size() == 1 || kv_.has_state()) {
      log::error("forward of {} request(s) failed: {}", step.plan.chunks.size(), step.failure);
      for (const auto& c : step.plan.chunks) {
        if (!isolate_.empty() && isolate_.front() == c.id) isolate_.pop_front();
        finish(c.id, FinishReason::Error, step.failure);
      }
      return;
    }
    log::error("forward of a step of {} requests failed ({}): running each alone to find those it touched",
               step.plan.chunks.size(), step.failure);
    for (const auto& c : step.plan.chunks)
      if (std::find(isolate_.begin(), isolate_.end(), c.id) == isolate_.end()) isolate_.push_back(c.id);
  }

  // While requests of a failed step are being isolated: the step runs only the next of them
  // (the others keep their KV and run again afterwards). One that is not in the plan (it was
  // preempted, or finished) leaves the list: the plan runs as it is.
  void run_alone(StepPlan& plan) {
    while (!isolate_.empty() && !active_.count(isolate_.front())) isolate_.pop_front();
    if (isolate_.empty()) return;
    const auto it = std::find_if(plan.chunks.begin(), plan.chunks.end(),
                                 [&](const ScheduledChunk& c) { return c.id == isolate_.front(); });
    if (it == plan.chunks.end()) {
      isolate_.pop_front();
      return;
    }
    const ScheduledChunk alone = *it;
    plan.chunks.assign(1, alone);
  }

  void drop_drafts(RequestId id) {
    auto it = active_.find(id);
    if (it != active_.end() && it->second.spec.num_drafts > 0)
      trim_drafts(state_, id, it->second, it->second.spec.num_drafts);
  }

  // Sends what the request accumulated this step; retires it when finished.
  void deliver_to(RequestId id) {
    auto it = active_.find(id);
    if (it != active_.end() && deliver(it->second)) retire(id, false);
  }

  void finish(RequestId id, FinishReason reason, const std::string& error) {
    auto it = active_.find(id);
    if (it == active_.end()) return;
    it->second.pending.finish = reason;
    it->second.pending.error = error;
    if (reason == FinishReason::Error) stats_.record_failed_request();
    deliver_to(id);
  }

  void retire(RequestId id, bool cancelled) {
    if (!policy_.lanes().empty()) {
      const ActiveRequest& a = active_.at(id);
      policy_.record_finished(a.spec);
      if (a.spec.lane >= 0) stats_.record_drafter_figures(drafter_figures());
      // Every drafter hears of every request's end once: the suffix trees learn from all outputs,
      // whichever drafter ran them; the others drop the request's state where they hold any. A
      // drafter that is part of another (the merged drafter's members) hears it through the whole.
      const auto tokens = std::span<const int32_t>(a.tokens.data(), a.tokens.size() - a.spec.num_drafts);
      for (const spec::DrafterLane& lane : policy_.lanes())
        if (!is_part_of_a_lane(lane.drafter)) lane.drafter->on_finish(id, tokens, a.num_prompt);
    }
    scheduler_.remove(id);
    active_.erase(id);
    stats_.record_retired(cancelled, gauges());
  }

  bool is_part_of_a_lane(const spec::Drafter* drafter) const {
    for (const spec::DrafterLane& lane : policy_.lanes())
      for (const spec::Drafter* part : lane.drafter->parts())
        if (part == drafter) return true;
    return false;
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

  // The drafter choice's live figures, every kind and drafter that was chosen at least once.
  std::vector<DrafterKindFigures> drafter_figures() const {
    std::vector<DrafterKindFigures> out;
    const spec::DrafterChoice& choice = policy_.choice();
    for (int32_t k = 0; k < spec::kNumRequestKinds; ++k)
      for (int32_t d = 0; d < choice.num_drafters(); ++d) {
        const auto kind = static_cast<spec::RequestKind>(k);
        const spec::DrafterFigures& f = choice.figures(kind, d);
        if (f.chosen > 0 || f.measured > 0)
          out.push_back({policy_.lanes()[static_cast<size_t>(d)].drafter->name(), spec::kind_name(kind), f});
      }
    return out;
  }

  StatsRecorder::Gauges gauges() {
    return {.queue_depth = scheduler_.num_waiting(),
            .running = scheduler_.num_running(),
            .kv_blocks_free = kv_.pool().num_free(),
            .kv_blocks_cached = kv_.pool().num_cached(),
            .kv_sliding_blocks_in_use = kv_.num_sliding_blocks_in_use(),
            .preemptions = scheduler_.num_preemptions()};
  }

  // Admits submissions and retires cancelled requests; waits while idle. False: stop.
  bool drain_inbox() {
    const bool idle = scheduler_.num_running() == 0 && scheduler_.num_waiting() == 0;
    std::optional<Inbox::Mail> mail = inbox_.drain(/*wait=*/idle);
    if (!mail) return false;
    for (auto& in : mail->submitted) admit(in);
    for (RequestId id : mail->cancelled) {
      auto it = active_.find(id);
      if (it == active_.end()) continue;
      deliver_abort(it->second);
      retire(id, true);
    }
    stats_.refresh_gauges(gauges());
    return true;
  }

  void admit(Inbox::Submission& in) {
    ActiveRequest a;
    a.tokens = in.request.prompt;
    a.num_prompt = static_cast<int32_t>(in.request.prompt.size());
    a.num_logical_prompt = a.num_prompt;
    a.sampler = std::make_unique<sampling::Sampler>(in.request.sampling);
    if (in.request.grammar)
      a.constraint = std::make_unique<sampling::TokenConstraint>(in.request.grammar, config_.vocabulary,
                                                                 in.request.stop_token_ids);
    a.stream = std::move(in.stream);
    a.submitted = in.submitted;
    a.request = std::move(in.request);
    compress_prompt(a);
    const auto& r = a.request;
    const spec::RequestKind kind =
        spec::classify_request(a.tokens, a.constraint != nullptr, config_.vocabulary.get());
    if (const char* gate = policy_.admit(a.spec, a.tokens, r.speculate.value_or(true), r.logprobs,
                                         r.num_speculative_tokens, kind)) {
      a.pending.spec = a.spec.usage;
      stats_.record_gate(gate);
    }
    if (spec::Drafter* drafter = policy_.drafter(a.spec); drafter && !a.spec.off) drafter->begin_request(in.id, kind);
    const int32_t num_prompt = a.num_prompt;
    active_.emplace(in.id, std::move(a));
    scheduler_.add(in.id, num_prompt);
    stats_.record_admitted(active_.at(in.id).num_logical_prompt);
  }

  // PFlash (engine/pflash.h): replaces the prompt in `a.tokens` by the tokens the scorer keeps.
  void compress_prompt(ActiveRequest& a) {
    const PflashMode mode = a.request.pflash.value_or(config_.pflash.mode);
    if (mode == PflashMode::Off) return;
    using Outcome = StatsRecorder::PflashOutcome;
    if (a.request.prompt_intact || a.constraint || a.request.prompt_logprobs)
      return stats_.record_pflash(Outcome::BypassedIntact, 0, 0);
    if (mode == PflashMode::Auto && a.num_prompt <= config_.pflash.threshold)
      return stats_.record_pflash(Outcome::BypassedShort, 0, 0);
    PromptScorer& scorer = config_.pflash_scorer ? *config_.pflash_scorer : lexical_;
    const auto t0 = Clock::now();
    PflashPlan plan;
    try {
      plan = plan_compression(a.tokens, config_.pflash, scorer);
    } catch (const std::exception& e) {  // the prompt is served whole rather than failed
      log::warn("PFlash: {} scorer failed, prompt left whole: {}", scorer.name(), e.what());
      plan.refused = e.what();
    }
    const double seconds = seconds_between(t0, Clock::now());
    if (!plan.compressed()) {
      log::debug("PFlash: prompt of {} tokens left whole: {}", a.num_prompt, plan.refused);
      return stats_.record_pflash(Outcome::Refused, 0, seconds);
    }
    std::vector<int32_t> kept_tokens;
    kept_tokens.reserve(plan.kept.size());
    for (int32_t i : plan.kept) kept_tokens.push_back(a.tokens[static_cast<size_t>(i)]);
    a.tokens = std::move(kept_tokens);
    a.num_prompt = static_cast<int32_t>(a.tokens.size());
    if (config_.pflash.positions == PflashPositions::Original) a.kept_positions = std::move(plan.kept);
    stats_.record_pflash(Outcome::Compressed, a.num_logical_prompt - a.num_prompt, seconds);
  }

  const EngineConfig config_;
  LexicalScorer lexical_;  // PFlash's scorer when the config names none
  model::Model& model_;
  kv::KvCache kv_;
  Scheduler scheduler_;
  ActiveRequests active_;
  spec::SpecPolicy policy_;
  StepShares step_shares_;  // each request's part of a batched step's time
  StatsRecorder stats_;
  LoopState state_;
  StepRunner runner_;
  Commit commit_;
  Inbox inbox_;
  std::deque<RequestId> isolate_;  // requests of a failed step, to run alone (on_failed_step)
  std::thread thread_;
};

// ---- Engine ------------------------------------------------------------------------------

namespace {
std::atomic<RequestId> next_request_id{1};
}

Engine::Engine(model::Model& model, const EngineConfig& config) : model_(model), config_(config) {
  const int32_t context =
      config.max_context > 0 ? config.max_context : static_cast<int32_t>(model.config().max_position_embeddings);
  config_.kv_format = model::resolve_kv_format(config.kv_format, model.config(), model.backend());
  kv_pool_ = size_kv_pool(model, config_, context);
  log::debug("KV pool: {}", kv_pool_.why);  // `tachyon serve` prints it per model
  max_context_ = context;
  const int64_t pool_tokens = static_cast<int64_t>(kv_pool_.num_blocks) * config.block_size;
  if (pool_tokens < context) {
    max_context_ = static_cast<int32_t>(pool_tokens);
    log::warn("the KV pool holds {} tokens, less than the context of {}: the context is {} tokens (give more KV "
              "memory for the full context)",
              pool_tokens, context, max_context_);
  }
  config_.num_blocks = kv_pool_.num_blocks;
  config_.num_sliding_blocks = kv_pool_.num_sliding_blocks;
  if (!config.prefix_cache) {
    swap_space_ = {0, "off: the swap space is the prefix cache's host tier, and prefix caching is off"};
  } else if (kv_pool_.num_sliding_blocks > 0) {
    swap_space_ = {0, "off: the sliding-window layers release their blocks (--swap-space BYTES keeps every block "
                      "and swaps them)"};
  } else {
    swap_space_ = engine::swap_space(config.swap_space_bytes, model.backend().device_memory().has_value(),
                                     kv_pool_.bytes, host_available_bytes());
  }
  log::debug("KV swap space: {}", swap_space_.why);
  config_.swap_space_bytes = swap_space_.bytes;
  loop_ = std::make_unique<EngineLoop>(*this, model, config_, kv_pool_.num_blocks);
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
  request.sampling.validate(vocab);
  if (request.grammar) {
    if (!config_.vocabulary) throw Error("this engine has no token vocabulary, so it cannot constrain decoding");
    sampling::GrammarMatcher::validate(*request.grammar);  // the engine thread builds its matcher
  }
  const RequestId id = next_request_id.fetch_add(1);
  auto stream = std::shared_ptr<RequestStream>(new RequestStream(this, id));
  loop_->submit(id, std::move(request), stream);
  return stream;
}

void Engine::cancel(RequestId id) { loop_->cancel(id); }
EngineStats Engine::stats() const { return loop_->stats(); }

}  // namespace tachyon::engine
