#include "engine/delivery.h"

#include <algorithm>

namespace tachyon::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
    case FinishReason::Timeout: return "timeout";
    default: return "";
  }
}

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
      p.num_dropped_prompt_tokens = out.num_dropped_prompt_tokens;
      p.num_generated_tokens = out.num_generated_tokens;
      p.spec = std::move(out.spec);  // totals so far: the newest (a merge kept the first, so usage lost speculation)
    }
  }
  ready_.notify_all();
}

bool deliver(ActiveRequest& a) {
  if (a.pending.tokens.empty() && a.pending.finish == FinishReason::None && a.prompt_logprobs.empty()) return false;
  RequestOutput out = std::move(a.pending);
  a.pending = RequestOutput{};
  out.num_prompt_tokens = a.num_logical_prompt;
  out.num_dropped_prompt_tokens = a.num_logical_prompt - a.num_prompt;
  out.num_cached_prompt_tokens = std::max(0, a.num_cached_prompt);
  out.num_generated_tokens = a.num_generated() - a.spec.num_drafts;
  out.spec = a.spec.usage;
  if (a.request.prompt_logprobs && static_cast<int32_t>(a.prompt_logprobs.size()) >= a.num_prompt - 1) {
    out.prompt_logprobs = std::move(a.prompt_logprobs);  // complete: sent once, with this delivery
    a.prompt_logprobs.clear();
    a.request.prompt_logprobs = false;
  }
  const bool done = out.finish != FinishReason::None;
  if (auto stream = a.stream.lock()) stream->push(std::move(out));
  return done;
}

void deliver_abort(ActiveRequest& a) {
  if (auto stream = a.stream.lock()) {
    RequestOutput out;
    out.finish = FinishReason::Abort;
    stream->push(std::move(out));
  }
}

}  // namespace tachyon::engine
