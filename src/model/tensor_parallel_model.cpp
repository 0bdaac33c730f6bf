#include "model/tensor_parallel_model.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/thread_pool.h"
#include "io/config.h"
#include "kernels/collective.h"

namespace tachyon::model {

namespace {

// One rank's thread: runs the jobs it is given, one at a time, under the rank's thread pool.
class RankWorker {
 public:
  explicit RankWorker(ThreadPool& pool) : pool_(pool), thread_([this] { loop(); }) {}
  ~RankWorker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      job_ = std::move(job);
      done_ = false;
      error_ = nullptr;
    }
    cv_.notify_all();
  }
  // Waits for the job; its exception, if any.
  std::exception_ptr wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    return error_;
  }

 private:
  void loop() {
    ThreadPool::Use use(pool_);
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || job_; });
      if (stop_) return;
      std::function<void()> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      std::exception_ptr error;
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      done_ = true;
      cv_.notify_all();
    }
  }
  ThreadPool& pool_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool done_ = true, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the members it reads
};

class TensorParallelModel : public Model {
 public:
  TensorParallelModel(const std::string& dir, std::vector<std::unique_ptr<kernels::Backend>> backends,
                      const LoadOptions& options)
      : config_(io::load_model_config(dir)), backends_(std::move(backends)) {
    const int world = static_cast<int>(backends_.size());
    plan_ = plan_tensor_parallel(config_, world);
    group_ = std::make_shared<kernels::HostCollective>(world);
    const size_t cores = ThreadPool::global().num_threads();
    for (int r = 0; r < world; ++r) {
      backends_[static_cast<size_t>(r)]->join_group(group_, r);
      pools_.push_back(std::make_unique<ThreadPool>(std::max<size_t>(1, cores / static_cast<size_t>(world))));
      LoadOptions rank_options = options;
      rank_options.shard = &plan_;
      rank_options.rank = r;
      ThreadPool::Use use(*pools_.back());
      backends_[static_cast<size_t>(r)]->bind_thread();  // uploads go to rank r's device
      ranks_.push_back(load_model(dir, *backends_[static_cast<size_t>(r)], rank_options));
    }
    backends_[0]->bind_thread();
    for (int r = 1; r < world; ++r) workers_.push_back(std::make_unique<RankWorker>(*pools_[static_cast<size_t>(r)]));
    last_device_ids_.assign(static_cast<size_t>(world), nullptr);
  }

  StepOutput forward(const Batch& batch, kv::KvCache& kv) override {
    const size_t world = ranks_.size();
    for (size_t r = 1; r < world; ++r) {
      if (kv.has_storage_on(*backends_[r])) continue;
      backends_[r]->bind_thread();
      kv.add_replica(*backends_[r]);
      backends_[0]->bind_thread();
    }
    // Each rank reads the ids its own previous step left on its device; ids from elsewhere are
    // handed over through the host.
    std::vector<Batch>& rank_batches = rank_batches_;  // reused: assignment keeps their capacity
    rank_batches.resize(world);
    std::vector<int32_t> host_ids;
    if (batch.device_tokens && batch.device_tokens != last_device_ids_[0]) {
      host_ids.resize(batch.tokens.size());
      backends_[0]->copy_to_host(host_ids.data(), batch.device_tokens, host_ids.size() * sizeof(int32_t));
    }
    std::vector<StepOutput> outputs(world);
    for (size_t r = 1; r < world; ++r) {
      Batch& b = rank_batches[r] = batch;
      if (!host_ids.empty()) b.tokens = host_ids, b.device_tokens = nullptr;
      else if (batch.device_tokens) b.device_tokens = last_device_ids_[r];
      workers_[r - 1]->start([&, r] {
        backends_[r]->bind_thread();
        outputs[r] = ranks_[r]->forward(rank_batches[r], kv);
        // Only rank 0's tokens reach the host; the others' reads are collected here.
        if (outputs[r].tokens_pending) backends_[r]->wait_host_read(outputs[r].pending_read);
      });
    }
    std::exception_ptr error;
    try {
      ThreadPool::Use use(*pools_[0]);
      backends_[0]->bind_thread();
      outputs[0] = ranks_[0]->forward(batch, kv);
    } catch (...) {
      error = std::current_exception();
      group_->abort();
    }
    for (size_t r = 1; r < world; ++r) {
      std::exception_ptr e = workers_[r - 1]->wait();
      if (e && !error) {
        error = e;
        group_->abort();
      }
    }
    if (error) std::rethrow_exception(error);
    for (size_t r = 0; r < world; ++r) last_device_ids_[r] = outputs[r].device_ids;
    return std::move(outputs[0]);
  }

  void set_draft_vocabulary(int64_t n) override {
    for (auto& m : ranks_) m->set_draft_vocabulary(n);
  }
  const io::ModelConfig& config() const override { return config_; }
  kv::KvLayout kv_layout(int32_t num_blocks, int32_t block_size) const override {
    return ranks_[0]->kv_layout(num_blocks, block_size);
  }
  kernels::Backend& backend() override { return *backends_[0]; }
  bool has_decode_weights() const override { return ranks_[0]->has_decode_weights(); }

 private:
  io::ModelConfig config_;  // the whole model's
  ShardPlan plan_;
  std::vector<std::unique_ptr<kernels::Backend>> backends_;
  std::shared_ptr<kernels::HostCollective> group_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  std::vector<std::unique_ptr<Model>> ranks_;
  std::vector<std::unique_ptr<RankWorker>> workers_;  // ranks 1..N-1
  std::vector<const int32_t*> last_device_ids_;
  std::vector<Batch> rank_batches_;  // forward's per-rank copies of the batch (index 0 unused)
};

}  // namespace

std::unique_ptr<Model> load_tensor_parallel_model(const std::string& dir,
                                                  std::vector<std::unique_ptr<kernels::Backend>> backends,
                                                  const LoadOptions& options) {
  if (backends.empty()) throw Error("tensor parallelism needs at least one backend");
  return std::make_unique<TensorParallelModel>(dir, std::move(backends), options);
}

}  // namespace tachyon::model
