// CPU decode speed per KV format at a long context, Qwen3-0.6B shape (hidden 1024, 28 layers,
// 16 query heads and 8 KV heads of 128): one decode row per step.
//  - "KV": every layer's write_kv of the new token and its attention over `context` keys;
//  - "step": that plus the layer's matmuls with random bf16 weights of the 0.6B shape (q, k, v,
//    o, gate/up, down) and the LM head (vocab 151936): the whole decode step's memory traffic
//    except norms and RoPE.
// Protocol: every format's cache is filled through write_kv first; then --runs rounds (after
// one warm-up round) each time one step per format in turn; the median per format. Prints a Markdown table with each format's ratio to bf16 KV measured
// in the same run and its bytes per token against f32.
//
//   kv_decode_bench [--context 8192] [--runs 5] [--no-weights] [--formats bf16,int8,...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/dtype.h"
#include "kernels/backend.h"
#include "kv/kv_cache.h"

using namespace tachyon;

namespace {

constexpr int64_t kLayers = 28, kHidden = 1024, kHeads = 16, kKvHeads = 8, kHeadDim = 128, kInter = 3072,
                  kVocab = 151936;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct Matrix {
  std::vector<uint16_t> host;
  kernels::Weight w;
};

// A random bf16 [rows, cols] weight uploaded (packed) to the backend.
kernels::Weight random_weight(kernels::Backend& be, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> d(0.f, 0.02f);
  std::vector<uint16_t> host(static_cast<size_t>(rows * cols));
  for (auto& x : host) x = f32_to_bf16(d(rng));
  return be.upload_weight(kernels::Weight{host.data(), DType::BF16, rows, cols});
}

struct LayerWeights {
  kernels::Weight q, k, v, o, gate_up, down;
};

}  // namespace

