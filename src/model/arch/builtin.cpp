// The architectures compiled into tachyon, registered once on first use.
#include <mutex>

#include "model/registry.h"

namespace tachyon::model {

void register_llama();
void register_qwen2();
void register_qwen3();
void register_mistral();
void register_gemma3();
void register_qwen3_moe();
void register_gpt_oss();
void register_deepseek_v3();
void register_qwen3_next();

void register_builtin_architectures() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_llama();
    register_qwen2();
    register_qwen3();
    register_mistral();
    register_gemma3();
    register_qwen3_moe();
    register_gpt_oss();
    register_deepseek_v3();
    register_qwen3_next();
  });
}

}  // namespace tachyon::model
