#include "engine/inbox.h"

namespace tachyon::engine {

void Inbox::post_submission(RequestId id, GenerationRequest request, std::weak_ptr<RequestStream> stream) {
  {
    std::lock_guard lock(mutex_);
    mail_.submitted.push_back({id, std::move(request), std::move(stream), std::chrono::steady_clock::now()});
  }
  ready_.notify_all();
}

void Inbox::post_cancellation(RequestId id) {
  {
    std::lock_guard lock(mutex_);
    mail_.cancelled.push_back(id);
  }
  ready_.notify_all();
}

void Inbox::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

std::optional<Inbox::Mail> Inbox::drain(bool wait) {
  std::unique_lock lock(mutex_);
  if (wait) ready_.wait(lock, [&] { return closed_ || !mail_.submitted.empty() || !mail_.cancelled.empty(); });
  if (closed_) return std::nullopt;
  Mail mail;
  mail.submitted.swap(mail_.submitted);
  mail.cancelled.swap(mail_.cancelled);
  return mail;
}

}  // namespace tachyon::engine
