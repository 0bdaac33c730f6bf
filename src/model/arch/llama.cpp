// Llama (https://huggingface.co/docs/transformers/model_doc/llama; Llama 3 rope scaling).
//   x = embed(ids)
//   per layer: x += o(Attn(RoPE(q(n)), RoPE(k(n)), v(n))), n = RMSNorm(x)
//              x += down(silu(gate(n)) ⊙ up(n)),          n = RMSNorm(x)
//   logits = lm_head(RMSNorm(x))
// Config: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, head_dim (default hidden/heads), rms_norm_eps, rope (default | linear |
//   dynamic | llama3 | yarn), attention_bias (q/k/v/o biases), mlp_bias (unsupported:
//   refused), tie_word_embeddings.
// RoPE layout: rotate-half over the full head_dim.
#include "base/error.h"
#include "model/blocks/decoder.h"
#include "model/registry.h"

namespace tachyon::model {

void register_llama() {
  register_decoder_architecture({"LlamaForCausalLM"}, "llama", [](const io::ModelConfig& c) {
    if (c.raw.value("mlp_bias", false)) throw Error("{}: mlp_bias=true is not supported", c.path);
    DecoderSpec spec = llama_family_spec(c);
    spec.qkv_bias = spec.o_bias = c.attention_bias;
    return spec;
  });
}

}  // namespace tachyon::model
