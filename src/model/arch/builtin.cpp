// The architectures compiled into tachyon, registered once on first use.
#include <mutex>

#include "model/registry.h"

namespace tachyon::model {

void register_llama();
void register_qwen2();
void register_qwen3();
void register_mistral();

void register_builtin_architectures() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_llama();
    register_qwen2();
    register_qwen3();
    register_mistral();
  });
}

}  // namespace tachyon::model
