#include "kernels/cuda/step_graph.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/error.h"
#include "kernels/cuda/common.cuh"

namespace tachyon::kernels::cuda {

namespace {
// Instantiated graphs kept (LRU). A speculative request cycles through many step shapes: the
// target's plain and verify steps, its drafter's catch-up (1..k+1 rows) and chain forwards,
// each per context band and split at every host read; with 48 the demo model's draft and MTP
// runs evicted and re-captured graphs all the time (600 captures in one sweep).
constexpr size_t kMaxGraphs = 384;
constexpr size_t kMaxKeys = 4096;  // keys seen but not (yet) captured: forgotten beyond this
constexpr size_t kAlign = 256;
}  // namespace

StepGraphs*& active_step_graphs() {
  thread_local StepGraphs* graphs = nullptr;
  return graphs;
}

StepGraphs::StepGraphs(cudaStream_t stream, bool trace) : stream_(stream), trace_(trace) {
  for (auto& e : bank_done_) TACHYON_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

StepGraphs::~StepGraphs() {
  for (auto& [key, e] : graphs_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  for (auto& bank : banks_)
    for (auto& seg : bank) {
      if (seg.host) cudaFreeHost(seg.host);
      if (seg.device) cudaFree(seg.device);
    }
  for (auto& e : bank_done_) cudaEventDestroy(e);
}

void StepGraphs::record(std::string_view key, std::function<void(cudaStream_t)> op) {
  key_.append(key);
  if (trace_.on) trace_.op_recorded(key_.size());
  ops_.push_back(std::move(op));
}

const void* StepGraphs::stage(const void* host, size_t bytes) {
  if (bytes == 0) return nullptr;
  std::vector<Segment>& segments = banks_[bank_];
  for (;; ++current_) {
    if (current_ == segments.size()) {
      Segment seg;
      seg.capacity = std::max<size_t>({2 * bytes, size_t{1} << 20, segments.empty() ? 0 : segments.back().capacity});
      seg.host = static_cast<std::byte*>(cuda_malloc_host(seg.capacity));
      try {
        seg.device = static_cast<std::byte*>(cuda_malloc(seg.capacity));
      } catch (...) {  // out of device memory: the pinned half goes back too
        cudaFreeHost(seg.host);
        throw;
      }
      segments.push_back(seg);
    }
    Segment& seg = segments[current_];
    const size_t offset = (seg.used + kAlign - 1) / kAlign * kAlign;
    if (offset + bytes <= seg.capacity) {
      std::memcpy(seg.host + offset, host, bytes);
      seg.used = offset + bytes;
      return seg.device + offset;
    }
  }
}

void StepGraphs::reset() {
  for (auto& bank : banks_)
    for (auto& seg : bank) seg.used = seg.uploaded = 0;
  bank_ = 0;
  current_ = 0;
}

void StepGraphs::switch_bank() {
  TACHYON_CHECK(ops_.empty(), "switch_bank with ops recorded and not flushed");
  TACHYON_CUDA_CHECK(cudaEventRecord(bank_done_[bank_], stream_));
  bank_ ^= 1;
  TACHYON_CUDA_CHECK(cudaEventSynchronize(bank_done_[bank_]));  // returns at once if never recorded
  for (auto& seg : banks_[bank_]) seg.used = seg.uploaded = 0;
  current_ = 0;
}

void StepGraphs::issue(cudaStream_t stream) {
  for (auto& seg : banks_[bank_])
    if (seg.used > seg.uploaded)
      TACHYON_CUDA_CHECK(cudaMemcpyAsync(seg.device + seg.uploaded, seg.host + seg.uploaded, seg.used - seg.uploaded,
                                         cudaMemcpyHostToDevice, stream));
  for (auto& op : ops_) op(stream);
}

void StepGraphs::flush() {
  std::vector<Segment>& segments = banks_[bank_];
  bool staged = false;
  for (const auto& seg : segments) staged |= seg.used > seg.uploaded;
  if (ops_.empty() && !staged) return;
  // The whole step: the uploads (addresses and ranges) and every op's key.
  for (const auto& seg : segments)
    if (seg.used > seg.uploaded) append_key(key_, seg.host, seg.device, seg.uploaded, seg.used);
  const auto t0 = std::chrono::steady_clock::now();
  double* seconds = &counters_.direct_seconds;
  auto& e = graphs_[key_];
  e.last_use = ++clock_;
  ++e.seen;
  if (e.exec) {  // its upload nodes read the staged bytes of this step when it runs
    TACHYON_CUDA_CHECK(cudaGraphLaunch(e.exec, stream_));
    ++counters_.replays;
    seconds = &counters_.replay_seconds;
  } else if (e.seen >= 2 && !e.never) {
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      issue(stream_);
      err = cudaStreamEndCapture(stream_, &graph);
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&e.exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (err == cudaSuccess) {
      TACHYON_CUDA_CHECK(cudaGraphLaunch(e.exec, stream_));
      ++counters_.captures;
      seconds = &counters_.capture_seconds;
      evict_if_full();
    } else {
      cudaGetLastError();  // clear the capture's error; this step shape runs directly from now on
      e.exec = nullptr;
      e.never = true;
      ++counters_.capture_failures;
      issue(stream_);
      ++counters_.direct;
    }
  } else {
    if (trace_.on && e.seen == 1) trace_.new_key(key_);
    counters_.first_sightings += e.seen == 1;
    issue(stream_);
    ++counters_.direct;
  }
  if (trace_.on) trace_.flushed();
  *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& seg : segments) seg.uploaded = seg.used;
  ops_.clear();
  key_.clear();
}

void StepGraphs::evict_if_full() {
  size_t live = 0;
  for (const auto& [key, e] : graphs_) live += e.exec != nullptr;
  if (live > kMaxGraphs) {
    auto oldest = graphs_.end();
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
      if (it->second.exec && (oldest == graphs_.end() || it->second.last_use < oldest->second.last_use)) oldest = it;
    cudaGraphExecDestroy(oldest->second.exec);
    graphs_.erase(oldest);
  }
  // Keys seen once and never again (prefill shapes) are forgotten now and then.
  if (graphs_.size() > kMaxKeys)
    std::erase_if(graphs_, [](const auto& kv) { return kv.second.exec == nullptr; });
}

}  // namespace tachyon::kernels::cuda
