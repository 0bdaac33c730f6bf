// The prefix cache's disk tier through the engine: an engine on a folder, destroyed (it writes
// its cached blocks), and a new engine on the same folder give the same greedy tokens for the
// same prompt with its prefix loaded from disk — for the demo model in bf16 and int8 KV, and
// for a hybrid model (Qwen3-Next), whose recurrent-state snapshots travel with the blocks.
// A memory-only engine is the control (nothing cached), another fingerprint sees nothing, and
// corrupt files are removed, never loaded (the output stays the control's). The same on a CUDA
// device (skipped without one; bench/cuda/run_cuda_tests.sh runs them there): the blocks cross
// the bus with the backend's copy_to_host / copy_to_device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_test_helpers.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::engine {
namespace {

namespace fs = std::filesystem;
using test_helpers::collect;
using test_helpers::idle_stats;

struct Case {
  const char* name;
  const char* model_dir;  // relative to the source tree
  std::optional<kernels::KvFormat> format;
  int32_t vocab;
  const char* device = "cpu";
};

class DiskPrefixEngine : public ::testing::TestWithParam<Case> {};

struct Outcome {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
  EngineStats stats;
};

Outcome run_once(model::Model& model, const EngineConfig& config, const std::vector<int32_t>& prompt) {
  Engine engine(model, config);
  GenerationRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.max_tokens = 12;
  RequestOutput last;
  Outcome out;
  out.tokens = collect(*engine.submit(r), &last);
  out.cached = last.num_cached_prompt_tokens;
  out.stats = idle_stats(engine);
  return out;
}

// The block files under `dir` (one folder per fingerprint).
std::vector<fs::path> block_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".kvblock") files.push_back(e.path());
  return files;
}

// Flips one byte of the file's payload (past the 48-byte header): only its checksum can tell.
void corrupt_payload(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f) << file;
  f.seekg(-1, std::ios::end);
  const char last = static_cast<char>(f.get());
  f.seekp(-1, std::ios::end);
  f.put(static_cast<char>(last ^ 0x5a));
}

TEST_P(DiskPrefixEngine, ARestartedEngineReusesThePrefixWithTheSameTokens) {
  const Case& c = GetParam();
  if (std::string(c.device) == "cuda" && kernels::default_device() != "cuda") GTEST_SKIP() << "no CUDA device visible";
  const fs::path dir = fs::temp_directory_path() / ("tachyon_disk_engine_" + std::to_string(::getpid()) + "_" + c.name);
  fs::remove_all(dir);
  auto backend = kernels::make_backend(c.device);
  const auto model = model::load_model(std::string(TACHYON_SOURCE_DIR) + "/" + c.model_dir, *backend);
  std::mt19937 rng(49);
  std::vector<int32_t> prompt(83);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab));

  EngineConfig memory_only{.max_concurrent = 2, .num_blocks = 64, .kv_format = c.format};
  const Outcome control = run_once(*model, memory_only, prompt);
  EXPECT_EQ(control.cached, 0);
  EXPECT_FALSE(control.stats.disk_prefix_enabled);

  EngineConfig disk = memory_only;
  disk.prefix_cache_dir = dir.string();
  disk.model_fingerprint = 0x4242;
  const Outcome cold = run_once(*model, disk, prompt);  // writes its blocks when destroyed
  EXPECT_EQ(cold.tokens, control.tokens);
  EXPECT_EQ(cold.cached, 0);
  EXPECT_EQ(cold.stats.disk_prefix_hit_blocks, 0u);

  const Outcome warm = run_once(*model, disk, prompt);  // a new engine, a new KV pool: only the disk has it
  EXPECT_EQ(warm.tokens, control.tokens) << "the disk-loaded prefix changed the output";
  EXPECT_GT(warm.cached, 0);
  EXPECT_EQ(warm.cached % 16, 0);
  // Every cached token came from disk. A hybrid model may load more blocks than it keeps: its
  // prefix ends at the last block with a state snapshot (the others stay cached in memory).
  if (std::string(c.name).find("hybrid") == std::string::npos)
    EXPECT_EQ(warm.stats.disk_prefix_hit_blocks, static_cast<uint64_t>(warm.cached / 16));
  else
    EXPECT_GE(warm.stats.disk_prefix_hit_blocks, static_cast<uint64_t>(warm.cached / 16));
  EXPECT_EQ(warm.stats.disk_prefix_rejected, 0u);
  EXPECT_GT(warm.stats.disk_prefix_files, 0);
  const fs::path model_folder = block_files(dir).at(0).parent_path();  // the only fingerprint so far

  EngineConfig other_weights = disk;
  other_weights.model_fingerprint = 0x4343;  // another model's engine on the same folder
  const Outcome foreign = run_once(*model, other_weights, prompt);
  EXPECT_EQ(foreign.cached, 0);
  EXPECT_EQ(foreign.stats.disk_prefix_hit_blocks, 0u);

  // Every file of this model corrupted: the first lookup reads the prompt's first block, finds
  // the checksum wrong, removes the file and computes the prompt (the control's tokens).
  const size_t model_files = block_files(model_folder).size();
  for (const fs::path& f : block_files(model_folder)) corrupt_payload(f);
  const Outcome corrupt = run_once(*model, disk, prompt);
  EXPECT_EQ(corrupt.tokens, control.tokens) << "a corrupt block file changed the output";
  EXPECT_EQ(corrupt.cached, 0);
  EXPECT_EQ(corrupt.stats.disk_prefix_hit_blocks, 0u);
  EXPECT_GE(corrupt.stats.disk_prefix_rejected, 1u);
  EXPECT_EQ(static_cast<size_t>(corrupt.stats.disk_prefix_files) + corrupt.stats.disk_prefix_rejected, model_files)
      << "the rejected files are gone from the folder";
  // That engine wrote the removed block again at shutdown (the others, still on disk, are found
  // corrupt one by one as later lookups reach them): the next engine reads it back.
  const Outcome healed = run_once(*model, disk, prompt);
  EXPECT_EQ(healed.tokens, control.tokens);
  EXPECT_GE(healed.stats.disk_prefix_hit_blocks, 1u);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, DiskPrefixEngine,
    ::testing::Values(Case{"demo_bf16", "models/tachyon-demo", kernels::KvFormat::BF16, 8000},
                      Case{"demo_int8", "models/tachyon-demo", kernels::KvFormat::Int8, 8000},
                      Case{"qwen3_next_hybrid", "tests/fixtures/hf/qwen3_next", std::nullopt, 512},
                      // Sliding-window layers: released in memory only; under a disk tier every block is kept.
                      Case{"gemma3_sliding", "tests/fixtures/hf/gemma3_text", std::nullopt, 512},
                      Case{"cuda_demo_bf16", "models/tachyon-demo", kernels::KvFormat::BF16, 8000, "cuda"},
                      Case{"cuda_demo_int8", "models/tachyon-demo", kernels::KvFormat::Int8, 8000, "cuda"},
                      Case{"cuda_qwen3_next_hybrid", "tests/fixtures/hf/qwen3_next", std::nullopt, 512, "cuda"},
                      Case{"cuda_gemma3_sliding", "tests/fixtures/hf/gemma3_text", std::nullopt, 512, "cuda"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tachyon::engine
