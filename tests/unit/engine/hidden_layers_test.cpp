// Target hidden states shared by drafters that read different layers (engine/hidden_layers.h).
#include "engine/hidden_layers.h"

#include <gtest/gtest.h>

#include <vector>

namespace tachyon::engine {
namespace {

TEST(HiddenLayers, OneDrafterKeepsItsListSeveralGetTheUnion) {
  EXPECT_EQ(step_hidden_layers({}, 6), std::vector<int32_t>{});
  EXPECT_EQ(step_hidden_layers({{1, 3}, {1, 3}}, 6), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(step_hidden_layers({{}}, 6), std::vector<int32_t>{});  // the last layer, as the forward's default
  EXPECT_EQ(step_hidden_layers({{}, {1, 3}}, 6), (std::vector<int32_t>{5, 1, 3}));
  EXPECT_EQ(step_hidden_layers({{1, 5}, {}}, 6), (std::vector<int32_t>{1, 5}));
}

TEST(HiddenLayers, EachDrafterGetsItsOwnLayersOfEveryRow) {
  // Two rows of a step that returned layers {5, 1, 3}, hidden size 2: row r, layer l holds r·100 + l·10 + i.
  const std::vector<int32_t> step = {5, 1, 3};
  std::vector<float> rows;
  for (int r = 0; r < 2; ++r)
    for (int l : step)
      for (int i = 0; i < 2; ++i) rows.push_back(static_cast<float>(r * 100 + l * 10 + i));
  std::vector<float> scratch;
  const auto dflash = drafter_hidden_rows({1, 3}, step, 6, rows.data(), 6, 2, scratch);
  EXPECT_EQ(std::vector<float>(dflash.begin(), dflash.end()),
            (std::vector<float>{10, 11, 30, 31, 110, 111, 130, 131}));
  const auto mtp = drafter_hidden_rows({}, step, 6, rows.data(), 6, 2, scratch);
  EXPECT_EQ(std::vector<float>(mtp.begin(), mtp.end()), (std::vector<float>{50, 51, 150, 151}));
  const auto same = drafter_hidden_rows(step, step, 6, rows.data(), 6, 2, scratch);
  EXPECT_EQ(same.data(), rows.data()) << "the rows themselves where the lists agree";
  EXPECT_EQ(same.size(), rows.size());
}

}  // namespace
}  // namespace tachyon::engine
