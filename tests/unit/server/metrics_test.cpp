// GET /metrics text: the sliding-window layers' block pool appears where a model has one.
#include <gtest/gtest.h>

#include <string>

#include "server/metrics.h"

namespace tachyon::server {
namespace {

TEST(Metrics, SlidingWindowBlocksAreGaugedWhereTheModelHasThem) {
  HttpCounters http;
  engine::EngineStats stats;
  stats.kv_blocks_total = 100;
  stats.kv_blocks_free = 60;
  EXPECT_EQ(render_metrics("m", stats, http, 0).find("tachyon_kv_sliding"), std::string::npos);

  stats.kv_sliding_blocks_total = 48;
  stats.kv_sliding_blocks_used = 12;
  stats.kv_sliding_blocks_peak = 20;
  const std::string text = render_metrics("m", stats, http, 0);
  EXPECT_NE(text.find("tachyon_kv_sliding_blocks_total{model=\"m\"} 48\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon_kv_sliding_blocks_used{model=\"m\"} 12\n"), std::string::npos);
  EXPECT_NE(text.find("tachyon_kv_sliding_blocks_peak{model=\"m\"} 20\n"), std::string::npos);
  EXPECT_NE(text.find("tachyon_kv_blocks_used{model=\"m\"} 40\n"), std::string::npos);
}

}  // namespace
}  // namespace tachyon::server
