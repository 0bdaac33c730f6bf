// POST /v1/embeddings (OpenAI) for embedding models (engine/embedder.h): input as a string, a
// list of strings, a list of token ids or a list of those; encoding_format float (JSON numbers)
// or base64 (the little-endian float32 bytes, which the openai SDKs ask for by default);
// dimensions cuts each vector to its first d values and normalizes it again (Matryoshka-trained
// models such as Qwen3-Embedding keep their meaning there). A generation model answers 400.
#include <fmt/format.h>

#include <cstring>

#include "base/error.h"
#include "server/api_error.h"
#include "server/handlers.h"
#include "server/request_fields.h"
#include "server/sse.h"

namespace tachyon::server {

namespace {

inline constexpr size_t kMaxEmbeddingInputs = 2048;  // as OpenAI

std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // x86 and CUDA hosts are little-endian
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const auto b = [&](size_t k) { return k < bytes.size() ? static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])) : 0u; };
    const uint32_t v = b(i) << 16 | b(i + 1) << 8 | b(i + 2);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < bytes.size() ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// Token ids of an input that is a list of integers; nullopt when it is not one.
std::optional<std::vector<int32_t>> token_list(const OrderedJson& input, const std::string& path, int64_t vocab) {
  if (!input.is_array() || input.empty() || !input.front().is_number()) return std::nullopt;
  std::vector<int32_t> ids;
  for (const OrderedJson& id : input) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
      throw ApiError::invalid(fmt::format("'{}' token ids must be integers in [0, {})", path, vocab), path);
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// Every input as token ids.
std::vector<std::vector<int32_t>> read_inputs(const OrderedJson& body, const ServedModel& model) {
  const OrderedJson* input = find_field(body, "input");
  if (!input) throw ApiError::invalid("'input' is required", "input");
  auto text_ids = [&](const OrderedJson& text, const std::string& path) {
    if (text.get<std::string>().empty()) throw ApiError::invalid(fmt::format("'{}' must not be empty", path), path);
    return model.tokenizer->encode(text.get<std::string>(), /*add_special_tokens=*/true);
  };
  std::vector<std::vector<int32_t>> out;
  if (input->is_string()) {
    out.push_back(text_ids(*input, "input"));
  } else if (auto ids = token_list(*input, "input", model.vocab_size)) {
    out.push_back(std::move(*ids));
  } else if (input->is_array() && !input->empty()) {
    if (input->size() > kMaxEmbeddingInputs)
      throw ApiError::invalid(fmt::format("'input' has {} items; at most {}", input->size(), kMaxEmbeddingInputs), "input");
    for (size_t i = 0; i < input->size(); ++i) {
      const std::string path = index_path("input", i);
      const OrderedJson& item = (*input)[i];
      if (item.is_string()) out.push_back(text_ids(item, path));
      else if (auto item_ids = token_list(item, path, model.vocab_size)) out.push_back(std::move(*item_ids));
      else throw ApiError::invalid(fmt::format("'{}' must be a string or a non-empty list of token ids", path), path);
    }
  } else {
    throw ApiError::invalid("'input' must be a string, a list of strings, or token ids", "input");
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].size() > static_cast<size_t>(model.max_context))
      throw ApiError::invalid(fmt::format("input {} has {} tokens; this model embeds at most {}", i, out[i].size(),
                                          model.max_context),
                              "input", "context_length_exceeded");
  return out;
}

}  // namespace

void handle_embeddings(HandlerContext ctx, const std::string& text, httplib::Response& res) {
  const OrderedJson body = parse_body(text);
  reject_unknown_fields(body, {"model", "input", "encoding_format", "dimensions", "user"});
  check_model(ctx, require_string(body, "model"));
  const ServedModel& model = ctx.model;
  if (!model.embedder)
    throw ApiError::invalid(fmt::format("model '{}' does not support embeddings: it is a generation model (an "
                                        "embedding model has a sentence-transformers pooling config, modules.json)",
                                        model.id),
                            "model");
  const std::string format = read_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw ApiError::invalid(fmt::format("'encoding_format' must be 'float' or 'base64', got '{}'", format),
                            "encoding_format");
  const int64_t full = model.embedder->dimensions();
  const int64_t dimensions = read_int(body, "dimensions", 1, full).value_or(full);
  read_string(body, "user");
  const std::vector<std::vector<int32_t>> inputs = read_inputs(body, model);

  if (!ctx.admission.try_enter())
    throw ApiError(ErrorKind::RateLimit, "the server is at capacity; retry shortly", "", "rate_limit_exceeded");
  struct Leave {
    Admission& a;
    ~Leave() { a.leave(); }
  } leave{ctx.admission};

  Json data = Json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<float> v;
    try {
      v = model.embedder->embed(inputs[i]);
    } catch (const Error& e) {
      throw ApiError::invalid(fmt::format("input {}: {}", i, e.what()), "input");
    }
    if (dimensions < full) {
      v.resize(static_cast<size_t>(dimensions));
      engine::l2_normalize(v);
    }
    tokens += static_cast<int64_t>(inputs[i].size());
    data.push_back({{"object", "embedding"}, {"index", i},
                    {"embedding", format == "base64" ? Json(base64_floats(v)) : Json(v)}});
  }
  res.set_content(dump_json({{"object", "list"}, {"data", std::move(data)}, {"model", model.id},
                             {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}),
                  "application/json");
}

}  // namespace tachyon::server
