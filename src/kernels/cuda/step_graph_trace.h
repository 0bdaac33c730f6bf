// Why steps keep missing their graphs: with CudaOptions::graph_trace (TACHYON_GRAPH_TRACE=1,
// cuda_options.h), every step key seen for
// the first time is compared with the most similar earlier key of as many ops, and stderr gets
// the first op that differs (kernel name), the byte, and the differing 8-byte words (old ->
// new). A kernel's key is its address, grid, block and shared memory (40 bytes), then its
// arguments; a pointer that differs between requests or a launch shape that follows the
// context length shows up here.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tachyon::kernels::cuda {

class StepKeyTrace {
 public:
  const bool on;
  explicit StepKeyTrace(bool on) : on(on) {}
  void op_recorded(size_t key_size) { ends_.push_back(key_size); }  // the step key's length after an op
  void new_key(const std::string& key);                              // a step key never seen before
  void flushed() { ends_.clear(); }

 private:
  struct Seen {
    std::string key;
    std::vector<size_t> ends;
  };
  std::vector<Seen> seen_;
  std::vector<size_t> ends_;  // of the step being recorded
};

}  // namespace tachyon::kernels::cuda
