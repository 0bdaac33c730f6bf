#include "tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <unordered_map>

#include "base/error.h"
#include "base/json.h"
#include "base/logging.h"
#include "tokenizer/bpe.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/gguf_special_split.h"
#include "tokenizer/gguf_spm.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {

namespace {

using Type = GgufTokenType;

// Token texts llama.cpp takes for the end-of-turn token when the file names none.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",  "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "[EOT]",    "<｜end▁of▁sentence｜>",          "<end_of_utterance>",
};
// Token texts that end generation whatever the file says (llama.cpp's text list), so that a
// chat turn stops at its end marker.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>",     "<|call|>",         "<|flush|>",
    "<|calls|>",  "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>",       "<EOT>",
    "_<EOT>",     "[EOT]",      "[EOS]",   "<|end_of_text|>", "<end_of_utterance>", "<eos>",
    "<turn|>",    "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
};
// gpt-oss (harmony) markers that llama.cpp always renders as text: user-defined tokens.
constexpr std::string_view kHarmonyRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

template <size_t N>
bool one_of(const std::string& text, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

// The vocabulary checked and with llama.cpp's adjustments of token types applied.
struct Resolved {
  bool spm = false;
  std::vector<std::string> texts;
  std::vector<Type> types;
  std::optional<int32_t> bos, eos, eot, eom, unk, pad;
  bool add_bos = false, add_eos = false;
  std::set<int32_t> end_of_generation;
};

std::optional<int32_t> checked_id(const std::optional<int64_t>& id, const char* key, size_t n_tokens) {
  if (!id) return std::nullopt;
  if (*id < 0 || static_cast<uint64_t>(*id) >= n_tokens)
    throw Error("tokenizer.ggml.{} = {} is not a token id (the vocabulary has {} tokens)", key, *id, n_tokens);
  return static_cast<int32_t>(*id);
}

Type to_type(int32_t value) {
  return value >= 0 && value <= 6 ? static_cast<Type>(value) : Type::kUndefined;
}

Resolved resolve(const GgufVocab& v) {
  Resolved r;
  if (v.model == "llama") {
    r.spm = true;
  } else if (v.model != "gpt2") {
    throw Error("tokenizer.ggml.model '{}' is not supported (supported: gpt2 = byte-level BPE, llama = "
                "SentencePiece)",
                v.model);
  }
  const size_t n = v.tokens.size();
  if (n == 0) throw Error("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw Error("tokenizer.ggml.tokens has {} entries, more than token ids can number", n);
  if (!v.scores.empty() && v.scores.size() != n)
    throw Error("tokenizer.ggml.scores has {} entries for {} tokens", v.scores.size(), n);
  if (!v.token_types.empty() && v.token_types.size() != n)
    throw Error("tokenizer.ggml.token_type has {} entries for {} tokens", v.token_types.size(), n);

  r.texts.reserve(n);
  std::unordered_map<std::string_view, int32_t> seen;
  seen.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp names empty tokens this way (they can never match text).
    r.texts.push_back(v.tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : v.tokens[i]);
  }
  for (size_t i = 0; i < n; ++i) {
    auto [it, fresh] = seen.emplace(r.texts[i], static_cast<int32_t>(i));
    if (!fresh)
      throw Error("tokenizer.ggml.tokens[{}] repeats token {} ({})", i, it->second, Json(r.texts[i]).dump());
  }
  r.types.resize(n, Type::kNormal);
  for (size_t i = 0; i < v.token_types.size(); ++i) r.types[i] = to_type(v.token_types[i]);

  r.bos = checked_id(v.bos_id, "bos_token_id", n);
  r.eos = checked_id(v.eos_id, "eos_token_id", n);
  r.eot = checked_id(v.eot_id, "eot_token_id", n);
  r.eom = checked_id(v.eom_id, "eom_token_id", n);
  r.unk = checked_id(v.unk_id, "unknown_token_id", n);
  r.pad = checked_id(v.pad_id, "padding_token_id", n);
  (void)checked_id(v.sep_id, "seperator_token_id", n);
  if (r.spm) {
    // SentencePiece defaults (llama.cpp): <unk> 0, <s> 1, </s> 2; BOS added unless told.
    if (!r.bos && n > 1) r.bos = 1;
    if (!r.eos && n > 2) r.eos = 2;
    if (!r.unk) r.unk = 0;
  }
  r.add_bos = v.add_bos.value_or(r.spm);
  r.add_eos = v.add_eos.value_or(false);
  if (r.add_bos && !r.bos) throw Error("tokenizer.ggml.add_bos_token is true but there is no bos_token_id");
  if (r.add_eos && !r.eos) throw Error("tokenizer.ggml.add_eos_token is true but there is no eos_token_id");

  // Tokens found by their text are forced to control type, as llama.cpp does.
  auto force_control = [&](int32_t id) { r.types[static_cast<size_t>(id)] = Type::kControl; };
  for (size_t i = 0; i < n && !r.eot; ++i)
    if (one_of(r.texts[i], kEotTexts)) r.eot = static_cast<int32_t>(i);
  if (r.eot && !v.eot_id) force_control(*r.eot);
  if (!r.eom)
    if (auto it = seen.find("<|eom_id|>"); it != seen.end()) {
      r.eom = it->second;
      force_control(it->second);
    }
  for (size_t i = 0; i < n; ++i) {
    if (!one_of(r.texts[i], kEndOfGenerationTexts)) continue;
    r.end_of_generation.insert(static_cast<int32_t>(i));
    force_control(static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < n; ++i)
    if (one_of(r.texts[i], kHarmonyRenderedTexts)) r.types[i] = Type::kUserDefined;
  for (const auto& id : {r.eos, r.eot, r.eom})
    if (id) r.end_of_generation.insert(*id);
  auto eog_text = [&](std::string_view text) -> std::optional<int32_t> {
    for (int32_t id : r.end_of_generation)
      if (r.texts[static_cast<size_t>(id)] == text) return id;
    return std::nullopt;
  };
  // Harmony and Solar Open: <|end|> closes a message, not the generation, when <|return|>
  // and <|call|> (or <|calls|> and <|flush|>) exist; it is then rendered as text.
  if (auto end = eog_text("<|end|>");
      end && ((eog_text("<|return|>") && eog_text("<|call|>")) || (eog_text("<|calls|>") && eog_text("<|flush|>")))) {
    r.end_of_generation.erase(*end);
    r.types[static_cast<size_t>(*end)] = Type::kUserDefined;
  }
  // Gemma 4: </s> is ordinary text when <|tool_response> exists.
  if (auto s = eog_text("</s>"); s && eog_text("<|tool_response>")) {
    r.end_of_generation.erase(*s);
    r.types[static_cast<size_t>(*s)] = Type::kNormal;
  }
  return r;
}

bool is_special_type(Type t) { return t == Type::kControl || t == Type::kUserDefined || t == Type::kUnknown; }

// Adds BOS/EOS around the ids when encode's add_special_tokens asks for them.
class BosEos : public PostProcessor {
 public:
  BosEos(std::optional<int32_t> bos, std::optional<int32_t> eos) : bos_(bos), eos_(eos) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    if (bos_) ids.insert(ids.begin(), *bos_);
    if (eos_) ids.push_back(*eos_);
  }

 private:
  std::optional<int32_t> bos_, eos_;
};

std::unique_ptr<Model> make_bpe(const GgufVocab& v, const Resolved& r, bool ignore_merges) {
  if (v.merges.empty()) throw Error("tokenizer.ggml.merges is missing or empty (a gpt2 tokenizer needs its merges)");
  ModelTables tables;
  tables.vocab.reserve(r.texts.size());
  for (size_t i = 0; i < r.texts.size(); ++i) tables.vocab.emplace_back(r.texts[i], static_cast<int32_t>(i));
  tables.merges.reserve(v.merges.size());
  for (size_t i = 0; i < v.merges.size(); ++i) {
    const std::string& merge = v.merges[i];
    // llama.cpp splits at the first space after the first byte.
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (space == std::string::npos)
      throw Error("tokenizer.ggml.merges[{}] {} is not two tokens separated by a space", i, Json(merge).dump());
    tables.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  tables.has_merges = true;
  const Json model = {{"type", "BPE"}, {"ignore_merges", ignore_merges}};
  return BpeModel::from_json(model, "tokenizer.ggml", &tables);
}

std::unique_ptr<PreTokenizer> make_byte_level_splits(const GgufPreTokenizer& pre) {
  Json steps = Json::array();
  for (const std::string& regex : pre.regexes)
    steps.push_back({{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}});
  steps.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}});
  return make_pre_tokenizer(Json{{"type", "Sequence"}, {"pretokenizers", steps}},
                            "tokenizer.ggml.pre '" + pre.family + "'");
}

