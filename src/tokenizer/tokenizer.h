// Hugging Face tokenizer.json, implemented to give the same ids and text as the official
// `tokenizers` library (checked against it by tests/diff/tokenizer on real tokenizers).
//
// The pipeline, one small type per stage (see each header):
//   text -> added tokens matched (added_vocabulary.h) -> normalizer (normalizers.h)
//        -> pre-tokenizer (pre_tokenizers.h) -> model (model.h, bpe.h)
//        -> post-processor (post_processors.h) -> ids
//   ids  -> tokens -> decoder (decoders.h) -> text
//
// Loading fails closed: an unknown stage type or a malformed field throws tachyon::Error
// naming the file and the JSON path ("tokenizer.json: pre_tokenizer.pretokenizers[0].type:
// unsupported pre-tokenizer type 'Foo' ...").
//
// Invalid UTF-8 in `encode` input is replaced first, each maximal invalid subsequence by
// one U+FFFD (what Python's bytes.decode(errors="replace") or Node's Buffer.toString hand
// to Hugging Face), then encoded; it is never an error and never undefined behaviour.
//
// Unicode versions: Hugging Face's regexes (Oniguruma) know Unicode 16 and its normalizers
// Unicode 9.0, while PCRE2 and utf8proc here know other versions. Generated tables
// (unicode_compat.inc, normalization_compat.inc; see tools/) make our stages see each
// character as Hugging Face's do, so random text across all planes encodes identically.
//
// Thread safety: a Tokenizer is immutable after loading; every const method may be called
// from any number of threads at once. Copies are cheap and share the loaded state.
//
//   auto tok = Tokenizer::from_model_dir("models/tachyon-demo");
//   std::vector<int32_t> ids = tok.encode("Hello world");           // post-processor adds BOS if the file says so
//   std::string text = tok.decode(ids, /*skip_special_tokens=*/true);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tachyon::tokenizer {

struct GgufVocab;

class Tokenizer {
 public:
  // Loads a tokenizer.json file.
  static Tokenizer from_file(const std::string& tokenizer_json_path);
  // Loads dir/tokenizer.json and, if present, dir/tokenizer_config.json for bos_token,
  // eos_token and add_bos_token (these do not change encode, which follows tokenizer.json
  // exactly as Hugging Face does).
  static Tokenizer from_model_dir(const std::string& dir);
  // Parses tokenizer.json text held in memory; `source` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& source = "tokenizer.json");
  // A directory -> from_model_dir, otherwise from_file (for the CLI's TOKENIZER argument).
  static Tokenizer from_path(const std::string& path);
  // The tokenizer a GGUF file describes, giving llama.cpp's ids (gguf_tokenizer.h);
  // `source` names the file in error messages.
  static Tokenizer from_gguf(const GgufVocab& vocab, const std::string& source);

  // Text -> ids. Added tokens written in the text are matched whatever add_special_tokens
  // says; add_special_tokens only runs the post-processor's template (BOS and the like).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;

  // Ids -> text. Ids that are no token are skipped (as Hugging Face does).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The raw vocabulary piece (e.g. "Ġworld"); throws Error for an id that is no token.
  std::string id_to_token(int32_t id) const;
  // Number of distinct tokens including added tokens (Hugging Face get_vocab_size(true)).
  size_t vocab_size() const;
  bool is_special(int32_t id) const;

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<bool> add_bos_token() const;  // as tokenizer_config.json says, when it says

 struct Impl;  // opaque loaded state, shared by copies

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  friend class StreamingDecoder;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace tachyon::tokenizer
