// The switch and the launch counts of the attention kernels' K-and-V-apart variant (attention.cuh).
#include <atomic>
#include <cstdint>

#include "kernels/cuda/attention.cuh"

namespace tachyon::kernels::cuda {
namespace {
std::atomic<bool> g_forced{false};
std::atomic<uint64_t> g_query_tiles{0}, g_decode{0};
}  // namespace

void force_attention_kv_apart(bool on) { g_forced.store(on); }
bool attention_kv_apart_forced() { return g_forced.load(std::memory_order_relaxed); }
KvApartLaunches attention_kv_apart_launches() { return {g_query_tiles.load(), g_decode.load()}; }
void count_attention_kv_apart_launch(bool decode) { (decode ? g_decode : g_query_tiles).fetch_add(1); }

}  // namespace tachyon::kernels::cuda