std::unique_ptr<Decoder> make_spm_decoder(bool add_space_prefix) {
  Json steps = Json::array();
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}});
  steps.push_back({{"type", "ByteFallback"}});
  steps.push_back({{"type", "Fuse"}});
  // The space add_space_prefix put before the text is not part of it.
  if (add_space_prefix) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return make_decoder(Json{{"type", "Sequence"}, {"decoders", steps}}, "decoder");
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufVocab& v, const std::string& source) {
  try {
    Resolved r = resolve(v);
    auto impl = std::make_shared<Impl>();

    Json added = Json::array();
    std::vector<GgufSpecialSplitter::Special> specials;
    for (size_t i = 0; i < r.texts.size(); ++i) {
      if (!is_special_type(r.types[i])) continue;
      if (!unicode::is_valid_utf8(r.texts[i]))
        throw Error("tokenizer.ggml.tokens[{}]: special token text is not valid UTF-8", i);
      const bool hidden = r.types[i] != Type::kUserDefined;  // skipped by decode(ids, true)
      added.push_back({{"id", static_cast<int32_t>(i)}, {"content", r.texts[i]}, {"special", hidden},
                       {"normalized", false}});
      specials.push_back({r.texts[i], static_cast<int32_t>(i)});
    }
    impl->added = AddedVocabulary::from_json(added, "tokenizer.ggml.tokens", nullptr);
    impl->special_splitter = std::make_unique<GgufSpecialSplitter>(std::move(specials));

    if (r.spm) {
      const bool add_space_prefix = v.add_space_prefix.value_or(true);
      std::vector<float> scores = v.scores;
      scores.resize(r.texts.size(), 0.0f);
      impl->pre_tokenizer = std::make_unique<GgufSpmEscape>(add_space_prefix);
      impl->model = std::make_unique<GgufSpmModel>(r.texts, std::move(scores), r.unk.value_or(-1));
      impl->decoder = make_spm_decoder(add_space_prefix);
    } else {
      if (v.pre.empty())
        log::warn("{}: no tokenizer.ggml.pre; splitting words with llama.cpp's 'default' regexes, which may not be "
                  "those the model was trained with",
                  source);
      const GgufPreTokenizer pre = gguf_pre_tokenizer(v.pre);
      impl->pre_tokenizer = make_byte_level_splits(pre);
      impl->model = make_bpe(v, r, pre.ignore_merges);
      impl->decoder = make_decoder(Json{{"type", "ByteLevel"}}, "decoder");
    }
    impl->post_processor =
        std::make_unique<BosEos>(r.add_bos ? r.bos : std::nullopt, r.add_eos ? r.eos : std::nullopt);
    impl->bos_id = r.bos;
    impl->eos_id = r.eos;
    impl->add_bos_token = r.add_bos;
    impl->vocab_size_with_added = impl->model->vocab_size();
    return Tokenizer(std::move(impl));
  } catch (const Error& e) {
    throw Error("{}: {}", source, e.what());
  } catch (const Json::exception& e) {
    throw Error("{}: {}", source, e.what());
  }
}

std::vector<int32_t> gguf_end_of_generation_ids(const GgufVocab& vocab) {
  const Resolved r = resolve(vocab);
  return {r.end_of_generation.begin(), r.end_of_generation.end()};
}

std::optional<int32_t> gguf_eot_id(const GgufVocab& vocab) { return resolve(vocab).eot; }

}  // namespace tachyon::tokenizer
