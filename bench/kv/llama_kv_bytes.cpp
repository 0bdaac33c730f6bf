// KV cache bytes per token of llama.cpp (the peer, built from its own source; never linked into
// tachyon), measured: for each cache type it creates a context of N tokens on the CPU and prints
// the KV buffer llama.cpp allocated, as its own log reports it, over N. Built and run by
// bench/kv/run_kv_bytes_vs_peers.sh:
//   llama_kv_bytes MODEL.gguf N_CTX TYPE...   (TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ggml.h"
#include "llama.h"

namespace {

double g_kv_mib = 0;  // the "KV buffer size" of the last context, from llama.cpp's log

void capture_kv_buffer(ggml_log_level, const char* text, void*) {
  const char* at = std::strstr(text, "KV buffer size =");
  if (at) g_kv_mib += std::atof(at + std::strlen("KV buffer size ="));
}

ggml_type type_named(const std::string& name) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n && name == n) return static_cast<ggml_type>(t);
  }
  std::fprintf(stderr, "unknown ggml type '%s'\n", name.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: llama_kv_bytes MODEL.gguf N_CTX TYPE...\n");
    return 2;
  }
  const int n_ctx = std::atoi(argv[2]);
  llama_log_set(capture_kv_buffer, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  std::printf("| llama.cpp cache type | KV buffer (MiB, its log) | bytes per token |\n|---|---:|---:|\n");
  for (int i = 3; i < argc; ++i) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = static_cast<uint32_t>(n_ctx);
    cp.n_seq_max = 1;
    cp.type_k = cp.type_v = type_named(argv[i]);
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;  // a quantized V cache needs it
    g_kv_mib = 0;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
      std::printf("| %s | context refused | |\n", argv[i]);
      continue;
    }
    std::printf("| %s | %.2f | %.1f |\n", argv[i], g_kv_mib, g_kv_mib * 1024 * 1024 / n_ctx);
    llama_free(ctx);
  }
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
