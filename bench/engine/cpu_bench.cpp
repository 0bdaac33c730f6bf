// CPU engine benchmark: decode tok/s at batch 1 and prefill tok/s (512-token prompt) for each
// model given, each next to its roofline measured in the same run:
//   decode roofline  = memory bandwidth / (weight bytes + KV bytes read per decoded token);
//                      MoE: only the routed experts' weights (active parameters); hybrid: plus
//                      the recurrent state read and written
//   prefill roofline = f32 FMA peak / FLOPs per prompt token
// Protocol: one warm-up run discarded, median of --runs. Prints a Markdown table and writes
// JSON (--json). Usage: cpu_bench [--runs 3] [--decode-tokens 32] [--prefill-tokens 512]
//                                 [--int8-activations auto|on|off] [--json FILE] MODEL_DIR...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/json.h"
#include "base/thread_pool.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "greedy_decode.h"
#include "roofline.h"

using namespace tachyon;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct ModelCost {
  double weight_bytes_per_token = 0;  // weights every decode step streams (MoE: the routed experts only)
  double total_weight_bytes = 0;      // every weight of the checkpoint
  double kv_bytes_per_position = 0;   // K+V bytes read per cached position per token
  double state_bytes_per_token = 0;   // recurrent state read + written per token (hybrid models)
  double matmul_params = 0;           // multiply-adds per token excluding the LM head (active experts only)
  double lm_head_params = 0;
  int64_t attention_layers = 0;
};

// The tensors of a checkpoint as stored (bytes as in the file: a GGUF file's quantized blocks),
// under Hugging Face names for the roles the cost model tells apart (GGUF: token_embd, output and
// the *_exps expert tensors).
struct StoredTensor {
  std::string name;
  double bytes = 0, elements = 0;
  bool matrix = false;
};
std::vector<StoredTensor> stored_tensors(const std::string& dir) {
  std::vector<StoredTensor> out;
  if (const auto gguf = io::gguf_model_file(dir)) {
    const auto file = io::GgufFile::open(*gguf);
    for (const io::GgufTensor& t : file->tensors()) {
      std::string name = t.name;
      if (name == "token_embd.weight") name = "model.embed_tokens.weight";
      else if (name == "output.weight") name = "lm_head.weight";
      else if (name.find("_exps.") != std::string::npos) name = "mlp.experts." + name;
      out.push_back({name, static_cast<double>(t.num_bytes), static_cast<double>(t.num_elements()), t.dims.size() >= 2});
    }
    return out;
  }
  const auto ckpt = io::Checkpoint::open(dir);
  for (const auto& [name, t] : ckpt.tensors())
    out.push_back({name, static_cast<double>(t.num_bytes), static_cast<double>(t.num_elements()), t.shape.size() >= 2});
  return out;
}

