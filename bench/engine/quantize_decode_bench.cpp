// `--quantize-decode` against bf16 and `--quantize` on the CPU: for each model given and each load
// mode (bf16, --quantize int8, --quantize int4, --quantize-decode int8, --quantize-decode int4),
// decode tok/s at batch 1 (decode rows marked, as the engine marks them) and prefill tok/s of one
// N-token prompt, each as a ratio to the bf16 load measured in the same run, and decode next to
// the roofline of the weight bytes a decode row reads in that mode (STREAM read bandwidth measured
// in the same run). The claim it checks: decode reads the quantized copy (the speed of
// --quantize), prefill keeps bf16's speed. The last column is the accuracy cost: the prompt's
// last-row logits against bf16's, max abs difference / max abs bf16 logit.
// Protocol: one warm-up run discarded, median of --runs. Prints a Markdown table; "prefill CPU-s" is the
// process CPU time of one prefill (all threads, spin waits included), the figure to compare on a loaded machine.
// Usage: quantize_decode_bench [--runs 3] [--decode-tokens 32] [--prefill-tokens 512] [--mode NAME]... MODEL_DIR...
// --mode (repeatable) measures only the named load modes (the table's first column, e.g. "bf16" or
// "--quantize int8 --int8-activations on"); the ratios need bf16 among them. For a GGUF file "bf16"
// is the file as stored and "--int8-activations on" its own Q8_0/Q4_0 weights with int8 activations.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <ctime>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/weight_dequant.h"
#include "model/model.h"
#include "greedy_decode.h"
#include "roofline.h"

using namespace tachyon;
using kernels::QuantizeMode;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU seconds of every thread of the process: a loaded machine's figure (others' work does not count).
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Mode {
  const char* name;
  QuantizeMode quantize, decode;
  kernels::Int8ActivationMode int8 = kernels::Int8ActivationMode::Off;
};

struct Measured {
  double decode_tps = 0, prefill_tps = 0;
  double prefill_cpu_s = 0;  // process CPU seconds of one prefill (workers' spin waits included)
  std::vector<float> prefill_logits;  // the prompt's last row
  double prefill_bytes = 0, decode_bytes = 0;  // weight bytes prefill rows and decode rows read
};

