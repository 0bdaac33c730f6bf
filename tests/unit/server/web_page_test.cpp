// GET / serves the embedded chat page: HTML with its cache and security headers, a 304 for a
// current ETag, and nothing in it that would load from another origin (it must work offline).
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "server/web_page.h"

namespace tachyon::server {
namespace {

class WebPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    add_web_page_route(http_);
    port_ = http_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  void TearDown() override {
    http_.stop();
    thread_.join();
  }
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(WebPageTest, ServesThePageWithItsHeaders) {
  httplib::Client client("127.0.0.1", port_);
  auto res = client.Get("/");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(res->get_header_value("Cache-Control"), "no-cache");
  EXPECT_NE(res->get_header_value("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(res->body, std::string(chat_page()));
  const std::string etag = res->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());

  auto again = client.Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
}

TEST(WebPage, IsSelfContained) {
  const std::string page(chat_page());
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page.find("/v1/chat/completions"), std::string::npos);
  for (const char* external : {"http://", "https://", "<script src", "<link", "@import", "url("})
    EXPECT_EQ(page.find(external), std::string::npos) << external;
}

}  // namespace
}  // namespace tachyon::server
