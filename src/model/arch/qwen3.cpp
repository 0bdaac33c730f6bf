// Qwen3 (https://huggingface.co/docs/transformers/model_doc/qwen3): the Llama layer with a
// per-head RMSNorm on q and on k (over head_dim, weight [head_dim]) before RoPE, an explicit
// head_dim that may differ from hidden/heads, and attention_bias on q/k/v/o when set.
// RoPE layout: rotate-half over the full head_dim.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_qwen3() {
  register_decoder_architecture({"Qwen3ForCausalLM"}, "qwen3", [](const io::ModelConfig& c) {
    DecoderSpec spec = llama_family_spec(c);
    spec.qk_norm = true;
    spec.qkv_bias = spec.o_bias = c.attention_bias;
    return spec;
  });
}

}  // namespace tachyon::model
