// KV bytes a sequence holds at 1k, 8k and 32k tokens for sliding-window models, with every layer
// keeping every block (before) and with the sliding layers' blocks released once out of the
// window (kv::KvLayout::splits_sliding, after). The block counts are the pool's: a real KvCache
// is grown by prefill chunks of 512 tokens and then decode steps, and its pools are asked what
// is in use. Storage is allocated in a one-head, 8-wide f32 shape so the 32k-token baseline fits
// any machine; bytes are those block counts times the model's own KvLayout bytes per block (bf16,
// its heads and head_dim), the one source of KV bytes. Counts only: no timing.
//
// Then what a KV budget of 4/16/64 GiB holds, split as the engine splits it (kv_sizing.h).
//
//   build/bench/sliding_kv_memory            prints Markdown tables per model shape
#include <cstdio>
#include <string>
#include <vector>

#include "base/byte_size.h"
#include "base/error.h"
#include "engine/engine.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"

namespace {

using namespace tachyon;

struct Shape {
  const char* name;
  int64_t layers, kv_heads, head_dim;
  int32_t window;
  std::vector<int32_t> windows;  // per layer
};

// Gemma 3 27B (config.json: 62 layers, 16 KV heads of 128, sliding_window 1024, every 6th layer
// full) and gpt-oss-120b (36 layers, 8 KV heads of 64, window 128, sliding and full alternating).
std::vector<Shape> shapes() {
  Shape gemma{"Gemma-3-27B", 62, 16, 128, 1024, {}};
  for (int l = 0; l < 62; ++l) gemma.windows.push_back((l + 1) % 6 ? 1024 : 0);
  Shape oss{"gpt-oss-120b", 36, 8, 64, 128, {}};
  for (int l = 0; l < 36; ++l) oss.windows.push_back(l % 2 ? 0 : 128);
  return {gemma, oss};
}

struct Held {
  int32_t full = 0, sliding = 0;  // blocks in use in each group
};

// Grows one sequence to each of `marks` tokens (prefill chunks of 512, the last 32 tokens as
// decode steps) and reads the pools' blocks in use at each.
std::vector<Held> grow(kernels::Backend& backend, const kv::KvLayout& layout, const std::vector<int32_t>& marks) {
  kv::KvCache kv(backend, layout);
  const kv::SeqId seq = kv.add_sequence();
  std::vector<Held> out;
  int32_t n = 0;
  for (int32_t mark : marks) {
    while (n < mark) {
      const int32_t step = mark - n > 32 ? std::min(512, mark - 32 - n) : 1;
      if (!kv.reserve(seq, n + step, n)) throw Error("the bench's pool is too small at {} tokens", n + step);
      n += step;
    }
    const kv::BlockPool& full = kv.pool();
    out.push_back({full.num_blocks() - full.num_free(), kv.num_sliding_blocks_in_use()});
  }
  return out;
}

}  // namespace

int main() {
  auto backend = kernels::make_backend("cpu");
  const std::vector<int32_t> marks = {1024, 8192, 32768};
  const engine::EngineConfig defaults;  // 16 requests, 512-token steps, blocks of 16
  for (const Shape& s : shapes()) {
    kv::KvLayout real{.num_layers = s.layers, .num_kv_heads = s.kv_heads, .head_dim = s.head_dim, .block_size = 16,
                      .num_blocks = 32768 / 16 + 1, .format = kernels::KvFormat::BF16};
    real.layer_window = s.windows;
    kv::KvLayout counted = real;  // the same tables and pools; storage of one 8-wide f32 head
    counted.num_kv_heads = 1;
    counted.head_dim = 8;
    counted.format = kernels::KvFormat::F32;
    const std::vector<Held> before = grow(*backend, counted, marks);
    kv::KvLayout split_counted = engine::with_sliding_pool(counted, defaults, 32768);
    const std::vector<Held> after = grow(*backend, split_counted, marks);
    kv::KvLayout split_real = real;
    split_real.num_sliding_blocks = split_counted.num_sliding_blocks;
    const double before_block = static_cast<double>(real.bytes_per_block());
    const double full_block = static_cast<double>(split_real.bytes_per_block());
    const double sliding_block = static_cast<double>(split_real.sliding_bytes_per_block());
    std::printf("## %s, bf16 KV, blocks of 16 (%lld of %lld layers sliding, window %d)\n\n", s.name,
                static_cast<long long>(split_real.num_sliding_layers()), static_cast<long long>(s.layers), s.window);
    std::printf("| tokens | blocks before | bytes before | full blocks after | sliding blocks after | bytes after | "
                "after / before |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < marks.size(); ++i) {
      const double b = before[i].full * before_block;
      const double a = after[i].full * full_block + after[i].sliding * sliding_block;
      std::printf("| %d | %d | %s | %d | %d | %s | %.3f |\n", marks[i], before[i].full,
                  format_byte_size(static_cast<int64_t>(b)).c_str(), after[i].full, after[i].sliding,
                  format_byte_size(static_cast<int64_t>(a)).c_str(), a / b);
    }
    std::printf("\nPer token: %.0f B before, %.0f B after (the %lld full layers), plus the sliding layers' %.0f B a "
                "token for at most %d tokens per sequence. The engine's sliding pool under the default limits (%d "
                "requests, %d-token steps): %d blocks, %s, fixed.\n\n",
                before_block / 16, full_block / 16, static_cast<long long>(s.layers - split_real.num_sliding_layers()),
                sliding_block / 16, s.window, defaults.max_concurrent, defaults.max_tokens_per_step,
                split_real.num_sliding_blocks,
                format_byte_size(static_cast<int64_t>(split_real.sliding_pool_bytes())).c_str());
    // What a KV budget holds (engine::size_kv_pool's split of it): tokens in the pool, before and after.
    std::printf("| KV budget | tokens before | full-layer tokens after | sliding blocks after | after / before |\n"
                "|---:|---:|---:|---:|---:|\n");
    for (const int64_t gib : {4, 16, 64}) {
      const int64_t whole = static_cast<int64_t>(before_block);
      const engine::KvPoolSize budget = engine::kv_pool_from_bytes(gib << 30, {.bytes_per_block = whole, .block_size = 16});
      const engine::KvPoolSize split = engine::split_kv_pool(
          budget, whole, static_cast<int64_t>(full_block), static_cast<int64_t>(sliding_block),
          split_real.num_sliding_blocks, split_real.sliding_blocks_per_sequence(defaults.max_tokens_per_step) + 1, 0);
      std::printf("| %lld GiB | %lld | %lld | %d | %.2f |\n", static_cast<long long>(gib),
                  static_cast<long long>(budget.num_blocks) * 16, static_cast<long long>(split.num_blocks) * 16,
                  split.num_sliding_blocks, static_cast<double>(split.num_blocks) / budget.num_blocks);
    }
    std::printf("\n");
  }
  return 0;
}
