#include "tokenizer/tokenizer.h"

#include <filesystem>

#include "base/error.h"
#include "base/json.h"
#include "base/logging.h"
#include "tokenizer/decoders.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processors.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

std::shared_ptr<Tokenizer::Impl> load_impl(std::string_view text, const std::string& path, bool allow_scan = true) {
  // Big BPE tables bypass the JSON DOM (json_scan.h); anything unusual takes the plain path.
  ModelTables tables;
  const bool scanned = allow_scan && text.size() > (1 << 20) && scan_model_tables(text, &tables);
  const Json doc = parse_json(scanned ? std::string_view(tables.rest) : text, path);
  if (scanned) {
    const Json* model = doc.is_object() && doc.contains("model") ? &doc["model"] : nullptr;
    const bool is_bpe = model && model->is_object() &&
                        (model->contains("type") ? (*model)["type"] == "BPE" : model->contains("merges"));
    if (!is_bpe) return load_impl(text, path, false);  // not a BPE model after all
  }
  auto impl = std::make_shared<Tokenizer::Impl>();
  try {
    require_object(doc, "(root)");
    for (const char* key : {"truncation", "padding"}) {
      if (optional_field(doc, key, ""))
        log::warn("{}: '{}' is set; tachyon encodes single prompts and ignores it", path, key);
    }
    impl->normalizer = make_normalizer(doc.value("normalizer", Json()), "normalizer");
    impl->pre_tokenizer = make_pre_tokenizer(doc.value("pre_tokenizer", Json()), "pre_tokenizer");
    impl->model = make_model(require_field(doc, "model", ""), "model", scanned ? &tables : nullptr);
    impl->post_processor = make_post_processor(doc.value("post_processor", Json()), "post_processor");
    impl->decoder = make_decoder(doc.value("decoder", Json()), "decoder");
    impl->added = AddedVocabulary::from_json(doc.value("added_tokens", Json()), "added_tokens", impl->normalizer.get());
  } catch (const Error& e) {
    throw Error("{}: {}", path, e.what());
  } catch (const Json::exception& e) {  // a value of the wrong JSON type deep inside a stage
    throw Error("{}: {}", path, e.what());
  }
  size_t extra = 0;
  for (const AddedToken& t : impl->added.tokens())
    if (!impl->model->token_to_id(t.content)) ++extra;
  impl->vocab_size_with_added = impl->model->vocab_size() + extra;
  return impl;
}

// bos_token / eos_token are a string or an AddedToken object {"content": ...}.
std::optional<std::string> special_token_name(const Json& config, const char* key, const std::string& file) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw Error("{}: {}: expected a string or an object with \"content\", got {}", file, key, it->dump());
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& tokenizer_json_path) {
  return Tokenizer(load_impl(read_file(tokenizer_json_path), tokenizer_json_path));
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& source) {
  return Tokenizer(load_impl(json_text, source));
}

Tokenizer Tokenizer::from_model_dir(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::string json_path = (root / "tokenizer.json").string();
  auto impl = load_impl(read_file(json_path), json_path);
  const std::filesystem::path config_path = root / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    const std::string file = config_path.string();
    const Json config = parse_json(read_file(file), file);
    if (!config.is_object()) throw Error("{}: expected a JSON object", file);
    auto resolve = [&](const char* key) -> std::optional<int32_t> {
      auto name = special_token_name(config, key, file);
      if (!name) return std::nullopt;
      auto id = impl->added.token_to_id(*name);
      if (!id) id = impl->model->token_to_id(*name);
      if (!id) throw Error("{}: {} '{}' is not a token of {}/tokenizer.json", file, key, *name, dir);
      return id;
    };
    impl->bos_id = resolve("bos_token");
    impl->eos_id = resolve("eos_token");
    if (auto it = config.find("add_bos_token"); it != config.end() && !it->is_null()) {
      if (!it->is_boolean()) throw Error("{}: add_bos_token: expected a boolean, got {}", file, it->dump());
      impl->add_bos_token = it->get<bool>();
    }
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_path(const std::string& path) {
  return std::filesystem::is_directory(path) ? from_model_dir(path) : from_file(path);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::string sanitized;
  if (!unicode::is_valid_utf8(text)) {
    sanitized = unicode::sanitize_utf8(text);
    text = sanitized;
  }
  Pieces pieces;
  if (impl_->special_splitter) {
    impl_->special_splitter->split(text, pieces);
  } else {
    impl_->added.split_and_normalize(text, impl_->normalizer.get(), pieces);
  }
  if (impl_->pre_tokenizer) impl_->pre_tokenizer->pre_tokenize(pieces);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const Piece& p : pieces) {
    if (p.token_id >= 0) {
      ids.push_back(p.token_id);
    } else {
      impl_->model->tokenize(p.text, ids);
    }
  }
  if (impl_->post_processor) impl_->post_processor->process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* token = impl_->token_of(id);
    if (!token) continue;
    if (skip_special_tokens && impl_->added.is_special_content(*token)) continue;
    tokens.push_back(*token);
  }
  if (impl_->decoder) {
    impl_->decoder->decode_chain(tokens);
    std::string out;
    for (const std::string& t : tokens) out.append(t);
    return out;
  }
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out.push_back(' ');
    out.append(tokens[i]);
  }
  return out;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  if (!token) throw Error("token id {} is not in the vocabulary (size {})", id, vocab_size());
  return *token;
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size_with_added; }

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.find_by_id(id);
  return t && t->special;
}

std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }
std::optional<bool> Tokenizer::add_bos_token() const { return impl_->add_bos_token; }

}  // namespace tachyon::tokenizer