int main(int argc, char** argv) {
  int32_t context = 8192, runs = 5;
  bool weights = true;
  std::vector<kernels::KvFormat> formats = {kernels::KvFormat::BF16, kernels::KvFormat::F32,  kernels::KvFormat::F16,
                                            kernels::KvFormat::FP8,  kernels::KvFormat::Int8, kernels::KvFormat::Int4,
                                            kernels::KvFormat::Turbo};
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--context" && i + 1 < argc) context = std::stoi(argv[++i]);
    else if (s == "--runs" && i + 1 < argc) runs = std::stoi(argv[++i]);
    else if (s == "--no-weights") weights = false;
    else if (s == "--formats" && i + 1 < argc) {
      formats.clear();
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) {
        const auto f = kernels::kv_format_from_name(name);
        if (!f) {
          std::fprintf(stderr, "unknown KV format '%s'\n", name.c_str());
          return 1;
        }
        formats.push_back(*f);
      }
    } else {
      std::fprintf(stderr, "usage: kv_decode_bench [--context N] [--runs N] [--no-weights] [--formats a,b,...]\n");
      return 1;
    }
  }
  auto be = kernels::make_backend("cpu");
  std::mt19937 rng(1);
  std::vector<LayerWeights> layers;
  kernels::Weight head;
  if (weights) {
    for (int64_t l = 0; l < kLayers; ++l)
      layers.push_back({random_weight(*be, kHeads * kHeadDim, kHidden, rng), random_weight(*be, kKvHeads * kHeadDim, kHidden, rng),
                        random_weight(*be, kKvHeads * kHeadDim, kHidden, rng), random_weight(*be, kHidden, kHeads * kHeadDim, rng),
                        random_weight(*be, 2 * kInter, kHidden, rng), random_weight(*be, kHidden, kInter, rng)});
    head = random_weight(*be, kVocab, kHidden, rng);
  }
  // Keys and values of the filled context (the same rows for every layer), and the decode row.
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> fill_k(static_cast<size_t>(context) * kKvHeads * kHeadDim), fill_v(fill_k.size());
  for (auto& x : fill_k) x = nd(rng);
  for (auto& x : fill_v) x = nd(rng);
  std::vector<float> x(kHidden), q(kHeads * kHeadDim), k(kKvHeads * kHeadDim), v(k.size()), att(q.size()), o(kHidden),
      gu(2 * kInter), act(kInter), logits(kVocab);
  for (auto& e : x) e = nd(rng);
  for (auto& e : q) e = nd(rng);
  for (auto& e : k) e = nd(rng);
  for (auto& e : v) e = nd(rng);

  struct Row {
    kernels::KvFormat f;
    double kv_ms, step_ms, bytes_per_token;
  };
  // Every format's cache is filled first; then the runs interleave the formats, so that a
  // machine whose speed drifts (a shared VM) slows every format alike.
  struct Filled {
    kernels::KvFormat f;
    std::unique_ptr<kv::KvCache> cache;
    kv::SeqId seq;
    std::vector<double> kv_ms, step_ms;
  };
  std::vector<Filled> filled;
  std::vector<int32_t> positions(static_cast<size_t>(context)), row_seq(positions.size(), 0);
  for (int32_t p = 0; p < context; ++p) positions[p] = p;
  for (const kernels::KvFormat f : formats) {
    kv::KvLayout layout{kLayers, kKvHeads, kHeadDim, 16, context / 16 + 2};
    layout.format = f;
    Filled fl{f, std::make_unique<kv::KvCache>(*be, layout), 0, {}, {}};
    fl.seq = fl.cache->add_sequence();
    fl.cache->reserve(fl.seq, context + 1);
    const auto& table = fl.cache->block_table(fl.seq);
    std::vector<int32_t> offsets = {0, static_cast<int32_t>(table.size())};
    const kernels::AttentionMeta fill{positions.data(), row_seq.data(), table.data(), offsets.data()};
    for (int64_t l = 0; l < kLayers; ++l) be->write_kv(fill_k.data(), fill_v.data(), context, fl.cache->layer(l), fill);
    filled.push_back(std::move(fl));
  }
  kernels::AttentionParams p;
  p.num_heads = kHeads;
  p.scale = 1.f / std::sqrt(static_cast<float>(kHeadDim));
  const int32_t pos = context;  // the decode row: position `context`, attending over context + 1 keys
  auto step = [&](Filled& fl, bool with_weights) {
    const auto& table = fl.cache->block_table(fl.seq);
    const int32_t offsets[2] = {0, static_cast<int32_t>(table.size())};
    const kernels::AttentionMeta meta{&pos, row_seq.data(), table.data(), offsets};
    const double t0 = now();
    for (int64_t l = 0; l < kLayers; ++l) {
      if (with_weights) {
        be->matmul(x.data(), 1, layers[l].q, nullptr, q.data());
        be->matmul(x.data(), 1, layers[l].k, nullptr, k.data());
        be->matmul(x.data(), 1, layers[l].v, nullptr, v.data());
      }
      be->write_kv(k.data(), v.data(), 1, fl.cache->layer(l), meta);
      be->attention(q.data(), 1, fl.cache->layer(l), meta, p, att.data());
      if (with_weights) {
        be->matmul(att.data(), 1, layers[l].o, nullptr, o.data());
        be->matmul(x.data(), 1, layers[l].gate_up, nullptr, gu.data());
        be->matmul(act.data(), 1, layers[l].down, nullptr, o.data());
      }
    }
    if (with_weights) be->matmul(x.data(), 1, head, nullptr, logits.data());
    be->synchronize();
    return (now() - t0) * 1e3;
  };
  for (int r = 0; r <= runs; ++r)
    for (Filled& fl : filled) {
      const double kv_ms = step(fl, false), step_ms = weights ? step(fl, true) : 0.0;
      if (r == 0) continue;  // warm-up
      fl.kv_ms.push_back(kv_ms);
      fl.step_ms.push_back(step_ms);
    }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<Row> rows;
  for (Filled& fl : filled) {
    rows.push_back({fl.f, median(fl.kv_ms), median(fl.step_ms), fl.cache->layout().kv_bytes_per_token_layer() * kLayers});
    std::fprintf(stderr, "%-5s KV %.2f ms  step %.2f ms\n", std::string(kernels::kv_format_name(fl.f)).c_str(),
                 rows.back().kv_ms, rows.back().step_ms);
  }
  const auto bf16 = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.f == kernels::KvFormat::BF16; });
  const double f32_bytes = kv::KvLayout{kLayers, kKvHeads, kHeadDim, 16, 1}.kv_bytes_per_token_layer() * kLayers;
  std::printf("CPU: %s (%s). Qwen3-0.6B shape, decode batch 1 at %d context, median of %d steps after one warm-up.\n\n",
              cpu_name().c_str(), be->name().c_str(), context, runs);
  std::printf("| KV format | bytes/token (all layers) | vs f32 | KV read+write ms/step | KV speed vs bf16 |%s\n",
              weights ? " full step ms (bf16 weights) | step speed vs bf16 |" : "");
  std::printf("| --- | ---: | ---: | ---: | ---: |%s\n", weights ? " ---: | ---: |" : "");
  for (const Row& r : rows) {
    std::printf("| %s | %.0f | %.3fx | %.2f | %s |", std::string(kernels::kv_format_name(r.f)).c_str(), r.bytes_per_token,
                r.bytes_per_token / f32_bytes, r.kv_ms,
                bf16 == rows.end() ? "-" : fmt::format("{:.2f}x", bf16->kv_ms / r.kv_ms).c_str());
    if (weights)
      std::printf(" %.2f | %s |", r.step_ms, bf16 == rows.end() ? "-" : fmt::format("{:.2f}x", bf16->step_ms / r.step_ms).c_str());
    std::printf("\n");
  }
  return 0;
}
