#include "cli/gguf_tokenizer.h"

#include <limits>

#include "base/error.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tachyon::cli {

namespace {

std::vector<std::string> strings_of(const io::GgufValue& value) {
  std::vector<std::string> out;
  const auto views = value.as_strings();
  out.reserve(views.size());
  for (std::string_view s : views) out.emplace_back(s);
  return out;
}

std::optional<int64_t> optional_int(const io::GgufFile& file, std::string_view key) {
  const io::GgufValue* v = file.find(key);
  return v ? std::optional<int64_t>(v->as_int()) : std::nullopt;
}

std::optional<bool> optional_bool(const io::GgufFile& file, std::string_view key) {
  const io::GgufValue* v = file.find(key);
  return v ? std::optional<bool>(v->as_bool()) : std::nullopt;
}

std::string token_text(const tokenizer::Tokenizer& tok, std::optional<int32_t> id) {
  return id ? tok.id_to_token(*id) : std::string();
}

}  // namespace

tokenizer::GgufVocab read_gguf_vocab(const io::GgufFile& file) {
  tokenizer::GgufVocab v;
  try {
    v.model = std::string(file.get("tokenizer.ggml.model").as_string());
    if (const io::GgufValue* pre = file.find("tokenizer.ggml.pre")) v.pre = std::string(pre->as_string());
    v.tokens = strings_of(file.get("tokenizer.ggml.tokens"));
    if (const io::GgufValue* scores = file.find("tokenizer.ggml.scores")) v.scores = scores->as_f32s();
    if (const io::GgufValue* types = file.find("tokenizer.ggml.token_type")) {
      for (int64_t t : types->as_ints()) {
        if (t < std::numeric_limits<int32_t>::min() || t > std::numeric_limits<int32_t>::max())
          throw Error("tokenizer.ggml.token_type: value {} is not a token type", t);
        v.token_types.push_back(static_cast<int32_t>(t));
      }
    }
    if (const io::GgufValue* merges = file.find("tokenizer.ggml.merges")) v.merges = strings_of(*merges);
    v.bos_id = optional_int(file, "tokenizer.ggml.bos_token_id");
    v.eos_id = optional_int(file, "tokenizer.ggml.eos_token_id");
    v.eot_id = optional_int(file, "tokenizer.ggml.eot_token_id");
    v.eom_id = optional_int(file, "tokenizer.ggml.eom_token_id");
    v.unk_id = optional_int(file, "tokenizer.ggml.unknown_token_id");
    v.sep_id = optional_int(file, "tokenizer.ggml.seperator_token_id");
    v.pad_id = optional_int(file, "tokenizer.ggml.padding_token_id");
    v.add_bos = optional_bool(file, "tokenizer.ggml.add_bos_token");
    v.add_eos = optional_bool(file, "tokenizer.ggml.add_eos_token");
    v.add_space_prefix = optional_bool(file, "tokenizer.ggml.add_space_prefix");
  } catch (const Error& e) {
    throw Error("{}: {}", file.path(), e.what());
  }
  return v;
}

GgufTokenizer load_gguf_tokenizer(const io::GgufFile& file) {
  const tokenizer::GgufVocab vocab = read_gguf_vocab(file);
  GgufTokenizer out;
  auto tok = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(vocab, file.path()));
  out.end_of_generation_ids = tokenizer::gguf_end_of_generation_ids(vocab);
  if (const io::GgufValue* tpl = file.find("tokenizer.chat_template")) {
    auto id_of = [&](const std::optional<int64_t>& id) -> std::optional<int32_t> {
      if (!id) return std::nullopt;
      return static_cast<int32_t>(*id);  // in range: from_gguf checked it
    };
    try {
      auto chat = chat::ChatTemplate::from_string(std::string(tpl->as_string()), token_text(*tok, tok->bos_id()),
                                                  token_text(*tok, tok->eos_id()));
      Json specials = Json::object();
      if (auto pad = id_of(vocab.pad_id)) specials["pad_token"] = tok->id_to_token(*pad);
      if (auto unk = id_of(vocab.unk_id)) specials["unk_token"] = tok->id_to_token(*unk);
      chat.set_special_tokens(specials);
      // convert_hf_to_gguf.py writes a list of named templates as tokenizer.chat_template.<name>.
      if (const io::GgufValue* tool_use = file.find("tokenizer.chat_template.tool_use"))
        chat.set_tool_use_template(std::string(tool_use->as_string()));
      out.chat_template = std::make_shared<const chat::ChatTemplate>(std::move(chat));
    } catch (const Error& e) {
      throw Error("{}: tokenizer.chat_template: {}", file.path(), e.what());
    }
  }
  out.tokenizer = std::move(tok);
  return out;
}

GgufTokenizer load_gguf_tokenizer(const std::string& gguf_path) {
  return load_gguf_tokenizer(*io::GgufFile::open(gguf_path));
}

}  // namespace tachyon::cli
