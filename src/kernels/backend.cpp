#include "kernels/backend.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_bf16_backend.h"
#include "kernels/reference/reference_backend.h"
#include "kernels/token_sampling.h"
#ifdef TACHYON_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tachyon::kernels {

void Backend::unsupported(const char* op) const {
  throw Error("op {} is not supported by backend {}", op, name());
}
void Backend::copy_on_device(void* dst, const void* src, size_t bytes) {
  std::vector<std::byte> host(bytes);
  copy_to_host(host.data(), src, bytes);
  copy_to_device(dst, host.data(), bytes);
}
void* Backend::allocate_host(size_t bytes) {
  return ::operator new(std::max<size_t>(bytes, 1), std::align_val_t{64});
}
void Backend::deallocate_host(void* ptr) {
  if (ptr) ::operator delete(ptr, std::align_val_t{64});
}
void Backend::swap_copy(std::span<const DeviceCopy> copies, bool to_host) {
  for (const DeviceCopy& c : copies) {
    if (to_host) copy_to_host(c.dst, c.src, c.bytes);
    else copy_to_device(c.dst, c.src, c.bytes);
  }
}
Weight Backend::with_decode_copy(const Weight& prefill, const Weight& decode) {
  TACHYON_CHECK(prefill.rows == decode.rows && prefill.cols == decode.cols && !decode.decode,
                "a decode copy [{}, {}] of a weight [{}, {}]", decode.rows, decode.cols, prefill.rows, prefill.cols);
  decode_copies_.push_back(decode);
  Weight w = prefill;
  w.decode = &decode_copies_.back();
  return w;
}

bool Backend::for_each_row_kind(int64_t rows, const Weight& w,
                                const std::function<void(int64_t, int64_t, bool)>& run) const {
  if (!w.decode || decode_rows_.empty()) return false;
  TACHYON_CHECK(static_cast<int64_t>(decode_rows_.size()) == rows,
                "an op over {} rows of a weight with a decode copy, while {} rows are marked (set_decode_rows)", rows,
                decode_rows_.size());
  if (std::none_of(decode_rows_.begin(), decode_rows_.end(), [](uint8_t d) { return d != 0; })) return false;
  for (int64_t first = 0; first < rows;) {
    const bool decode = decode_rows_[first] != 0;
    int64_t end = first + 1;
    while (end < rows && (decode_rows_[end] != 0) == decode) ++end;
    run(first, end - first, decode);
    first = end;
  }
  return true;
}

MoeExperts Backend::experts_of_kind(const MoeExperts& experts, bool decode, std::vector<Weight>& storage) {
  const auto n = static_cast<size_t>(experts.num_experts);
  storage.clear();
  storage.reserve(2 * n);
  for (size_t e = 0; e < n; ++e) storage.push_back(experts.gate_up[e].of_kind(decode));
  for (size_t e = 0; e < n; ++e) storage.push_back(experts.down[e].of_kind(decode));
  MoeExperts out = experts;
  out.gate_up = storage.data();
  out.down = storage.data() + n;
  return out;
}

void Backend::join_group(std::shared_ptr<HostCollective> group, int rank) {
  if (!group || rank < 0 || rank >= group->world())
    throw Error("join_group: rank {} is outside a group of {}", rank, group ? group->world() : 0);
  group_ = std::move(group);
  group_rank_ = rank;
}
void Backend::all_reduce_sum(float* x, int64_t n) {
  if (!group_ || group_->world() == 1) return;
  group_scratch_.resize(static_cast<size_t>(n));
  copy_to_host(group_scratch_.data(), x, group_scratch_.size() * sizeof(float));
  group_->all_reduce_sum(group_rank_, group_scratch_.data(), n);
  copy_to_device(x, group_scratch_.data(), group_scratch_.size() * sizeof(float));
}
void Backend::argmax(const float* x, int64_t rows, int64_t n, int32_t* ids) {
  const std::vector<TokenSampling> greedy(static_cast<size_t>(rows));  // temperature 0: argmax_token
  sample_tokens(x, rows, n, greedy.data(), ids);
}
void Backend::sample_tokens(const float* x, int64_t rows, int64_t n, const TokenSampling* params, int32_t* ids) {
  std::vector<float> host(static_cast<size_t>(rows * n));
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  copy_to_host(host.data(), x, host.size() * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) {
    try {
      tokens[r] = sample_token(std::span<const float>(host.data() + r * n, static_cast<size_t>(n)), params[r]);
    } catch (const Error&) {  // no finite logit
      tokens[r] = -1;
    }
  }
  copy_to_device(ids, tokens.data(), tokens.size() * sizeof(int32_t));
}
TopTwo top_two_ids(const float* row, int64_t n) {
  TopTwo t;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (t.best < 0 || row[i] > row[t.best]) t.second = t.best, t.best = id;
    else if (t.second < 0 || row[i] > row[t.second]) t.second = id;
  }
  return t;
}

