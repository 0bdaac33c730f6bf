// A GGUF file's hyper-parameters as the config.json our registry reads.
//
// llama.cpp's converter writes a model's config.json as `{arch}.*` metadata keys (see its
// llama-arch.cpp). gguf_hf_config() writes them back under their Hugging Face names, with the
// `model_type` and `architectures` the registry expects, so that parse_model_config() and the
// architecture files (which read arch-specific keys from `raw`) see a GGUF model exactly as
// they see the same model's safetensors folder. Keys that change the model and are not mapped
// are refused by name rather than dropped.
//
// Mapped architectures (general.architecture → model_type): llama → llama, qwen2 → qwen2,
// qwen3 → qwen3, qwen3moe → qwen3_moe, gemma3 → gemma3_text, deepseek2 → deepseek_v3 (MLA dims from
// key/value_length_mla or, in older files, key/value_length; sigmoid routing with the exp_probs_b
// correction bias only: softmax-gated DeepSeek-V2 files are refused; NextN layers dropped from the
// block count; yarn with the converter's log multiplier), gpt-oss → gpt_oss (sliding window and its
// period, yarn with ggml's rounded correction range). Others are refused, naming the architecture
// and these.
//
//   auto file = GgufFile::open("qwen3-0.6b-q8_0.gguf");
//   ModelConfig c = gguf_model_config(*file);   // c.model_type == "qwen3", c.head_dim == 128
#pragma once

#include <optional>
#include <string>

#include "base/json.h"
#include "io/config.h"
#include "io/gguf.h"

namespace tachyon::io {

// The GGUF file a model argument names: `path` itself when it is a .gguf file; the single .gguf
// inside a folder that has no config.json. nullopt for anything else. Throws for a folder with
// several .gguf files (naming them) and for split files (`*-00001-of-0000N.gguf`).
std::optional<std::string> gguf_model_file(const std::string& path);

// The config.json equivalent of the file's metadata (see above).
Json gguf_hf_config(const GgufFile& file);
ModelConfig gguf_model_config(const GgufFile& file);

// generation_config.json's ids from the tokenizer metadata: eos (plus eot / eom when they
// differ, which llama.cpp also stops on), bos and pad.
GenerationConfig gguf_generation_config(const GgufFile& file);

// The architectures gguf_hf_config maps ("llama, qwen2, qwen3, qwen3moe, gemma3, deepseek2, gpt-oss").
std::string gguf_supported_architectures();

}  // namespace tachyon::io
