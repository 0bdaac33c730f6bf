// llama.cpp's reference outputs for a GGUF fixture (tools/make_gguf_arch_fixtures.py): the logits at
// every position of one batch over a token-id sequence, a greedy continuation (one token per decode
// call), and for MoE models the scores each MoE layer chose its experts by, for every row of the
// batch and every greedy step, so that a test can tell a routing near-tie from an error.
//
// usage: llama_reference_dump MODEL.gguf IDS(comma) OUT_PREFIX N_GREEDY
//   writes OUT_PREFIX.logits.f32   [T, n_vocab]
//          OUT_PREFIX.routing.f32  per decode call, per MoE layer in order: [rows, n_expert] scores
//   prints {"n_vocab": V, "n_expert": E, "greedy": [...]} on stdout
// build: g++ -O2 -std=c++17 llama_reference_dump.cpp -I$L/include -I$L/ggml/include -L$L/build/bin
//          -lllama -lggml -lggml-base -Wl,-rpath,$L/build/bin
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

namespace {

// The selection scores of llama.cpp's MoE (llama-graph.cpp build_moe_ffn): logits plus the router
// bias when there is one, then probabilities plus the correction bias (DeepSeek-V3) when there is
// one. The last of these per layer is what top-k ran on (before group masking).
struct RoutingDump {
  FILE* out = nullptr;
  int64_t n_expert = 0;
  std::string pending_layer;
  std::vector<float> pending;
  void flush() {
    if (!pending.empty()) fwrite(pending.data(), sizeof(float), pending.size(), out);
    pending.clear();
    pending_layer.clear();
  }
};

// "<kind>-<layer>" exactly (views of these tensors carry suffixes such as " (reshaped)").
bool is_selection_tensor(const char* name) {
  static const char* kNames[] = {"ffn_moe_logits-", "ffn_moe_logits_biased-", "ffn_moe_probs-",
                                 "ffn_moe_probs_biased-"};
  for (const char* n : kNames) {
    const size_t len = std::strlen(n);
    if (std::strncmp(name, n, len) != 0 || name[len] == '\0') continue;
    bool digits = true;
    for (const char* c = name + len; *c; ++c) digits = digits && *c >= '0' && *c <= '9';
    if (digits) return true;
  }
  return false;
}

bool on_tensor(ggml_tensor* t, bool ask, void* user) {
  auto* dump = static_cast<RoutingDump*>(user);
  if (!is_selection_tensor(t->name)) return ask ? false : true;
  if (ask) return true;
  const std::string name(t->name);
  const std::string layer = name.substr(name.rfind('-') + 1);
  const std::string kind = name.substr(0, name.rfind('-'));
  // Within one layer a later tensor replaces an earlier one: logits → logits_biased (router bias)
  // → probs (softmax/sigmoid) → probs_biased (correction bias). gpt-oss selects on the biased
  // logits (its "probs" are the same tensor), DeepSeek-V3 on the biased probabilities.
  if (layer != dump->pending_layer) dump->flush();
  if (t->type != GGML_TYPE_F32) return true;
  dump->n_expert = t->ne[0];
  dump->pending.resize(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, dump->pending.data(), 0, ggml_nbytes(t));
  dump->pending_layer = layer;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf IDS OUT_PREFIX N_GREEDY\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids;
  {
    std::stringstream ss(argv[2]);
    std::string t;
    while (std::getline(ss, t, ',')) ids.push_back(std::stoi(t));
  }
  const std::string prefix = argv[3];
  const int n_greedy = std::atoi(argv[4]);
  RoutingDump routing;
  routing.out = std::fopen((prefix + ".routing.f32").c_str(), "wb");
  llama_backend_init();
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "load failed\n");
    return 1;
  }
  auto cp = llama_context_default_params();
  cp.n_ctx = 1024;
  cp.n_batch = 1024;
  cp.n_ubatch = 1024;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  cp.cb_eval = on_tensor;
  cp.cb_eval_user_data = &routing;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  llama_batch b = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.token[i] = ids[i];
    b.pos[i] = static_cast<int>(i);
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = 1;
  }
  b.n_tokens = static_cast<int>(ids.size());
  if (llama_decode(ctx, b)) return 1;
  routing.flush();
  FILE* f = std::fopen((prefix + ".logits.f32").c_str(), "wb");
  for (size_t i = 0; i < ids.size(); ++i) std::fwrite(llama_get_logits_ith(ctx, static_cast<int>(i)), 4, n_vocab, f);
  std::fclose(f);

  std::vector<llama_token> out;
  int pos = static_cast<int>(ids.size());
  const float* lg = llama_get_logits_ith(ctx, static_cast<int>(ids.size()) - 1);
  for (int s = 0; s < n_greedy; ++s) {
    int best = 0;
    for (int v = 1; v < n_vocab; ++v)
      if (lg[v] > lg[best]) best = v;
    out.push_back(best);
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = best;
    one.pos[0] = pos++;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    if (llama_decode(ctx, one)) return 1;
    routing.flush();
    llama_batch_free(one);
    lg = llama_get_logits_ith(ctx, 0);
  }
  std::fclose(routing.out);
  std::printf("{\"n_vocab\": %d, \"n_expert\": %lld, \"greedy\": [", n_vocab, static_cast<long long>(routing.n_expert));
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("]}\n");
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
