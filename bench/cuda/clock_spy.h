// The SM clock as a kernel sees it while other work runs: one warp, on a stream of its own,
// counts SM cycles (clock64) against the global timer (ns) for a given wall time. nvidia-smi's
// clock under the power cap is not the effective one (docs/perf/cuda.md: cuBLAS
// measured above the tensor peak per reported cycle); this reads it from inside an SM.
#pragma once

struct ClockSpyReading {
  double mhz = 0;          // SM cycles per microsecond over the spy's span
  double late_s = 0;       // how long the host waited for the spy after the measured work ended
};

class ClockSpy {
 public:
  ClockSpy();
  ~ClockSpy();
  ClockSpy(const ClockSpy&) = delete;
  ClockSpy& operator=(const ClockSpy&) = delete;
  // Launches the spy for `seconds` of wall time; it starts as soon as an SM has room for one warp.
  void start(double seconds);
  // After the measured work: waits for the spy and returns its clock.
  ClockSpyReading finish();

 private:
  void* stream_ = nullptr;
  unsigned long long* counts_ = nullptr;  // device: cycles, nanoseconds
};