TopTwo top_two_of_row(const float* row, int64_t n) {
  TopTwo t = top_two_ids(row, n);
  if (t.best < 0) return t;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - row[t.best]);
  t.p_best = static_cast<float>(1.0 / sum);
  if (t.second >= 0) t.p_second = static_cast<float>(std::exp(static_cast<double>(row[t.second]) - row[t.best]) / sum);
  return t;
}

void Backend::top_two(const float* x, int64_t rows, int64_t n, TopTwo* out) {
  std::vector<float> host(static_cast<size_t>(rows * n));
  std::vector<TopTwo> best(static_cast<size_t>(rows));
  copy_to_host(host.data(), x, host.size() * sizeof(float));
  for (int64_t r = 0; r < rows; ++r) best[r] = top_two_of_row(host.data() + r * n, n);
  copy_to_device(out, best.data(), best.size() * sizeof(TopTwo));
}

void Backend::embedding_device_ids(const Weight& table, const int32_t* ids, int64_t rows, float scale, float* out) {
  std::vector<int32_t> host(static_cast<size_t>(rows));
  copy_to_host(host.data(), ids, host.size() * sizeof(int32_t));
  for (int32_t& id : host)
    if (id < 0 || id >= table.rows) id = 0;
  embedding(table, host.data(), rows, scale, out);
}

void Backend::moe_route(const float*, int64_t, const MoeRoutingParams&, int32_t*, float*) { unsupported("moe_route"); }
void Backend::moe_experts(const float*, int64_t, const int32_t*, const float*, int64_t, const MoeExperts&, float*) {
  unsupported("moe_experts");
}
void Backend::head_matmul(const float*, int64_t, int64_t, int64_t, int64_t, const Weight&, float*, int64_t, int64_t) {
  unsupported("head_matmul");
}
void Backend::copy_strided(const float*, int64_t, int64_t, int64_t, float*, int64_t) { unsupported("copy_strided"); }
void Backend::gate_multiply(float*, int64_t, int64_t, const float*, int64_t, int64_t, GateFn) {
  unsupported("gate_multiply");
}

void Backend::causal_conv1d_silu(const float*, int64_t, int64_t, const Weight&, const RecurrentMeta&, float*, int64_t,
                                 float*) {
  unsupported("causal_conv1d_silu");
}
void Backend::gated_delta_rule(const float*, int64_t, const float*, int64_t, const DeltaRuleParams&,
                               const RecurrentMeta&, float*, int64_t, float*) {
  unsupported("gated_delta_rule");
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
  if (name == "cpu-bf16") return std::make_unique<CpuBf16Backend>();
  if (name == "reference") return std::make_unique<ReferenceBackend>();
#ifdef TACHYON_HAS_CUDA
  if (name == "cuda") return make_cuda_backend();
  if (name.rfind("cuda:", 0) == 0) {
    CudaOptions options = CudaOptions::from_environment();
    const std::string index = name.substr(5);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 4)
      throw Error("unknown device '{}' (cuda:N names GPU N)", name);
    options.device = std::stoi(index);
    return make_cuda_backend(options);
  }
  throw Error("unknown device '{}' (this build supports: cpu, cpu-bf16, cuda, reference)", name);
#else
  throw Error("unknown device '{}' (this build supports: cpu, cpu-bf16, reference; cuda needs -DTACHYON_CUDA=ON)", name);
#endif
}

std::string default_device() {
#ifdef TACHYON_HAS_CUDA
  if (cuda_device_count() > 0) return "cuda";
#endif
  return "cpu";
}

}  // namespace tachyon::kernels
