// The KV swap space (host tier) against recompute under preemption: many clients send long
// prompts at once to an engine whose KV pool holds a fraction of them, so the newest requests
// are preempted; with a swap space their blocks come back from host memory, without one they
// are recomputed from what the pool kept. Per mode, one run: prompt tokens run through the model
// (and the preempted requests' recomputed tokens), mean and worst TTFT, generated tokens per
// second, blocks and bytes swapped; then the tier's ratios to recompute, and whether both modes
// gave the same greedy tokens (they must). On the CPU the tier is forced (its KV is in host
// memory already: recompute is the default there); on CUDA it is what a server does by default.
// Usage: swap_bench [--device cpu|cuda] [--clients 12] [--prompt 512] [--tokens 64] [--kv-blocks 128]
//                   [--swap-space-mib 1024] [--kv-cache-dtype bf16] MODEL_DIR
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "kernels/backend.h"
#include "kernels/kv_format.h"
#include "model/kv_format_choice.h"
#include "model/model.h"
#ifdef TACHYON_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

using namespace tachyon;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string device = "cpu", model_dir, kv_dtype = "bf16";
  int clients = 12, prompt = 512, tokens = 64, kv_blocks = 128;
  int64_t swap_mib = 1024;
};

struct Result {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<double> ttft;
  double wall = 0;
  engine::EngineStats stats;
  double mean_ttft() const {
    double s = 0;
    for (double t : ttft) s += t;
    return s / static_cast<double>(ttft.size());
  }
  double max_ttft() const { return *std::max_element(ttft.begin(), ttft.end()); }
  double tokens_per_second() const { return static_cast<double>(stats.generated_tokens) / wall; }
};

Result run(model::Model& model, const Options& o, int64_t swap_space_bytes,
           const std::vector<std::vector<int32_t>>& prompts) {
  engine::EngineConfig config{.max_concurrent = o.clients, .num_blocks = o.kv_blocks,
                              .kv_format = model::parse_kv_cache_dtype(o.kv_dtype),
                              .swap_space_bytes = swap_space_bytes};
  engine::Engine engine(model, config);
  Result r;
  r.tokens.resize(prompts.size());
  r.ttft.resize(prompts.size());
  const auto t0 = Clock::now();
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      engine::GenerationRequest req;
      req.prompt = prompts[i];
      req.max_tokens = o.tokens;
      req.sampling.temperature = 0;
      const auto submitted = Clock::now();
      auto stream = engine.submit(req);
      for (;;) {
        auto out = stream->next(std::chrono::seconds(600));
        if (!out) std::abort();
        if (r.tokens[i].empty() && !out->tokens.empty())
          r.ttft[i] = std::chrono::duration<double>(Clock::now() - submitted).count();
        r.tokens[i].insert(r.tokens[i].end(), out->tokens.begin(), out->tokens.end());
        if (out->finish != engine::FinishReason::None) break;
      }
    });
  for (auto& c : clients) c.join();
  r.wall = std::chrono::duration<double>(Clock::now() - t0).count();
  r.stats = engine.stats();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto value = [&] { return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "missing value\n"), std::exit(2), ""); };
    if (!std::strcmp(argv[i], "--device")) o.device = value();
    else if (!std::strcmp(argv[i], "--clients")) o.clients = std::atoi(value());
    else if (!std::strcmp(argv[i], "--prompt")) o.prompt = std::atoi(value());
    else if (!std::strcmp(argv[i], "--tokens")) o.tokens = std::atoi(value());
    else if (!std::strcmp(argv[i], "--kv-blocks")) o.kv_blocks = std::atoi(value());
    else if (!std::strcmp(argv[i], "--swap-space-mib")) o.swap_mib = std::atoll(value());
    else if (!std::strcmp(argv[i], "--kv-cache-dtype")) o.kv_dtype = value();
    else o.model_dir = argv[i];
  }
  if (o.model_dir.empty()) {
    std::fprintf(stderr, "usage: swap_bench [options] MODEL_DIR (see the file's header)\n");
    return 2;
  }
  auto backend = kernels::make_backend(o.device);
  auto model = model::load_model(o.model_dir, *backend);
  // A request past the context is refused by the engine: say so here, not from a client thread.
  if (const int64_t context = model->config().max_position_embeddings; o.prompt + o.tokens > context) {
    std::fprintf(stderr, "swap_bench: --prompt %d + --tokens %d is past the model's context of %lld tokens\n", o.prompt,
                 o.tokens, static_cast<long long>(context));
    return 2;
  }
  std::mt19937 rng(46);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.clients));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(o.prompt));
    for (auto& t : p) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(model->config().vocab_size));
  }
  const int64_t demand = static_cast<int64_t>(o.clients) * ((o.prompt + o.tokens + 15) / 16);
  std::printf("swap_bench on %s: %s, %d clients x (%d prompt + %d generated) tokens, KV pool %d blocks of the %lld "
              "they need at once, %s KV\n\n",
              backend->name().c_str(), o.model_dir.c_str(), o.clients, o.prompt, o.tokens, o.kv_blocks,
              static_cast<long long>(demand), o.kv_dtype.c_str());
  const Result recompute = run(*model, o, 0, prompts);