// Expert tensors ("mlp.experts.") are streamed for the top_k experts a token is routed to, so
// an MoE's decode roofline counts top_k / num_experts of them (active parameters).
ModelCost cost_of(const std::string& dir, const io::ModelConfig& c, const kv::KvLayout& kv) {
  ModelCost cost;
  double expert_fraction = 1;
  for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"})
    if (c.raw.contains(key) && c.raw[key].is_number_integer() && c.raw.contains("num_experts_per_tok"))
      expert_fraction = c.raw["num_experts_per_tok"].get<double>() / c.raw[key].get<double>();
  for (const StoredTensor& t : stored_tensors(dir)) {
    const std::string& name = t.name;
    if (name.rfind("mtp.", 0) == 0) continue;  // unused by plain decode
    const bool embed = name == "model.embed_tokens.weight", head = name == "lm_head.weight";
    cost.total_weight_bytes += t.bytes;
    if (embed && !c.tie_word_embeddings) continue;  // only one row is gathered
    const double share = name.find("mlp.experts.") != std::string::npos ? expert_fraction : 1.0;
    cost.weight_bytes_per_token += share * t.bytes;
    if (t.matrix) {
      if (embed || head) cost.lm_head_params += t.elements;
      else cost.matmul_params += share * t.elements;
    }
  }
  cost.attention_layers = kv.num_layers;
  cost.kv_bytes_per_position = (kv.shared_kv ? 1.0 : 2.0) * kv.num_layers * kv.num_kv_heads * kv.head_dim * sizeof(float);
  cost.state_bytes_per_token = 2.0 * kv.num_state_layers * kv.state_floats * sizeof(float);
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3, decode_tokens = 32, prefill_tokens = 512;
  std::string json_path;
  std::vector<std::string> models;
  model::LoadOptions load_options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[++i]);
    else if (a == "--decode-tokens") decode_tokens = std::atoi(argv[++i]);
    else if (a == "--prefill-tokens") prefill_tokens = std::atoi(argv[++i]);
    else if (a == "--json") json_path = argv[++i];
    else if (a == "--int8-activations") {
      const auto mode = kernels::parse_int8_activation_mode(argv[++i]);
      if (!mode) {
        std::fprintf(stderr, "--int8-activations %s: expected auto, on or off\n", argv[i]);
        return 2;
      }
      load_options.int8_activations = *mode;
    }
    else models.push_back(a);
  }
  if (models.empty()) {
    std::fprintf(stderr, "usage: cpu_bench [--runs N] [--decode-tokens N] [--prefill-tokens N] [--json FILE] MODEL_DIR...\n");
    return 2;
  }
  auto backend = kernels::make_backend("cpu");
  std::fprintf(stderr, "measuring machine ceilings (%zu threads)...\n", ThreadPool::global().num_threads());
  const auto ceil = bench::measure_ceilings();
  Json report = {{"backend", backend->name()},
                 {"threads", ThreadPool::global().num_threads()},
                 {"copy_gbps", ceil.copy_gbps},
                 {"read_gbps", ceil.read_gbps},
                 {"fma_gflops", ceil.fma_gflops},
                 {"protocol", fmt::format("1 warm-up discarded, median of {}", runs)},
                 {"models", Json::array()}};
  std::printf("\nmachine: %zu threads, %s; STREAM copy %.1f GB/s, read %.1f GB/s, f32 FMA peak %.0f GFLOP/s\n\n",
              ThreadPool::global().num_threads(), backend->name().c_str(), ceil.copy_gbps, ceil.read_gbps, ceil.fma_gflops);
  std::printf("| model | decode tok/s | roofline tok/s (copy BW) | ratio | ratio (read BW) | prefill tok/s (%d) | roofline tok/s (FMA peak) | ratio |\n",
              prefill_tokens);
  std::printf("|---|---|---|---|---|---|---|---|\n");

  for (const auto& dir : models) {
    const int64_t int8_before = backend->int8_activation_weights();
    auto model = model::load_model(dir, *backend, load_options);
    const int64_t int8_weights = backend->int8_activation_weights() - int8_before;
    const auto& c = model->config();
    const ModelCost cost = cost_of(dir, c, model->kv_layout(1));
    const int32_t max_ctx = prefill_tokens + decode_tokens + 32;
    kv::KvCache kv(*backend, model->kv_layout((max_ctx + 15) / 16 + 1));
    std::mt19937 rng(0);
    std::vector<int32_t> prompt(static_cast<size_t>(prefill_tokens));
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
    const int decode_prompt = 16;

    std::vector<double> decode_tps, prefill_tps;
    for (int r = 0; r <= runs; ++r) {
      // Decode: a 16-token prompt, then decode_tokens single-token steps (greedy).
      const double decode_s =
          bench::time_greedy_decode(*model, kv, std::span<const int32_t>(prompt.data(), decode_prompt), decode_tokens,
                                    /*mark_decode_rows=*/false);
      // Prefill: the whole prompt in one forward.
      const auto seq = kv.add_sequence();
      kv.reserve(seq, prefill_tokens);
      model::Batch batch;
      batch.add(seq, prompt, 0);
      const double t1 = now();
      model->forward(batch, kv);
      const double prefill_s = now() - t1;
      kv.remove_sequence(seq);
      if (r == 0) continue;  // warm-up
      decode_tps.push_back(decode_tokens / decode_s);
      prefill_tps.push_back(prefill_tokens / prefill_s);
    }
    const double avg_ctx = decode_prompt + decode_tokens / 2.0;
    const double bytes_per_token =
        cost.weight_bytes_per_token + cost.kv_bytes_per_position * avg_ctx + cost.state_bytes_per_token;
    const double decode_roof = ceil.copy_gbps * 1e9 / bytes_per_token;
    const double decode_roof_read = ceil.read_gbps * 1e9 / bytes_per_token;
    const double attn_flops = 4.0 * cost.attention_layers * c.num_attention_heads * c.head_dim * (prefill_tokens + 1) / 2.0;
    const double prefill_flops_per_token = 2.0 * cost.matmul_params + attn_flops + 2.0 * cost.lm_head_params / prefill_tokens;
    const double prefill_roof = ceil.fma_gflops * 1e9 / prefill_flops_per_token;
    const double d = median(decode_tps), p = median(prefill_tps);
    const std::string name = dir + (int8_weights > 0 ? " (int8 activations)" : "");
    std::printf("| %s | %.2f | %.2f | %.1f%% | %.1f%% | %.1f | %.1f | %.1f%% |\n", name.c_str(), d, decode_roof,
                100 * d / decode_roof, 100 * d / decode_roof_read, p, prefill_roof, 100 * p / prefill_roof);
    std::fflush(stdout);
    report["models"].push_back({{"model", dir},
                                {"int8_activation_weights", int8_weights},
                                {"model_type", c.model_type},
                                {"total_weight_bytes", cost.total_weight_bytes},
                                {"weight_bytes_per_token", cost.weight_bytes_per_token},
                                {"state_bytes_per_token", cost.state_bytes_per_token},
                                {"kv_bytes_per_token_at_avg_ctx", cost.kv_bytes_per_position * avg_ctx},
                                {"decode_tok_s_runs", decode_tps},
                                {"decode_tok_s", d},
                                {"decode_roofline_tok_s_copy_bw", decode_roof},
                                {"decode_ratio_copy_bw", d / decode_roof},
                                {"decode_ratio_read_bw", d / decode_roof_read},
                                {"prefill_tokens", prefill_tokens},
                                {"prefill_tok_s_runs", prefill_tps},
                                {"prefill_tok_s", p},
                                {"prefill_flops_per_token", prefill_flops_per_token},
                                {"prefill_roofline_tok_s", prefill_roof},
                                {"prefill_ratio", p / prefill_roof}});
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << report.dump(2) << "\n";
    std::fprintf(stderr, "wrote %s\n", json_path.c_str());
  }
  return 0;
}
