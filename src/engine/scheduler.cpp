#include "engine/scheduler.h"

#include <algorithm>

#include "base/error.h"

namespace tachyon::engine {

int32_t StepPlan::num_tokens() const {
  int32_t n = 0;
  for (const auto& c : chunks) n += c.count;
  return n;
}

void Scheduler::add(RequestId id, int32_t num_tokens) {
  TACHYON_CHECK(num_tokens > 0, "request {} has no tokens", id);
  waiting_.push_back({id, num_tokens});
}

Scheduler::Entry* Scheduler::find(RequestId id) {
  for (auto& e : running_)
    if (e.id == id) return &e;
  for (auto& e : waiting_)
    if (e.id == id) return &e;
  return nullptr;
}
const Scheduler::Entry* Scheduler::find(RequestId id) const { return const_cast<Scheduler*>(this)->find(id); }

int32_t Scheduler::num_computed(RequestId id) const {
  const Entry* e = find(id);
  TACHYON_CHECK(e, "unknown request {}", id);
  return e->num_computed;
}
int32_t Scheduler::num_tokens(RequestId id) const {
  const Entry* e = find(id);
  TACHYON_CHECK(e, "unknown request {}", id);
  return e->num_tokens;
}

void Scheduler::remove(RequestId id) {
  auto drop = [&](auto& list) {
    for (auto it = list.begin(); it != list.end(); ++it)
      if (it->id == id) {
        if (it->started) kv_.end_sequence(id);
        list.erase(it);
        return true;
      }
    return false;
  };
  if (!drop(running_)) drop(waiting_);
}

void Scheduler::on_computed(RequestId id, int32_t count) {
  Entry* e = find(id);
  TACHYON_CHECK(e && e->num_computed + count <= e->num_tokens, "request {} computed past its tokens", id);
  e->num_computed += count;
}

void Scheduler::on_token_appended(RequestId id, int32_t count) {
  Entry* e = find(id);
  TACHYON_CHECK(e, "unknown request {}", id);
  e->num_tokens += count;
}

void Scheduler::rollback(RequestId id, int32_t num_tokens, int32_t num_computed) {
  Entry* e = find(id);
  TACHYON_CHECK(e && num_computed <= num_tokens && num_computed >= 0, "bad rollback of request {}", id);
  e->num_tokens = num_tokens;
  e->num_computed = e->started ? num_computed : 0;
}

std::vector<RequestId> Scheduler::running_ids() const {
  std::vector<RequestId> ids;
  for (const auto& e : running_) ids.push_back(e.id);
  return ids;
}

void Scheduler::preempt(Entry& e, StepPlan& plan) {
  kv_.on_preempted(e.id, e.num_computed);
  kv_.end_sequence(e.id);
  e.started = false;
  e.num_computed = 0;
  plan.preempted.push_back(e.id);
  ++preemptions_;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int32_t budget = config_.max_tokens_per_step;
  // 1. Running requests, oldest first: decodes and unfinished prefills keep flowing.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Entry& e = running_[i];
    const int32_t n = std::min(e.num_tokens - e.num_computed, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool fits = kv_.reserve(e.id, e.num_computed, e.num_computed + n);
    // Out of blocks: preempt the newest running request (it resumes later) until this fits.
    while (!fits && running_.size() > i + 1) {
      Entry victim = running_.back();
      running_.pop_back();
      preempt(victim, plan);
      waiting_.push_front(victim);
      fits = kv_.reserve(e.id, e.num_computed, e.num_computed + n);
    }
    if (!fits) {  // even alone it does not fit now: wait for blocks (others will finish)
      Entry self = e;
      running_.erase(running_.begin() + static_cast<long>(i));
      preempt(self, plan);
      waiting_.push_front(self);
      continue;
    }
    plan.chunks.push_back({e.id, e.num_computed, n, e.num_computed + n == e.num_tokens});
    budget -= n;
    ++i;
  }
  // 2. Admission: waiting requests join while there is room, in arrival order.
  while (!waiting_.empty() && budget > 0 && static_cast<int32_t>(running_.size()) < config_.max_concurrent) {
    Entry e = waiting_.front();
    // A request this plan preempted does not come back in it: its blocks just went to an older
    // request, and the engine drops its drafts only once the plan is made, so a chunk planned
    // over them would cover tokens it no longer has (found by the soak: "computed past its
    // tokens"). It is first in line for the next step.
    if (std::find(plan.preempted.begin(), plan.preempted.end(), e.id) != plan.preempted.end()) break;
    if (!e.started) {
      e.num_computed = std::min(kv_.begin_sequence(e.id, budget), e.num_tokens - 1);
      e.started = true;
    }
    const int32_t n = std::min(e.num_tokens - e.num_computed, budget);
    if (!kv_.reserve(e.id, e.num_computed, e.num_computed + n)) {
      kv_.end_sequence(e.id);  // keep nothing while waiting; cached blocks stay in the pool
      waiting_.front().started = false;
      break;
    }
    waiting_.pop_front();
    plan.chunks.push_back({e.id, e.num_computed, n, e.num_computed + n == e.num_tokens});
    budget -= n;
    running_.push_back(e);
  }
  return plan;
}

}  // namespace tachyon::engine
