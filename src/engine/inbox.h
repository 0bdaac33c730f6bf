// Submissions and cancellations on their way from client threads to the engine thread.
// Clients post; the engine thread drains at the top of each step, and waits here while it
// has nothing to run.
//
//   inbox.post_submission(id, std::move(request), stream);  // any thread
//   if (auto mail = inbox.drain(/*wait=*/idle)) admit(mail->submitted), cancel(mail->cancelled);
//   else stop();                                             // the engine is shutting down
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/engine.h"

namespace tachyon::engine {

class Inbox {
 public:
  struct Submission {
    RequestId id;
    GenerationRequest request;
    std::weak_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point submitted;
  };
  struct Mail {
    std::vector<Submission> submitted;
    std::vector<RequestId> cancelled;
  };

  void post_submission(RequestId id, GenerationRequest request, std::weak_ptr<RequestStream> stream);
  void post_cancellation(RequestId id);
  void close();  // drain returns nullopt from now on

  // Takes everything posted; with `wait`, first waits until something is. nullopt once closed.
  std::optional<Mail> drain(bool wait);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  Mail mail_;
  bool closed_ = false;
};

}  // namespace tachyon::engine