#ifdef TACHYON_HAS_CUDA
  const uint64_t launches_before = o.device == "cuda" ? kernels::cuda_swap_launches(*backend) : 0;
#endif
  const Result tier = run(*model, o, o.swap_mib << 20, prompts);
#ifdef TACHYON_HAS_CUDA
  // The copies behind the swapped blocks: kernel launches (kernels/cuda/host_swap.h), one per run
  // of one direction between two ops, against the 2 x layers copies per block of one copy each.
  if (o.device == "cuda")
    std::printf("swap copy launches: %llu for %llu blocks out and in\n\n",
                static_cast<unsigned long long>(kernels::cuda_swap_launches(*backend) - launches_before),
                static_cast<unsigned long long>(tier.stats.swap_out_blocks + tier.stats.swap_in_blocks));
#endif
  std::printf("| mode | preemptions | prompt tokens computed | of them recomputed after preemption | mean TTFT s | "
              "worst TTFT s | generated tok/s | blocks out / in | MiB out / in |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, r] : {std::pair<const char*, const Result*>{"recompute", &recompute},
                                std::pair<const char*, const Result*>{"swap space", &tier}}) {
    const engine::EngineStats& s = r->stats;
    std::printf("| %s | %llu | %llu | %llu | %.3f | %.3f | %.1f | %llu / %llu | %.1f / %.1f |\n", name,
                static_cast<unsigned long long>(s.preemptions), static_cast<unsigned long long>(s.computed_prompt_tokens),
                static_cast<unsigned long long>(s.preempted_recomputed_tokens), r->mean_ttft(), r->max_ttft(),
                r->tokens_per_second(), static_cast<unsigned long long>(s.swap_out_blocks),
                static_cast<unsigned long long>(s.swap_in_blocks), static_cast<double>(s.swap_out_bytes) / (1 << 20),
                static_cast<double>(s.swap_in_bytes) / (1 << 20));
  }
  std::printf("\nswap space / recompute: prompt tokens computed %.3fx, mean TTFT %.3fx, worst TTFT %.3fx, "
              "throughput %.3fx; greedy tokens identical: %s\n",
              static_cast<double>(tier.stats.computed_prompt_tokens) /
                  static_cast<double>(std::max<uint64_t>(1, recompute.stats.computed_prompt_tokens)),
              tier.mean_ttft() / recompute.mean_ttft(), tier.max_ttft() / recompute.max_ttft(),
              tier.tokens_per_second() / recompute.tokens_per_second(), tier.tokens == recompute.tokens ? "yes" : "NO");
  return tier.tokens == recompute.tokens ? 0 : 1;
}
