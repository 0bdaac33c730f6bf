// The engine: one thread that owns the model and the KV pool and runs the step loop
// (DESIGN.md "Engine and server"): admit requests, schedule every running request's next
// tokens under a per-step token budget (chunked prefill and decode in one ragged batch),
// forward, sample, commit, deliver. Prefix caching shares full KV blocks between requests.
//
// Thread safety: submit/cancel/stats may be called from any thread. Each request's outputs
// arrive on its own RequestStream.
//
//   Engine engine(*model, {.max_concurrent = 16});
//   auto stream = engine.submit(request);          // throws tachyon::Error if it can never fit
//   while (auto out = stream->next(std::chrono::seconds(30))) {
//     consume(out->tokens);
//     if (out->finish != FinishReason::None) break;
//   }
//   stream->cancel();  // or just drop the stream: the request is cancelled and its blocks freed
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/fault_injection.h"
#include "engine/kv_sizing.h"
#include "engine/pflash.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "model/model.h"
#include "spec/drafter.h"
#include "spec/spec_policy.h"
#include "spec/spec_step_costs.h"

namespace tachyon::engine {

struct EngineConfig {
  int32_t max_concurrent = 16;        // running requests at most
  int32_t max_tokens_per_step = 512;  // token budget of one forward (chunked prefill)
  int32_t block_size = 16;
  // The KV pool (engine/kv_sizing.h): num_blocks > 0 takes exactly that many blocks; else
  // kv_memory_bytes > 0 as many as fit in those bytes; else it is sized from the machine: a GPU's
  // gpu_memory_utilization after the weights and a warm-up step, or a share of the host's
  // available memory capped at max_concurrent full contexts.
  int32_t num_blocks = 0;
  int64_t kv_memory_bytes = 0;
  double gpu_memory_utilization = 0.90;
  // 0: the model's max_position_embeddings. Either way at most what the KV pool holds (the
  // engine shortens it, with a warning), so one request alone always fits and a request is
  // refused only for a prompt longer than the context.
  // KV cache storage format (kernels/kv_format.h); nullopt: auto (model/kv_format_choice.h:
  // bf16, f16 for f16 models). The engine's constructor resolves it.
  std::optional<kernels::KvFormat> kv_format;
  int32_t max_context = 0;
  // Sliding-window layers (Gemma 3, gpt-oss) keep their K/V in blocks of their own
  // (kv::KvLayout::splits_sliding), released once they left every window: their memory stays
  // bounded (kv_sizing.h sliding_pool_blocks) however long a sequence grows. False, with a disk
  // prefix tier (whole-model blocks) or with recurrent state: every layer keeps every block.
  bool release_sliding_blocks = true;
  // Their pool's blocks; 0: sized by the engine (kv_sizing.h sliding_pool_blocks, at most half
  // of the KV memory when that is small), which then sets it.
  int32_t num_sliding_blocks = 0;
  bool prefix_cache = true;
  // The prefix cache's disk tier (kv/disk_prefix_store.h): blocks evicted from memory (and, at
  // shutdown, every cached block) are written under this folder, in a subfolder named by the
  // fingerprint of the weights (`model_fingerprint`, io/weights_fingerprint.h, required with a
  // folder), the KV layout and format, and the backend; a prefix that misses in memory is read
  // back from it, also by the next server started on the same model. Empty: memory only.
  std::string prefix_cache_dir;
  int64_t prefix_cache_disk_bytes = int64_t{16} << 30;
  uint64_t model_fingerprint = 0;
  // The prefix cache's host tier, swap space for the KV pool (kv::KvCache::attach_host_tier):
  // blocks the pool evicts (a preempted request's among them) are copied to host memory and
  // back on a prefix hit, so a preempted request resumes without recomputing its KV. -1 (auto):
  // on a GPU the smaller of the pool's bytes and a quarter of the available host memory, off on
  // the CPU (kv_sizing.h swap_space); 0: off (preempted requests recompute); > 0: these bytes, on
  // any backend. Needs prefix_cache; sliding-window layers then keep every block, as with a disk
  // tier (auto leaves them their own pool, and the tier off).
  int64_t swap_space_bytes = -1;
  // Overlapped decoding: a plain decode step is issued before the tokens of the step before it
  // are read (its rows read them on the device), so the device does not idle while the host
  // reads, decides and records. Outputs are the same either way. Auto: on where the backend
  // runs asynchronously (a GPU; on the CPU it would only move work around).
  enum class Overlap { Auto, On, Off };
  Overlap overlap_steps = Overlap::Auto;
  // Token byte strings for constrained decoding (GenerationRequest::grammar); null: requests
  // with a grammar are refused.
  std::shared_ptr<const sampling::TokenVocabulary> vocabulary;

