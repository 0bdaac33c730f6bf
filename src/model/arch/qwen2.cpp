// Qwen2 (https://huggingface.co/docs/transformers/model_doc/qwen2): the Llama layer with
// biases on q/k/v (never on o), and sliding-window attention on layers
// >= max_window_layers when use_sliding_window (config.layer_types in transformers v5).
// RoPE layout: rotate-half over the full head_dim.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_qwen2() {
  register_decoder_architecture({"Qwen2ForCausalLM"}, "qwen2", [](const io::ModelConfig& c) {
    DecoderSpec spec = llama_family_spec(c);
    spec.qkv_bias = true;
    return spec;
  });
}

}  // namespace tachyon::model
