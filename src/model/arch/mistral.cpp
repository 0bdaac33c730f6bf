// Mistral (https://huggingface.co/docs/transformers/model_doc/mistral): the Llama layer with
// sliding-window attention on every layer when sliding_window is set (key k visible to
// query q iff q − W < k ≤ q), no biases.
// RoPE layout: rotate-half over the full head_dim.
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_mistral() {
  register_decoder_architecture({"MistralForCausalLM"}, "mistral", [](const io::ModelConfig& c) {
    return llama_family_spec(c);
  });
}

}  // namespace tachyon::model
