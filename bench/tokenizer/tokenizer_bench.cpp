// tachyon side of the tokenizer benchmark: single-thread encode throughput on the corpus
// (one JSON string per line) and tokenizer.json load time, with the same protocol as
// hf_bench.js (warm-up discarded, median of three). Prints one JSON line.
// Usage: tokenizer_bench TOKENIZER_JSON CORPUS
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tokenizer_bench TOKENIZER_JSON CORPUS\n");
    return 2;
  }
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  std::vector<std::string> docs;
  size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      docs.push_back(tachyon::Json::parse(line).get<std::string>());
      bytes += docs.back().size();
    }
  }
  std::vector<double> loads;
  std::vector<tachyon::tokenizer::Tokenizer> keep;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    keep.push_back(tachyon::tokenizer::Tokenizer::from_file(argv[1]));
    loads.push_back(seconds(t0, Clock::now()));
  }
  // A fresh tokenizer for the timed runs: the first run fills the word cache, as HF's does.
  const auto tok = tachyon::tokenizer::Tokenizer::from_file(argv[1]);
  // Wall time, and process CPU time (the figures to trust on a shared, loaded machine).
  std::vector<double> times, cpu_times;
  size_t tokens = 0;
  for (int run = 0; run < 4; ++run) {
    const auto t0 = Clock::now();
    const std::clock_t c0 = std::clock();
    size_t n = 0;
    for (const auto& d : docs) n += tok.encode(d, false).size();
    const double dt = seconds(t0, Clock::now());
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    if (run > 0) {
      times.push_back(dt);
      cpu_times.push_back(cpu);
    }
    tokens = n;
  }
  std::vector<double> load_cpu;
  for (int i = 0; i < 3; ++i) {
    const std::clock_t c0 = std::clock();
    keep[static_cast<size_t>(i)] = tachyon::tokenizer::Tokenizer::from_file(argv[1]);
    load_cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu_times.begin(), cpu_times.end());
  std::sort(loads.begin(), loads.end());
  std::sort(load_cpu.begin(), load_cpu.end());
  std::printf(
      "{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.3f, \"cpu_seconds\": %.4f, "
      "\"cpu_mb_per_s\": %.3f, \"load_seconds\": %.4f, \"load_cpu_seconds\": %.4f}\n",
      bytes, tokens, times[1], bytes / 1e6 / times[1], cpu_times[1], bytes / 1e6 / cpu_times[1], loads[1], load_cpu[1]);
  return 0;
}
