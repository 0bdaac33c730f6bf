// The tokenizer and chat template of a model path, whatever its kind: the one place the CLI and
// the server create them. A model folder: tokenizer.json and tokenizer_config.json's template;
// a GGUF file (or a folder holding one): its tokenizer.ggml.* metadata and
// tokenizer.chat_template (cli/gguf_tokenizer.h), with llama.cpp's end-of-generation ids.
//
//   const ModelText text = load_model_text(resolved.path);
//   if (text.tokenizer) ids = text.tokenizer->encode(prompt);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

struct ModelText {
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;    // null: a folder without tokenizer.json
  std::shared_ptr<const chat::ChatTemplate> chat_template;  // null: none (chat_template_error says why)
  std::string chat_template_error;
  std::vector<int32_t> end_of_generation_ids;  // GGUF: EOS, EOT and end-of-turn tokens; folders: empty
};

// `need_tokenizer`: a folder without tokenizer.json is an Error (else tokenizer stays null).
ModelText load_model_text(const std::string& path, bool need_tokenizer = true);

}  // namespace tachyon::cli
