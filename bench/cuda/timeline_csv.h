// The step timeline's records (src/kernels/cuda/step_timeline.h) as CSV, one row each, times in
// ns from the first record: what bench/cuda/decode_timeline.py and attention_timeline.py read.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/step_timeline.h"

inline void write_timeline(const std::vector<tachyon::kernels::cuda::TimelineRecord>& records, const std::string& path) {
  uint64_t t0 = UINT64_MAX;
  for (const auto& r : records) t0 = std::min(t0, r.t_call);
  std::ofstream f(path);
  f << "t_call,t_return,sm,block,grid,threads,smem,kind\n";
  for (const auto& r : records)
    f << r.t_call - t0 << ',' << r.t_return - t0 << ',' << r.sm << ',' << r.block << ',' << r.grid << ',' << r.threads
      << ',' << r.smem << ',' << r.kind << '\n';
  std::printf("timeline: %zu records to %s\n", records.size(), path.c_str());
}
