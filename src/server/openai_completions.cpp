// POST /v1/completions: raw prompt (text or token ids) in, text out; echo and legacy logprobs.
#include "server/api_error.h"
#include "server/choices.h"
#include "server/handlers.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

// Legacy logprobs: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}.
// `offset` is where the first token's text starts in the choice's text.
void append_legacy_logprobs(const tokenizer::Tokenizer& tokenizer, std::span<const engine::TokenLogprob> logprobs,
                            bool first_is_null, size_t& offset, Json& out) {
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const engine::TokenLogprob& lp = logprobs[i];
    const std::string text = tokenizer.decode(std::span<const int32_t>(&lp.token, 1), false);
    out["tokens"].push_back(text);
    out["text_offset"].push_back(offset);
    offset += text.size();
    if (first_is_null && i == 0) {
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      continue;
    }
    out["token_logprobs"].push_back(lp.logprob);
    Json top = Json::object();
    for (const auto& [id, p] : lp.top) top[tokenizer.decode(std::span<const int32_t>(&id, 1), false)] = p;
    out["top_logprobs"].push_back(std::move(top));
  }
}

Json empty_legacy_logprobs() {
  return {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

}  // namespace

void handle_completions(HandlerContext ctx, const std::string& body, httplib::Response& res) {
  const ParsedRequest request = parse_completion_request(body);
  check_model(ctx, request.model);
  auto choices = std::make_shared<Choices>(ctx.model, request, ctx.admission);
  const std::string id = random_id("cmpl-");
  const int64_t created = unix_time();
  const bool want_logprobs = request.logprobs >= 0;
  const bool echo = request.echo;

  if (!request.stream) {
    const std::vector<GenerationOutcome> outcomes = choices->run(nullptr, nullptr, ctx.client_gone);
    const Generation& gen = choices->front();
    Json choice_list = Json::array();
    for (size_t i = 0; i < outcomes.size(); ++i) {
      const GenerationOutcome& outcome = outcomes[i];
      throw_if_failed(outcome);
      Json logprobs;
      std::string text = outcome.text;
      if (echo) text = gen.prompt_text() + text;
      if (want_logprobs) {
        logprobs = empty_legacy_logprobs();
        size_t offset = 0;
        if (echo) {
          // The prompt's first token has no logprob; the engine reports tokens 1..n-1.
          std::vector<engine::TokenLogprob> prompt_lps;
          prompt_lps.push_back({gen.prompt_ids().front(), 0.f, {}});
          for (const auto& lp : outcome.prompt_logprobs) prompt_lps.push_back(lp);
          append_legacy_logprobs(*ctx.model.tokenizer, prompt_lps, true, offset, logprobs);
        }
        append_legacy_logprobs(*ctx.model.tokenizer, outcome.logprobs, false, offset, logprobs);
      }
      choice_list.push_back({{"index", i}, {"text", text}, {"logprobs", std::move(logprobs)},
                             {"finish_reason", openai_finish_reason(outcome, false)}});
    }
    const Json response = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", ctx.model.id},
                           {"choices", std::move(choice_list)}, {"usage", openai_usage(combined_usage(outcomes))}};
    res.set_content(dump_json(response), "application/json");
    return;
  }

  const bool include_usage = request.include_usage;
  const HandlerContext c = ctx;
  res.set_chunked_content_provider("text/event-stream", [choices, c, id, created, include_usage, want_logprobs, echo](
                                                            size_t, httplib::DataSink& sink) {
    SseWriter sse(sink);
    std::vector<size_t> offsets(choices->size(), 0);  // where each choice's next token text starts
    auto chunk = [&](size_t index, const std::string& text, Json logprobs, Json finish) {
      Json choice = {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)},
                     {"finish_reason", std::move(finish)}};
      Json out = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", c.model.id},
                  {"choices", Json::array({std::move(choice)})}};
      if (include_usage) out["usage"] = nullptr;
      return sse.data(out);
    };
    stream_openai_choices(
        *choices, sse, {id, "text_completion", created, c.model.id, include_usage},
        [&] {
          if (echo)
            for (size_t i = 0; i < choices->size(); ++i) {
              offsets[i] += choices->front().prompt_text().size();
              chunk(i, choices->front().prompt_text(), nullptr, nullptr);
            }
        },
        [&](size_t i, std::string_view text, std::span<const engine::TokenLogprob> lps) {
          Json logprobs;
          if (want_logprobs) {
            logprobs = empty_legacy_logprobs();
            append_legacy_logprobs(*c.model.tokenizer, lps, false, offsets[i], logprobs);
          }
          return chunk(i, std::string(text), std::move(logprobs), nullptr);
        },
        [&](size_t i, const GenerationOutcome& outcome) { chunk(i, "", nullptr, openai_finish_reason(outcome, false)); });
    sink.done();
    return true;
  });
}

}  // namespace tachyon::server
