// The demo model shared by the engine tests that decode it under grammars: its backend, model,
// tokenizer, token trie (for constraints) and end ids, loaded once per test binary.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine::demo_fixture {

inline const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

struct Demo {
  std::unique_ptr<kernels::Backend> backend = kernels::make_backend("cpu");
  std::unique_ptr<model::Model> model = model::load_model(kDemo, *backend);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_model_dir(kDemo);
  std::shared_ptr<const TokenVocabulary> vocab =
      std::make_shared<const TokenVocabulary>(tokenizer::token_byte_strings(tok));
  std::vector<int32_t> eos = {*tok.token_to_id("<|endoftext|>"), *tok.token_to_id("<|im_end|>")};
};
inline Demo& demo() {
  static Demo d;
  return d;
}

// One request's outcome as the tests compare it.
struct Result {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::None;
  SpecUsage spec;
};

}  // namespace tachyon::engine::demo_fixture
