// Machine ceilings measured in the same run as the benchmark they bound:
// memory bandwidth (STREAM-style copy and a read-only sweep, all cores) and the f32 FMA peak.
#pragma once

namespace tachyon::bench {

struct Ceilings {
  double copy_gbps = 0;   // STREAM copy: (read + write bytes) / s
  double read_gbps = 0;   // read-only sum over a buffer much larger than the caches
  double fma_gflops = 0;  // f32 FMA throughput, all threads (2 flops per lane per FMA)
};

Ceilings measure_ceilings();

}  // namespace tachyon::bench
