#include "server/access.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace tachyon::server {
namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(ApiKeys, AcceptsEveryKeyExactlyAndNothingElse) {
  const ApiKeys keys({"alpha", "beta-2", ""});
  EXPECT_TRUE(keys.required());
  EXPECT_EQ(keys.size(), 2u);  // an empty key is no key
  EXPECT_TRUE(keys.accepts("alpha"));
  EXPECT_TRUE(keys.accepts("beta-2"));
  for (const char* bad : {"", "alph", "alphaa", "Alpha", "beta-", "beta-22", "alpha\n"}) EXPECT_FALSE(keys.accepts(bad)) << bad;
  EXPECT_FALSE(ApiKeys().required());
}

TEST(ApiKeys, FileHoldsOneKeyPerLineWithCommentsAndBlankLines) {
  const auto path = write_file("tachyon_keys_ok.txt", "# ops\n  k1  \n\nk2\r\n#k3\n");
  EXPECT_EQ(read_api_key_file(path), (std::vector<std::string>{"k1", "k2"}));
}

TEST(ApiKeys, UnreadableEmptyOrMalformedFilesAreRefusedWithoutEchoingKeys) {
  EXPECT_THROW(read_api_key_file("/nonexistent/keys.txt"), Error);
  EXPECT_THROW(read_api_key_file(write_file("tachyon_keys_empty.txt", "# nothing\n\n")), Error);
  try {
    read_api_key_file(write_file("tachyon_keys_space.txt", "secret part\n"));
    FAIL() << "a key with a space was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

TEST(CorsPolicy, AnyNoneAndLists) {
  EXPECT_EQ(CorsPolicy::parse("*").allow_origin("https://x.example"), "*");
  EXPECT_FALSE(CorsPolicy::parse("*").varies_by_origin());
  EXPECT_EQ(CorsPolicy::parse("none").allow_origin("https://x.example"), "");
  const CorsPolicy list = CorsPolicy::parse("https://a.example, http://localhost:3000");
  EXPECT_TRUE(list.varies_by_origin());
  EXPECT_EQ(list.allow_origin("https://a.example"), "https://a.example");
  EXPECT_EQ(list.allow_origin("http://localhost:3000"), "http://localhost:3000");
  EXPECT_EQ(list.allow_origin("https://a.example.evil"), "");
  EXPECT_EQ(list.allow_origin(""), "");
}

TEST(CorsPolicy, RefusesWhatIsNotAnOrigin) {
  for (const char* bad : {"a.example", "https://a.example/path", "ftp://a.example", "https://", "https://a b"})
    EXPECT_THROW(CorsPolicy::parse(bad), Error) << bad;
}

}  // namespace
}  // namespace tachyon::server