Measured measure(const std::string& dir, const Mode& mode, int runs, int decode_tokens, int prefill_tokens) {
  auto backend = kernels::make_backend("cpu");
  // Bytes per weight name as loaded, and of the decode copies beside them.
  std::map<std::string, double> stored, copies;
  model::LoadOptions options;
  options.quantize = mode.quantize;
  options.quantize_decode = mode.decode;
  options.int8_activations = mode.int8;
  options.on_weight = [&](const std::string& name, const kernels::Weight& w) {
    stored[name] += static_cast<double>(kernels::weight_bytes(w));
  };
  options.on_decode_weight = [&](const std::string& name, const kernels::Weight& w) {
    copies[name] += static_cast<double>(kernels::weight_bytes(w));
  };
  auto model = model::load_model(dir, *backend, options);
  const auto& c = model->config();
  Measured m;
  for (const auto& [name, bytes] : stored) {
    m.prefill_bytes += bytes;
    m.decode_bytes += copies.count(name) ? copies[name] : bytes;
  }
  const int32_t max_ctx = prefill_tokens + decode_tokens + 32;
  kv::KvCache kv(*backend, model->kv_layout((max_ctx + 15) / 16 + 1));
  std::mt19937 rng(0);
  std::vector<int32_t> prompt(static_cast<size_t>(prefill_tokens));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab_size));
  const int32_t decode_prompt = 16;
  std::vector<double> decode_tps, prefill_tps, prefill_cpu;
  for (int r = 0; r <= runs; ++r) {
    // Decode: a 16-token prompt, then single-token greedy steps, each a decode row.
    const double decode_s = bench::time_greedy_decode(
        *model, kv, std::span<const int32_t>(prompt.data(), decode_prompt), decode_tokens, /*mark_decode_rows=*/true);
    // Prefill: the whole prompt in one forward (prompt rows).
    const auto seq = kv.add_sequence();
    kv.reserve(seq, prefill_tokens);
    model::Batch batch;
    batch.add(seq, prompt, 0);
    const double t1 = now(), c1 = cpu_now();
    auto prefill_out = model->forward(batch, kv);
    const double prefill_s = now() - t1, prefill_c = cpu_now() - c1;
    if (r == 0) m.prefill_logits = prefill_out.logits;
    kv.remove_sequence(seq);
    if (r == 0) continue;  // warm-up
    decode_tps.push_back(decode_tokens / decode_s);
    prefill_tps.push_back(prefill_tokens / prefill_s);
    prefill_cpu.push_back(prefill_c);
  }
  m.decode_tps = median(decode_tps);
  m.prefill_tps = median(prefill_tps);
  m.prefill_cpu_s = median(prefill_cpu);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 3, decode_tokens = 32, prefill_tokens = 512;
  std::vector<std::string> models, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (a == "--decode-tokens" && i + 1 < argc) decode_tokens = std::atoi(argv[++i]);
    else if (a == "--prefill-tokens" && i + 1 < argc) prefill_tokens = std::atoi(argv[++i]);
    else if (a == "--mode" && i + 1 < argc) only.push_back(argv[++i]);
    else models.push_back(a);
  }
  if (models.empty() || runs < 1) {
    std::fprintf(stderr, "usage: quantize_decode_bench [--runs N] [--decode-tokens N] [--prefill-tokens N] [--mode NAME]... MODEL_DIR...\n");
    return 2;
  }
  std::fprintf(stderr, "measuring machine ceilings (%zu threads)...\n", ThreadPool::global().num_threads());
  const auto ceil = bench::measure_ceilings();
  std::printf("\nmachine: %zu threads; STREAM read %.1f GB/s; 1 warm-up discarded, median of %d\n\n",
              ThreadPool::global().num_threads(), ceil.read_gbps, runs);
  const Mode modes[] = {{"bf16", QuantizeMode::None, QuantizeMode::None},
                        {"--quantize int8", QuantizeMode::Int8, QuantizeMode::None},
                        {"--quantize int4", QuantizeMode::Int4, QuantizeMode::None},
                        {"--quantize-decode int8", QuantizeMode::None, QuantizeMode::Int8},
                        {"--quantize-decode int4", QuantizeMode::None, QuantizeMode::Int4},
                        {"--quantize int8 --int8-activations on", QuantizeMode::Int8, QuantizeMode::None,
                         kernels::Int8ActivationMode::On},
                        {"--quantize int4 --int8-activations on", QuantizeMode::Int4, QuantizeMode::None,
                         kernels::Int8ActivationMode::On},
                        {"--quantize-decode int8 --int8-activations on", QuantizeMode::None, QuantizeMode::Int8,
                         kernels::Int8ActivationMode::On},
                        // A GGUF file's own integer weights (Q8_0, Q4_0) with int8 activations.
                        {"--int8-activations on", QuantizeMode::None, QuantizeMode::None, kernels::Int8ActivationMode::On}};
  for (const auto& dir : models) {
    std::printf("%s\n\n| load | weights read per decode token (MiB) | decode tok/s | vs bf16 | of read roofline | "
                "prefill-%d tok/s | vs bf16 | prefill CPU-s | last logits: max abs diff / max abs bf16 |\n|---|---|---|---|---|---|---|---|---|\n",
                dir.c_str(), prefill_tokens);
    std::fflush(stdout);
    Measured bf16;
    for (const Mode& mode : modes) {
      if (!only.empty() && std::find(only.begin(), only.end(), mode.name) == only.end()) continue;
      const Measured m = measure(dir, mode, runs, decode_tokens, prefill_tokens);
      if (std::string(mode.name) == "bf16") bf16 = m;  // the file as stored (a GGUF's own types)
      const double roof = ceil.read_gbps * 1e9 / m.decode_bytes;
      double max_ref = 0, max_diff = 0;
      for (size_t i = 0; i < bf16.prefill_logits.size() && i < m.prefill_logits.size(); ++i) {
        max_ref = std::max(max_ref, std::fabs(double(bf16.prefill_logits[i])));
        max_diff = std::max(max_diff, std::fabs(double(m.prefill_logits[i]) - bf16.prefill_logits[i]));
      }
      std::printf("| %s | %.1f | %.2f | %.2fx | %.0f%% | %.1f | %.2fx | %.3f | %.4f |\n", mode.name, m.decode_bytes / (1 << 20),
                  m.decode_tps, m.decode_tps / bf16.decode_tps, 100 * m.decode_tps / roof, m.prefill_tps,
                  m.prefill_tps / bf16.prefill_tps, m.prefill_cpu_s, max_ref > 0 ? max_diff / max_ref : 0.0);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
