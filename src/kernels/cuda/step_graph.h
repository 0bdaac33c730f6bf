// CUDA graphs for repeated steps, without the model's cooperation. While recording, every
// kernel launch of the backend (common.cuh `launch`) and every stream copy is appended to a
// list together with a key that holds exactly what it does (kernel, launch shape, argument
// bytes; copy addresses and sizes), and the host arrays kernels read (positions, block
// tables) are staged in one pinned arena that a single upload at the start of the list
// brings to the device. At a flush (the step's first host read, or an op that must
// synchronise) the list runs: if the same key sequence ran before, a CUDA graph of it is
// replayed (captured the second time it is seen), else the ops are issued one by one. A
// decode step's key changes only when its batch shape or the attention's chunk count
// changes, so steady decoding replays one graph per (batch size, 64-token context band).
//
//   StepGraphs graphs(stream);
//   { RecordingScope rec(graphs); launch(...); ... }   // inside each graph-safe op
//   graphs.flush();                                    // before reading results on the host
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/step_graph_trace.h"

namespace tachyon::kernels::cuda {

class StepGraphs {
 public:
  // trace: print why new step keys missed their graphs (StepKeyTrace).
  StepGraphs(cudaStream_t stream, bool trace);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool enabled = true;  // off: every op is issued directly (same results)

  // Appends an operation; `key` must determine completely what it does on the device.
  void record(std::string_view key, std::function<void(cudaStream_t)> op);
  // Device address of a copy of `bytes` host bytes, valid for the recorded ops until the next
  // reset(). Staged bytes are never moved or rewritten before then, so an op may stage some
  // arrays, see a flush (a workspace growing), and stage more.
  const void* stage(const void* host, size_t bytes);
  // Issues everything recorded so far (graph replay, capture, or directly), preceded by the
  // upload of the bytes staged since the last flush.
  void flush();
  // The stream has been synchronised (no op in flight, every upload done): staging starts
  // over from the beginning of the arena, so the same step stages at the same addresses.
  void reset();
  // Overlapped steps (Backend::copy_to_host_later): everything recorded has been flushed and
  // the device may still be running it. The arena has two banks; staging moves to the other
  // one, once the step that last staged there has completed (waited for here, which at most
  // one step in flight never makes the host wait for). Each bank's steps stage at the same
  // addresses, so steady overlapped decoding replays two graphs per shape.
  void switch_bank();

  struct Counters {
    uint64_t replays = 0, captures = 0, direct = 0, capture_failures = 0;
    uint64_t first_sightings = 0;  // direct issues of a step seen for the first time
    double replay_seconds = 0, capture_seconds = 0, direct_seconds = 0;  // host time in each kind of flush
  };
  const Counters& counters() const { return counters_; }

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    int seen = 0;
    bool never = false;  // capture failed once: always direct
    uint64_t last_use = 0;
  };
  // Pinned staging memory and its device twin; more segments are added when one fills.
  struct Segment {
    std::byte* host = nullptr;
    std::byte* device = nullptr;
    size_t capacity = 0, used = 0, uploaded = 0;
  };
  void issue(cudaStream_t stream);
  void evict_if_full();

  cudaStream_t stream_;
  std::vector<std::function<void(cudaStream_t)>> ops_;
  std::string key_;
  std::vector<Segment> banks_[2];
  cudaEvent_t bank_done_[2] = {nullptr, nullptr};  // recorded after the last flush that used the bank
  int bank_ = 0;
  size_t current_ = 0;
  std::unordered_map<std::string, Entry> graphs_;
  uint64_t clock_ = 0;
  Counters counters_;
  StepKeyTrace trace_;
};

// The recorder `launch` hands kernels to on this thread, or null (issue directly).
StepGraphs*& active_step_graphs();

// Installs `graphs` for the current op when enabled (restores the previous one on exit).
class RecordingScope {
 public:
  explicit RecordingScope(StepGraphs& graphs)
      : previous_(active_step_graphs()) {
    if (graphs.enabled) active_step_graphs() = &graphs;
  }
  ~RecordingScope() { active_step_graphs() = previous_; }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  StepGraphs* previous_;
};

// Appends the object bytes of each value to `key`.
template <typename... T>
void append_key(std::string& key, const T&... values) {
  (key.append(reinterpret_cast<const char*>(&values), sizeof(T)), ...);
}

}  // namespace tachyon::kernels::cuda
