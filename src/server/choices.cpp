#include "server/choices.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "server/api_error.h"
#include "server/handlers.h"

namespace tachyon::server {

Choices::Choices(const ServedModel& model, const ParsedRequest& request, Admission& admission) {
  ParsedRequest choice = request;
  for (int32_t i = 0; i < std::max<int32_t>(1, request.n); ++i) {
    if (request.sampling.seed) choice.sampling.seed = *request.sampling.seed + static_cast<uint64_t>(i);
    generations_.push_back(std::make_unique<Generation>(model, choice, admission, /*submit_now=*/i == 0));
  }
}

std::vector<GenerationOutcome> Choices::run(const Sink& sink, const Done& done,
                                            const std::function<bool()>& client_gone) {
  std::vector<GenerationOutcome> outcomes(generations_.size());
  std::mutex output_lock;
  // The connection watch is not thread-safe (it finds its socket on the first call).
  std::mutex gone_lock;
  std::function<bool()> gone;
  if (client_gone)
    gone = [&] {
      std::lock_guard lock(gone_lock);
      return client_gone();
    };
  auto run_choice = [&](size_t i) {
    TextSink choice_sink;
    if (sink)
      choice_sink = [&, i](std::string_view text, std::span<const engine::TokenLogprob> lps) {
        std::lock_guard lock(output_lock);
        return sink(i, text, lps);
      };
    try {
      outcomes[i] = generations_[i]->run(choice_sink, gone);
    } catch (const std::exception& e) {  // a fork the engine refused
      outcomes[i].finish = engine::FinishReason::Error;
      outcomes[i].error = e.what();
    }
    std::lock_guard lock(output_lock);
    if (done) done(i, outcomes[i]);
  };
  if (generations_.size() == 1) {
    run_choice(0);
    return outcomes;
  }

  // The forks wait for the first choice's prefill (or its end, whichever comes first).
  std::mutex prefill_lock;
  std::condition_variable prefilled_cv;
  bool prefilled = false;
  auto mark_prefilled = [&] {
    {
      std::lock_guard lock(prefill_lock);
      prefilled = true;
    }
    prefilled_cv.notify_all();
  };
  generations_[0]->on_prefilled(mark_prefilled);
  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    run_choice(0);
    mark_prefilled();
  });
  for (size_t i = 1; i < generations_.size(); ++i)
    threads.emplace_back([&, i] {
      {
        std::unique_lock lock(prefill_lock);
        prefilled_cv.wait(lock, [&] { return prefilled; });
      }
      run_choice(i);
    });
  for (std::thread& t : threads) t.join();
  return outcomes;
}

GenerationOutcome combined_usage(const std::vector<GenerationOutcome>& outcomes) {
  GenerationOutcome total;
  if (outcomes.empty()) return total;
  total.prompt_tokens = outcomes.front().prompt_tokens;
  total.cached_response = true;  // every choice answered from the response cache
  total.spec.method = outcomes.front().spec.method;
  total.spec.stopped_by = outcomes.front().spec.stopped_by;
  total.spec.kind = outcomes.front().spec.kind;
  total.spec.choice = outcomes.front().spec.choice;
  for (const GenerationOutcome& o : outcomes) {
    total.completion_tokens += o.completion_tokens;
    total.cached_tokens = std::max(total.cached_tokens, o.cached_tokens);
    total.dropped_tokens = std::max(total.dropped_tokens, o.dropped_tokens);  // the prompt's, counted once
    total.cached_response = total.cached_response && o.cached_response;
    total.spec.num_drafted += o.spec.num_drafted;
    total.spec.num_accepted += o.spec.num_accepted;
    total.spec.num_steps += o.spec.num_steps;
  }
  return total;
}

void stream_openai_choices(Choices& choices, SseWriter& sse, const OpenAiStream& stream,
                           const std::function<void()>& start, const Choices::Sink& sink,
                           const Choices::Done& finish) {
  bool failed = false, aborted = false;
  try {
    start();
    const std::vector<GenerationOutcome> outcomes =
        choices.run(sink, [&](size_t i, const GenerationOutcome& outcome) {
          if (outcome.finish == engine::FinishReason::Error) {
            if (!failed)
              sse.data(error_body(ApiError(ErrorKind::Internal, "generation failed: " + outcome.error), ApiFlavor::OpenAI));
            failed = true;
          } else if (outcome.finish == engine::FinishReason::Abort) {
            aborted = true;
          } else if (!failed) {
            finish(i, outcome);
          }
        });
    if (!failed && !aborted && stream.include_usage)
      sse.data({{"id", stream.id}, {"object", stream.object}, {"created", stream.created}, {"model", stream.model},
                {"choices", Json::array()}, {"usage", openai_usage(combined_usage(outcomes))}});
  } catch (const std::exception& e) {
    sse.data(error_body(ApiError(ErrorKind::Internal, e.what()), ApiFlavor::OpenAI));
  }
  sse.done();
}

}  // namespace tachyon::server
