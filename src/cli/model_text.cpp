#include "cli/model_text.h"

#include <filesystem>

#include "base/error.h"
#include "cli/gguf_tokenizer.h"
#include "io/gguf_config.h"

namespace tachyon::cli {

ModelText load_model_text(const std::string& path, bool need_tokenizer) {
  ModelText text;
  if (const auto gguf = io::gguf_model_file(path)) {
    GgufTokenizer g = load_gguf_tokenizer(*gguf);
    text.tokenizer = std::move(g.tokenizer);
    text.chat_template = std::move(g.chat_template);
    if (!text.chat_template) text.chat_template_error = *gguf + ": no tokenizer.chat_template in the GGUF metadata";
    text.end_of_generation_ids = std::move(g.end_of_generation_ids);
    return text;
  }
  if (need_tokenizer || std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json"))
    text.tokenizer = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::from_model_dir(path));
  try {
    text.chat_template = std::make_shared<const chat::ChatTemplate>(chat::ChatTemplate::from_model_dir(path));
  } catch (const Error& e) {
    text.chat_template_error = e.what();
  }
  return text;
}

}  // namespace tachyon::cli
