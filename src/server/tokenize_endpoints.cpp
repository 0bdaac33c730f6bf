// POST /tokenize and /detokenize, in the shapes llama-server and vLLM accept (Ollama has none):
//   llama-server: {"content", "add_special", "with_pieces"}  -> {"tokens": [id | {"id", "piece"}]}
//                 {"tokens"}                                 -> {"content"}
//   vLLM:         {"prompt", "add_special_tokens", "return_token_strs"}, or {"messages", "tools",
//                 "add_generation_prompt", "continue_final_message", "chat_template_kwargs"} (the chat
//                 template rendered)  -> {"tokens", "count", "max_model_len", "token_strs"}
//                 {"tokens"}          -> {"prompt"}
// Both answers carry every key, so either client reads its own.
#include <fmt/format.h>

#include "server/api_error.h"
#include "server/handlers.h"
#include "server/request_fields.h"
#include "server/sse.h"
#include "tokenizer/token_bytes.h"

namespace tachyon::server {

namespace {

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += len;
  }
  return true;
}

// llama-server's piece: the token's text, or its bytes when they are not valid UTF-8 alone.
Json piece_json(const tokenizer::Tokenizer& tokenizer, int32_t id) {
  std::string bytes = tokenizer::token_byte_string(tokenizer, id);
  if (bytes.empty()) bytes = tokenizer.decode(std::span<const int32_t>(&id, 1), false);  // special tokens
  if (valid_utf8(bytes)) return bytes;
  Json out = Json::array();
  for (unsigned char b : bytes) out.push_back(static_cast<int>(b));
  return out;
}

// The ids of a chat conversation as /v1/chat/completions would render it.
std::vector<int32_t> tokenize_messages(const ServedModel& model, const OrderedJson& body) {
  OrderedJson chat = {{"model", model.id}, {"messages", body["messages"]}};
  for (const char* key : {"tools", "chat_template_kwargs", "add_generation_prompt", "continue_final_message"})
    if (const OrderedJson* v = find_field(body, key)) chat[key] = *v;
  Prompt prompt = build_prompt(model, parse_chat_request(chat.dump()));
  if (read_bool(body, "add_special_tokens").value_or(false) && model.tokenizer->bos_id() &&
      (prompt.ids.empty() || prompt.ids.front() != *model.tokenizer->bos_id()))
    prompt.ids.insert(prompt.ids.begin(), *model.tokenizer->bos_id());
  return prompt.ids;
}

}  // namespace

void handle_tokenize(HandlerContext ctx, const std::string& text, httplib::Response& res) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "content", "prompt", "messages", "add_special", "add_special_tokens",
                               "with_pieces", "parse_special", "return_token_strs", "tools", "chat_template_kwargs",
                               "add_generation_prompt", "continue_final_message"});
  if (auto name = read_string(body, "model")) check_model(ctx, *name);
  const ServedModel& model = ctx.model;
  const int given = (find_field(body, "content") ? 1 : 0) + (find_field(body, "prompt") ? 1 : 0) +
                    (find_field(body, "messages") ? 1 : 0);
  if (given != 1)
    throw ApiError::invalid("give exactly one of 'content' (llama-server), 'prompt' or 'messages' (vLLM)", "content");
  if (read_bool(body, "parse_special").value_or(true) == false)
    throw ApiError::invalid("'parse_special': false is not supported; special tokens in the text are always parsed",
                            "parse_special");

  std::vector<int32_t> ids;
  if (find_field(body, "messages")) {
    ids = tokenize_messages(model, body);
  } else {
    // llama-server adds no special tokens by default, vLLM does for a prompt.
    const bool llama = find_field(body, "content") != nullptr;
    const std::string key = llama ? "content" : "prompt";
    const std::string input = require_string(body, key);
    const bool add_special = llama ? read_bool(body, "add_special").value_or(false)
                                   : read_bool(body, "add_special_tokens").value_or(true);
    ids = model.tokenizer->encode(input, add_special);
  }

  Json tokens = Json::array();
  if (read_bool(body, "with_pieces").value_or(false)) {
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", piece_json(*model.tokenizer, id)}});
  } else {
    for (int32_t id : ids) tokens.push_back(id);
  }
  Json out = {{"tokens", std::move(tokens)}, {"count", ids.size()}, {"max_model_len", model.max_context}};
  if (read_bool(body, "return_token_strs").value_or(false)) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(model.tokenizer->id_to_token(id));
    out["token_strs"] = std::move(strs);
  }
  res.set_content(dump_json(out), "application/json");
}

void handle_detokenize(HandlerContext ctx, const std::string& text, httplib::Response& res) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "tokens"});
  if (auto name = read_string(body, "model")) check_model(ctx, *name);
  const OrderedJson& tokens = require_array(body, "tokens");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string path = index_path("tokens", i);
    const OrderedJson& t = tokens[i];
    // llama-server's /tokenize with_pieces answer may be sent back as it is.
    const OrderedJson& id = t.is_object() && t.contains("id") ? t["id"] : t;
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= ctx.model.vocab_size)
      throw ApiError::invalid(fmt::format("'{}' must be a token id in [0, {})", path, ctx.model.vocab_size), path);
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  const std::string decoded = ctx.model.tokenizer->decode(ids, /*skip_special_tokens=*/false);
  res.set_content(dump_json({{"content", decoded}, {"prompt", decoded}}), "application/json");
}

}  // namespace tachyon::server
