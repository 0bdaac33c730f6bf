// OpenAI's `n`: n independent samples of one prompt. The first choice is submitted alone; the
// others once its prefill is done, so the prompt is computed once and the rest read its full
// KV blocks from the prefix cache (only the last partial block is recomputed). A request
// `seed` gives choice i the seed seed + i: the same request gives the same choices, and each
// choice draws its own stream. Every choice holds an admission slot (429 before any output when
// the server cannot take all n).
//
//   Choices choices(model, request, admission);
//   auto outcomes = choices.run([&](size_t i, std::string_view text, auto lps) { ...; return true; },
//                               [&](size_t i, const GenerationOutcome& o) { ... });
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/sse.h"

namespace tachyon::server {

class Choices {
 public:
  using Sink = std::function<bool(size_t index, std::string_view text, std::span<const engine::TokenLogprob>)>;
  using Done = std::function<void(size_t index, const GenerationOutcome& outcome)>;

  Choices(const ServedModel& model, const ParsedRequest& request, Admission& admission);

  size_t size() const { return generations_.size(); }
  Generation& operator[](size_t index) { return *generations_[index]; }
  const Generation& front() const { return *generations_.front(); }

  // Runs every choice to its end, each on its own thread (n = 1: this one). `sink` and `done`
  // are called under one lock, so they may write to one stream. Call once.
  std::vector<GenerationOutcome> run(const Sink& sink, const Done& done = nullptr,
                                     const std::function<bool()>& client_gone = nullptr);

 private:
  std::vector<std::unique_ptr<Generation>> generations_;
};

// The usage of all choices: the prompt counted once, the completions summed, cached tokens as
// the choice that found most in the prefix cache, speculation summed.
GenerationOutcome combined_usage(const std::vector<GenerationOutcome>& outcomes);

// An OpenAI stream of the choices' chunks (object "chat.completion.chunk" or "text_completion"):
// `start` sends each choice's opening chunks, `sink` its text, and `finish` the last chunks of a
// choice that completed. The first engine error sends the stream's error event, after which no
// choice is finished; a choice whose client left ends silently. Then, unless either happened,
// the usage chunk where the request asked for it (stream_options.include_usage); an exception
// becomes the error event. Ends the SSE stream.
struct OpenAiStream {
  std::string id;
  const char* object;
  int64_t created;
  std::string model;
  bool include_usage;
};
void stream_openai_choices(Choices& choices, SseWriter& sse, const OpenAiStream& stream,
                           const std::function<void()>& start, const Choices::Sink& sink,
                           const Choices::Done& finish);

}  // namespace tachyon::server
