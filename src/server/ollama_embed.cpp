// Ollama's POST /api/embed ({"model", "input": string | [string], "truncate", "dimensions"} ->
// {"model", "embeddings": [[...]], durations, "prompt_eval_count"}) and the older
// /api/embeddings ({"model", "prompt"} -> {"embedding": [...]}), for embedding models
// (engine/embedder.h). A generation model answers 501, as before this server computed any.
#include <fmt/format.h>

#include <chrono>

#include "base/error.h"
#include "server/api_error.h"
#include "server/handlers.h"
#include "server/ollama.h"
#include "server/ollama_request.h"
#include "server/request_fields.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

const ServedModel& embedding_model(const HandlerContext& ctx, const OrderedJson& body) {
  check_model(ctx, read_ollama_model_name(body));
  if (!ctx.model.embedder)
    throw ApiError(ErrorKind::NotImplemented,
                   fmt::format("model '{}' does not support embeddings: it is a generation model (an embedding "
                               "model has a sentence-transformers pooling config, modules.json)",
                               ctx.model.id));
  return ctx.model;
}

// One text's vector; `truncate` keeps the first tokens of a text longer than the context (else 400).
std::vector<float> embed_text(const ServedModel& model, const std::string& text, bool truncate, int64_t& tokens) {
  if (text.empty()) throw ApiError::invalid("an input must not be empty", "input");
  std::vector<int32_t> ids = model.tokenizer->encode(text, /*add_special_tokens=*/true);
  if (ids.size() > static_cast<size_t>(model.max_context)) {
    if (!truncate)
      throw ApiError::invalid(fmt::format("the input has {} tokens; this model embeds at most {} (truncate is false)",
                                          ids.size(), model.max_context),
                              "input");
    ids.resize(static_cast<size_t>(model.max_context));
  }
  tokens += static_cast<int64_t>(ids.size());
  try {
    return model.embedder->embed(ids);
  } catch (const Error& e) {
    throw ApiError::invalid(e.what(), "input");
  }
}

}  // namespace

void handle_ollama_embed(HandlerContext ctx, const std::string& text, httplib::Response& res) {
  const auto start = std::chrono::steady_clock::now();
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "input", "truncate", "dimensions", "options", "keep_alive"});
  const ServedModel& model = embedding_model(ctx, body);
  const bool truncate = read_bool(body, "truncate").value_or(true);
  const int64_t full = model.embedder->dimensions();
  const int64_t dimensions = read_int(body, "dimensions", 1, full).value_or(full);
  const OrderedJson* input = find_field(body, "input");
  if (!input) throw ApiError::invalid("'input' is required", "input");
  std::vector<std::string> texts;
  if (input->is_string()) {
    texts.push_back(input->get<std::string>());
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) {
      if (!(*input)[i].is_string())
        throw ApiError::invalid(fmt::format("'{}' must be a string", index_path("input", i)), index_path("input", i));
      texts.push_back((*input)[i].get<std::string>());
    }
  } else {
    throw ApiError::invalid("'input' must be a string or a non-empty list of strings", "input");
  }
  Json embeddings = Json::array();
  int64_t tokens = 0;
  for (const std::string& t : texts) {
    std::vector<float> v = embed_text(model, t, truncate, tokens);
    if (dimensions < full) {
      v.resize(static_cast<size_t>(dimensions));
      engine::l2_normalize(v);
    }
    embeddings.push_back(std::move(v));
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  res.set_content(dump_json({{"model", model.id}, {"embeddings", std::move(embeddings)},
                             {"total_duration", ns.count()}, {"load_duration", 0}, {"prompt_eval_count", tokens}}),
                  "application/json");
}

void handle_ollama_embeddings(HandlerContext ctx, const std::string& text, httplib::Response& res) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "prompt", "options", "keep_alive", "truncate"});
  const ServedModel& model = embedding_model(ctx, body);
  int64_t tokens = 0;
  const std::vector<float> v =
      embed_text(model, require_string(body, "prompt"), read_bool(body, "truncate").value_or(true), tokens);
  res.set_content(dump_json({{"embedding", v}}), "application/json");
}

}  // namespace tachyon::server
