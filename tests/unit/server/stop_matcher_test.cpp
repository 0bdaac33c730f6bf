#include <gtest/gtest.h>

#include "server/stop_matcher.h"

namespace tachyon::server {
namespace {

// Feeds `pieces` and returns everything released, as a client would see it.
std::string run(StopMatcher& stop, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += stop.push(p);
  return out + stop.flush();
}

TEST(StopMatcher, NoStopsReleasesEverythingAtOnce) {
  StopMatcher stop({});
  EXPECT_EQ(stop.push("abc"), "abc");
  EXPECT_FALSE(stop.matched());
}

TEST(StopMatcher, StopSplitAcrossPiecesIsFoundAndTrimmed) {
  StopMatcher stop({"END"});
  EXPECT_EQ(stop.push("hello E"), "hello ");  // "E" may start the stop string: held
  EXPECT_EQ(stop.push("N"), "");
  EXPECT_EQ(stop.push("D and more"), "");
  EXPECT_EQ(stop.matched(), "END");
  EXPECT_EQ(stop.flush(), "");
}

TEST(StopMatcher, HeldTextIsReleasedWhenItStopsLookingLikeAStop) {
  StopMatcher stop({"END"});
  EXPECT_EQ(stop.push("xE"), "x");
  EXPECT_EQ(stop.push("Nx"), "ENx");
  EXPECT_FALSE(stop.matched());
  EXPECT_EQ(stop.push("EN"), "");
  EXPECT_EQ(stop.flush(), "EN");  // the end of generation releases the tail
}

TEST(StopMatcher, EarliestMatchWinsAcrossStops) {
  StopMatcher stop({"world", "lo w"});
  EXPECT_EQ(run(stop, {"hel", "lo world"}), "hel");
  EXPECT_EQ(stop.matched(), "lo w");
}

TEST(StopMatcher, EverySplitGivesTheSameResult) {
  const std::string text = "def f(x):\n    return x\n\n\ndef g():";
  for (size_t split = 0; split <= text.size(); ++split) {
    StopMatcher stop({"\n\n\n", "never"});
    EXPECT_EQ(run(stop, {text.substr(0, split), text.substr(split)}), "def f(x):\n    return x") << split;
    EXPECT_EQ(stop.matched(), "\n\n\n");
  }
  // Byte by byte.
  StopMatcher bytes({"return"});
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  EXPECT_EQ(run(bytes, pieces), "def f(x):\n    ");
}

}  // namespace
}  // namespace tachyon::server
