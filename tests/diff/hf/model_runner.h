// Test helper: a model, a backend and a KV cache, with one-call prefill/decode helpers.
#pragma once

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::testing {

struct ModelRunner {
  explicit ModelRunner(const std::string& dir, const std::string& device = "cpu", int32_t num_blocks = 256)
      : ModelRunner(dir, kernels::make_backend(device), num_blocks) {}
  ModelRunner(const std::string& dir, std::unique_ptr<kernels::Backend> on, int32_t num_blocks = 256)
      : backend(std::move(on)),
        model(model::load_model(dir, *backend)),
        kv(std::make_unique<kv::KvCache>(*backend, model->kv_layout(num_blocks))) {}

  int64_t vocab() const { return model->config().vocab_size; }

  // Runs `ids` of a fresh sequence in one forward; returns logits of every row [T, V].
  std::vector<float> full_logits(const std::vector<int32_t>& ids) {
    auto seq = kv->add_sequence();
    kv->reserve(seq, static_cast<int32_t>(ids.size()));
    model::Batch batch;
    batch.add(seq, ids, 0, model::LogitRows::All);
    auto out = model->forward(batch, *kv);
    kv->remove_sequence(seq);
    return out.logits;
  }

  // Feeds `ids` in chunks of the given sizes (sum = ids.size()); returns every row's logits.
  std::vector<float> chunked_logits(const std::vector<int32_t>& ids, const std::vector<int>& chunks) {
    auto seq = kv->add_sequence();
    std::vector<float> all;
    int32_t pos = 0;
    for (int c : chunks) {
      kv->reserve(seq, pos + c);
      model::Batch batch;
      batch.add(seq, std::span<const int32_t>(ids.data() + pos, static_cast<size_t>(c)), pos, model::LogitRows::All);
      auto out = model->forward(batch, *kv);
      all.insert(all.end(), out.logits.begin(), out.logits.end());
      pos += c;
    }
    kv->remove_sequence(seq);
    return all;
  }

  // Greedy: prefill `prompt`, then decode `n` tokens one per forward. Returns the tokens and
  // the logits that chose each of them ([n, V]).
  std::pair<std::vector<int32_t>, std::vector<float>> greedy(const std::vector<int32_t>& prompt, int n) {
    auto seq = kv->add_sequence();
    std::vector<int32_t> tokens;
    std::vector<float> step_logits;
    std::vector<int32_t> feed = prompt;
    int32_t pos = 0;
    for (int i = 0; i < n; ++i) {
      kv->reserve(seq, pos + static_cast<int32_t>(feed.size()));
      model::Batch batch;
      batch.add(seq, feed, pos, model::LogitRows::Last);
      auto out = model->forward(batch, *kv);
      pos += static_cast<int32_t>(feed.size());
      int32_t best = 0;
      for (int64_t v = 1; v < vocab(); ++v)
        if (out.logits[v] > out.logits[best]) best = static_cast<int32_t>(v);
      tokens.push_back(best);
      step_logits.insert(step_logits.end(), out.logits.begin(), out.logits.end());
      feed = {best};
    }
    kv->remove_sequence(seq);
    return {tokens, step_logits};
  }

  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<kv::KvCache> kv;
};

inline std::vector<int32_t> read_ids(const io::Checkpoint& golden, const std::string& name) {
  const auto& t = golden.get(name);
  std::vector<int32_t> ids(static_cast<size_t>(t.num_elements()));
  const auto* src = static_cast<const int64_t*>(t.data);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(src[i]);
  return ids;
}

inline std::vector<float> read_f32(const io::Checkpoint& golden, const std::string& name) {
  const auto& t = golden.get(name);
  const auto* src = static_cast<const float*>(t.data);
  return {src, src + t.num_elements()};
}

// max|a - b| / max|b|
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return a.size() == b.size() ? diff / scale : INFINITY;
}

// A model directory whose config.json is `config_file` of `fixture_dir` (the rest symlinked).
inline std::string with_config(const std::string& fixture_dir, const std::string& config_file) {
  namespace fs = std::filesystem;
  if (config_file == "config.json") return fixture_dir;
  const fs::path dir = fs::temp_directory_path() /
                       ("tachyon-" + fs::path(fixture_dir).filename().string() + "-" + config_file + "-" +
                        std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(fixture_dir)) {
    const auto name = entry.path().filename().string();
    if (name == "config.json" || name == config_file) continue;
    fs::remove(dir / name);
    fs::create_symlink(fs::absolute(entry.path()), dir / name);
  }
  fs::remove(dir / "config.json");
  fs::copy_file(fs::path(fixture_dir) / config_file, dir / "config.json");
  return dir.string();
}

}  // namespace tachyon::testing
