// Batch formation, in token counts and block ids only (no tensors, no model): one rule for
// every case — bring each request's num_computed up to its num_tokens (prompt + generated,
// drafted tokens included) within the step's token budget. Prefill, chunked prefill,
// decode and prefix-cache hits are all that rule; there are no phases.
//
// KV capacity is asked of a `KvAllocator` (the engine implements it over kv::KvCache), so
// this file never sees a tensor and its tests run on counts alone.
//
//   Scheduler s({.max_concurrent = 8, .max_tokens_per_step = 512}, allocator);
//   s.add(id, num_prompt_tokens);
//   StepPlan plan = s.schedule();   // chunks to run now, requests preempted
//   ... forward ...
//   s.on_computed(id, n); s.on_token_appended(id);   // after sampling
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "engine/request.h"

namespace tachyon::engine {

// What the scheduler needs from the KV cache. All calls are about one request's sequence.
class KvAllocator {
 public:
  virtual ~KvAllocator() = default;
  // Starts the request's sequence; returns how many leading tokens the prefix cache
  // already holds (0 without caching). `budget`: the tokens this step may still compute, so the
  // admission reserves the hit and up to that many more (the cache loads blocks from its host or
  // disk tier only while that reservation can still succeed).
  virtual int32_t begin_sequence(RequestId id, int32_t budget) = 0;
  // Makes room for tokens [0, num_tokens) of which the first num_computed have KV; false
  // (nothing allocated) when out of blocks in any of the cache's block groups. Sliding-window
  // layers may then release blocks that no row from num_computed on sees (kv::KvCache::reserve);
  // the scheduler never computes a request's tokens before its num_computed again, except
  // from 0 after it ended the sequence.
  virtual bool reserve(RequestId id, int32_t num_computed, int32_t num_tokens) = 0;
  // Drops the sequence and its blocks (cached blocks stay reusable).
  virtual void end_sequence(RequestId id) = 0;
  // The request is about to be preempted with `num_computed` tokens of KV (end_sequence follows).
  virtual void on_preempted(RequestId id, int32_t num_computed) {
    (void)id;
    (void)num_computed;
  }
};

struct SchedulerConfig {
  int32_t max_concurrent = 16;
  int32_t max_tokens_per_step = 512;
};

struct ScheduledChunk {
  RequestId id;
  int32_t begin;  // first token index (= position) computed in this step
  int32_t count;  // tokens computed in this step
  bool completes; // the chunk reaches num_tokens: the last row's logits pick the next token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<RequestId> preempted;  // lost their KV; resume from their cached prefix (pool or host tier)
  int32_t num_tokens() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvAllocator& kv) : config_(config), kv_(kv) {}

  void add(RequestId id, int32_t num_tokens);  // joins the waiting queue
  void remove(RequestId id);                   // finished or cancelled: frees its KV
  StepPlan schedule();

  // After the forward: `count` more tokens of `id` have KV; then, if a token was sampled,
  // the request grew by one.
  void on_computed(RequestId id, int32_t count);
  void on_token_appended(RequestId id, int32_t count = 1);

  // Speculation rollback: the request now has `num_tokens` tokens of which `num_computed`
  // have valid KV (the engine truncates the KV itself).
  void rollback(RequestId id, int32_t num_tokens, int32_t num_computed);
  std::vector<RequestId> running_ids() const;

  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_computed(RequestId id) const;
  int32_t num_tokens(RequestId id) const;
  uint64_t num_preemptions() const { return preemptions_; }

 private:
  struct Entry {
    RequestId id;
    int32_t num_tokens;
    int32_t num_computed = 0;
    bool started = false;  // has a KV sequence
  };
  Entry* find(RequestId id);
  const Entry* find(RequestId id) const;
  void preempt(Entry& e, StepPlan& plan);

  SchedulerConfig config_;
  KvAllocator& kv_;
  std::deque<Entry> waiting_;  // FIFO; preempted requests go to the front
  std::vector<Entry> running_; // admission order: the newest is preempted first
  uint64_t preemptions_ = 0;
};

}  // namespace tachyon::engine
