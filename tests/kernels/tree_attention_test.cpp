// Tree verification's attention (kernels/ops.h kMaxTreeDepth): each row of a draft tree must
// compute exactly the bits that plain decoding of its own branch computes — the K/V written at
// tree positions, read back through the row's path — on every backend (CUDA when visible).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/backend.h"

namespace tachyon::kernels {
namespace {

constexpr int32_t kBlock = 4, kBlocksPerSeq = 6, kHeads = 4, kKvHeads = 2, kDim = 64;
constexpr int64_t kWidth = kKvHeads * kDim;

class TreeAttention : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      backend_ = make_backend(GetParam());
    } catch (const std::exception& e) {
      GTEST_SKIP() << GetParam() << " backend unavailable: " << e.what();
    }
  }
  void TearDown() override {
    for (void* p : owned_) backend_->deallocate(p);
  }
  float* upload(const std::vector<float>& host) {
    void* p = backend_->allocate(std::max<size_t>(1, host.size()) * sizeof(float));
    owned_.push_back(p);
    backend_->copy_to_device(p, host.data(), host.size() * sizeof(float));
    return static_cast<float*>(p);
  }
  std::vector<float> download(const float* device, size_t n) {
    std::vector<float> host(n);
    backend_->copy_to_host(host.data(), device, n * sizeof(float));
    return host;
  }
  std::unique_ptr<Backend> backend_;
  std::vector<void*> owned_;
};

TEST_P(TreeAttention, EachTreeRowMatchesDecodingItsBranchBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  };
  const int32_t prefix = 9;  // committed positions 0..8; the tree's root is position 9
  // root(0) -> 1 -> 2 -> 6; root -> 3 -> 4; 1 -> 5
  const std::vector<int32_t> parents = {-1, 0, 1, 0, 3, 1, 2};
  const int32_t nodes = static_cast<int32_t>(parents.size());
  std::vector<int32_t> depth(static_cast<size_t>(nodes), 0);
  for (int32_t i = 1; i < nodes; ++i) depth[i] = depth[parents[i]] + 1;

  const auto prefix_k = random(prefix * kWidth), prefix_v = random(prefix * kWidth);
  const auto node_k = random(nodes * kWidth), node_v = random(nodes * kWidth);
  const auto node_q = random(nodes * kHeads * kDim);
  PagedKv kv{upload(std::vector<float>(2 * kBlocksPerSeq * kBlock * kWidth, 0.f)), nullptr, kBlock, kKvHeads, kDim};
  kv.v = upload(std::vector<float>(2 * kBlocksPerSeq * kBlock * kWidth, 0.f));
  // Sequence 0 holds the tree, sequence 1 one branch at a time (plain positions).
  std::vector<int32_t> tables(2 * kBlocksPerSeq), offsets = {0, kBlocksPerSeq, 2 * kBlocksPerSeq};
  for (int32_t b = 0; b < 2 * kBlocksPerSeq; ++b) tables[b] = (b * 5) % (2 * kBlocksPerSeq);  // scattered blocks

  // The committed prefix, in both sequences.
  for (int32_t s = 0; s < 2; ++s) {
    std::vector<int32_t> pos(prefix), seq(prefix, 0);
    for (int32_t p = 0; p < prefix; ++p) pos[p] = p;
    const int32_t off[2] = {0, kBlocksPerSeq};
    AttentionMeta m{pos.data(), seq.data(), tables.data() + off[s], offsets.data()};
    backend_->write_kv(upload(prefix_k), upload(prefix_v), prefix, kv, m);
  }

  for (int64_t window : {0, 6}) {
    AttentionParams params{kHeads, 0.125f, window, 0.f, nullptr};
    // The tree: rows at logical positions prefix + depth, K/V at prefix + node index.
    std::vector<int32_t> pos(nodes), seq(nodes, 0), base(nodes, prefix), path(nodes * kMaxTreeDepth, 0);
    for (int32_t i = 0; i < nodes; ++i) {
      pos[i] = prefix + depth[i];
      for (int32_t n = i; n >= 0; n = parents[n]) {
        path[i * kMaxTreeDepth + depth[n]] = n;
        if (n == 0) break;
      }
    }
    AttentionMeta tree{pos.data(), seq.data(), tables.data(), offsets.data(), base.data(), path.data()};
    backend_->write_kv(upload(node_k), upload(node_v), nodes, kv, tree);
    float* out = upload(std::vector<float>(nodes * kHeads * kDim, 0.f));
    backend_->attention(upload(node_q), nodes, kv, tree, params, out);
    const auto tree_out = download(out, static_cast<size_t>(nodes * kHeads * kDim));

    for (int32_t i = 0; i < nodes; ++i) {
      // The branch root..i as a plain chain in sequence 1, decoded one row at a time.
      std::vector<int32_t> branch;
      for (int32_t n = i; n >= 0; n = parents[n]) {
        branch.insert(branch.begin(), n);
        if (n == 0) break;
      }
      std::vector<float> chain_out;
      for (size_t d = 0; d < branch.size(); ++d) {
        const int32_t n = branch[d];
        int32_t p = prefix + static_cast<int32_t>(d), s = 0;
        AttentionMeta m{&p, &s, tables.data() + kBlocksPerSeq, offsets.data()};
        const std::vector<float> k(node_k.begin() + n * kWidth, node_k.begin() + (n + 1) * kWidth);
        const std::vector<float> v(node_v.begin() + n * kWidth, node_v.begin() + (n + 1) * kWidth);
        backend_->write_kv(upload(k), upload(v), 1, kv, m);
        const std::vector<float> q(node_q.begin() + n * kHeads * kDim, node_q.begin() + (n + 1) * kHeads * kDim);
        float* o = upload(std::vector<float>(kHeads * kDim, 0.f));
        backend_->attention(upload(q), 1, kv, m, params, o);
        chain_out = download(o, kHeads * kDim);
      }
      EXPECT_EQ(0, std::memcmp(chain_out.data(), tree_out.data() + i * kHeads * kDim, chain_out.size() * sizeof(float)))
          << GetParam() << ": tree row " << i << " (depth " << depth[i] << ", window " << window
          << ") differs from decoding its branch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TreeAttention, ::testing::Values("reference", "cpu", "cuda"));

}  // namespace
}  // namespace tachyon::kernels
