// The tokenizer and chat template of a GGUF file, for the CLI and the server: everything a
// .gguf path needs besides the weights (io/gguf.h reads the file; tokenizer::Tokenizer::
// from_gguf builds the tokenizer with llama.cpp's rules, tokenizer/gguf_tokenizer.h).
//
//   auto text = cli::load_gguf_tokenizer(*io::GgufFile::open("model.gguf"));
//   auto ids = text.tokenizer->encode(text.chat_template->render(messages, tools, true));
//
// The chat template is `tokenizer.chat_template` (and `tokenizer.chat_template.tool_use`, used
// when tools are given, as a directory's named "tool_use" template), rendered with bos_token /
// eos_token / pad_token / unk_token set to the texts of those tokens, as the Hugging Face
// directory's tokenizer_config.json would give them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "io/gguf.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

struct GgufTokenizer {
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::shared_ptr<const chat::ChatTemplate> chat_template;  // null when the file has no tokenizer.chat_template
  std::vector<int32_t> end_of_generation_ids;               // EOS, EOT and end-of-turn markers (llama.cpp's EOG set)
};

// The tokenizer.ggml.* keys as plain data. Throws Error naming the file and key when a key
// the tokenizer needs is missing or has the wrong type.
tokenizer::GgufVocab read_gguf_vocab(const io::GgufFile& file);

GgufTokenizer load_gguf_tokenizer(const io::GgufFile& file);
GgufTokenizer load_gguf_tokenizer(const std::string& gguf_path);

}  // namespace tachyon::cli