  // Speculative decoding: `drafter` (owned by the caller, outliving the engine) proposes
  // up to `num_speculative_tokens` per step for requests in decode; null disables it.
  spec::Drafter* drafter = nullptr;
  int32_t num_speculative_tokens = 4;
  bool auto_k = true;                  // pick k per request from measured acceptance and step cost
  // Draft trees (spec/draft_tree.h) of up to this many nodes for greedy requests, when the
  // drafter branches and the model has no recurrent state; at most num_speculative_tokens
  // deep. 0 or anything <= k: chains. -1 (auto): for drafters whose trees may pay
  // (Drafter::trees_by_default), trees of 2k nodes or chains, whichever emits more tokens per
  // second of measured step cost (spec/spec_step_costs.h, TreeOrChain); for drafters that score
  // their nodes (DFlash) or size their own trees (merged), each tree cut to the node count with
  // the most expected tokens per second of measured verify cost (SpecPolicy::size_tree).
  int32_t max_tree_nodes = -1;
  bool gates = true;                   // prompt, acceptance and throughput gates may turn speculation off
  bool model_free_drafter = false;     // apply the prompt-time repetition gate
  double min_prompt_repetition = 0.02; // gate: 3-gram repetition below this turns a model-free drafter off
  // Several drafters at once (owned by the caller, outliving the engine), each with its own k and
  // gates: per request the engine uses the one with the best measured tokens per second on the
  // request's kind of text (spec/drafter_choice.h). Non-empty: `drafter`, num_speculative_tokens
  // and model_free_drafter are not read.
  std::vector<spec::DrafterLane> drafters;
  // The drafters the engine runs: `drafters`, else `drafter` as the only one (or none).
  std::vector<spec::DrafterLane> drafter_lanes() const;

  // PFlash prompt compression (engine/pflash.h), run at admission on the engine thread.
  // `pflash_scorer` (owned by the caller, outliving the engine) ranks the blocks; null: the
  // lexical scorer. A request may turn it on or off (GenerationRequest::pflash).
  PflashConfig pflash;
  PromptScorer* pflash_scorer = nullptr;
  // Tests and debug builds (engine/fault_injection.h): makes chosen requests' forwards fail.
  FaultInjector fault_injector;
};

// `layout` with the sliding-window layers' own pool (kv::KvLayout::num_sliding_blocks, sized by
// kv_sizing.h sliding_pool_blocks) when `config` releases their blocks, the model has such layers
// with a window shorter than `max_context`, and neither a disk tier nor recurrent state needs
// whole-model blocks (a disk tier or an explicit swap space); else without one (every layer keeps
// every block).
kv::KvLayout with_sliding_pool(kv::KvLayout layout, const EngineConfig& config, int32_t max_context);

class Engine;
struct ActiveRequest;  // engine/loop_state.h

// The owner's end of one request. Destroying it cancels the request.
class RequestStream {
 public:
  ~RequestStream();
  RequestId id() const { return id_; }
  // Waits up to `timeout` for the next delivery; nullopt on timeout. After a delivery whose
  // finish != None there are no more.
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);
  void cancel();

 private:
  friend class Engine;
  friend bool deliver(ActiveRequest& a);  // engine/delivery.h
  friend void deliver_abort(ActiveRequest& a);
  RequestStream(Engine* engine, RequestId id) : engine_(engine), id_(id) {}
  void push(RequestOutput out);  // engine thread: merges into the pending delivery

  Engine* engine_;
  RequestId id_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::optional<RequestOutput> pending_;
  bool cancelled_ = false;
};

class Engine {
 public:
  Engine(model::Model& model, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates (prompt non-empty, ids in the vocabulary, prompt + max_tokens within the
  // context, sampling parameters) and queues the request. The KV pool never refuses one:
  // the context fits in it, and when concurrent requests fill it the newest are preempted and
  // recomputed later. Throws tachyon::Error naming
  // the problem; nothing is queued then.
  std::shared_ptr<RequestStream> submit(GenerationRequest request);
  void cancel(RequestId id);
  EngineStats stats() const;

  int32_t max_context() const { return max_context_; }
  const KvPoolSize& kv_pool() const { return kv_pool_; }
  const SwapSpace& swap_space() const { return swap_space_; }  // the host tier's bytes (0: none) and why
  kernels::KvFormat kv_format() const { return *config_.kv_format; }  // resolved
  const model::Model& model() const { return model_; }

 private:
  friend class EngineLoop;
  model::Model& model_;
  EngineConfig config_;
  int32_t max_context_;
  KvPoolSize kv_pool_;
  SwapSpace swap_space_;
  std::unique_ptr<class EngineLoop> loop_;
};

}  // namespace tachyon::engine
