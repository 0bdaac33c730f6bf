#include "engine/hidden_layers.h"

#include <algorithm>

#include "base/error.h"

namespace tachyon::engine {

namespace {
std::vector<int32_t> explicit_layers(const std::vector<int32_t>& layers, int32_t num_layers) {
  return layers.empty() ? std::vector<int32_t>{num_layers - 1} : layers;
}
}  // namespace

std::vector<int32_t> step_hidden_layers(const std::vector<std::vector<int32_t>>& each, int32_t num_layers) {
  if (each.empty()) return {};
  if (std::all_of(each.begin(), each.end(), [&](const auto& l) { return l == each.front(); })) return each.front();
  std::vector<int32_t> all;
  for (const auto& list : each)
    for (int32_t l : explicit_layers(list, num_layers))
      if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
  return all;
}

std::span<const float> drafter_hidden_rows(const std::vector<int32_t>& layers, const std::vector<int32_t>& step_layers,
                                           int32_t num_layers, const float* rows, int64_t step_row_size,
                                           int32_t count, std::vector<float>& scratch) {
  if (layers == step_layers)
    return {rows, static_cast<size_t>(count * step_row_size)};
  const std::vector<int32_t> want = explicit_layers(layers, num_layers), have = explicit_layers(step_layers, num_layers);
  const int64_t hidden = step_row_size / static_cast<int64_t>(have.size());
  std::vector<int64_t> offsets;
  for (int32_t l : want) {
    const auto it = std::find(have.begin(), have.end(), l);
    TACHYON_CHECK(it != have.end(), "the step returned no hidden state of layer {}", l);
    offsets.push_back((it - have.begin()) * hidden);
  }
  scratch.resize(static_cast<size_t>(count) * want.size() * static_cast<size_t>(hidden));
  float* out = scratch.data();
  for (int32_t r = 0; r < count; ++r)
    for (int64_t offset : offsets) out = std::copy_n(rows + r * step_row_size + offset, hidden, out);
  return scratch;
}

}  // namespace tachyon::engine
