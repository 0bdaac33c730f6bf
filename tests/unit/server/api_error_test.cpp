#include <gtest/gtest.h>

#include "server/api_error.h"

namespace tachyon::server {
namespace {

TEST(ApiError, OpenAIShape) {
  const ApiError e(ErrorKind::NotFound, "no such model", "model", "model_not_found");
  EXPECT_EQ(e.status(), 404);
  const Json body = error_body(e, ApiFlavor::OpenAI);
  EXPECT_EQ(body["error"]["message"], "no such model");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "model");
  EXPECT_EQ(body["error"]["code"], "model_not_found");
  EXPECT_TRUE(error_body(ApiError::invalid("x"), ApiFlavor::OpenAI)["error"]["param"].is_null());
}

TEST(ApiError, AnthropicShapeAndStatuses) {
  struct Case {
    ErrorKind kind;
    int status;
    const char* type;
  };
  const Case cases[] = {{ErrorKind::InvalidRequest, 400, "invalid_request_error"},
                        {ErrorKind::Authentication, 401, "authentication_error"},
                        {ErrorKind::NotFound, 404, "not_found_error"},
                        {ErrorKind::TooLarge, 413, "request_too_large"},
                        {ErrorKind::RateLimit, 429, "rate_limit_error"},
                        {ErrorKind::Internal, 500, "api_error"}};
  for (const Case& c : cases) {
    const ApiError e(c.kind, "m");
    EXPECT_EQ(e.status(), c.status);
    const Json body = error_body(e, ApiFlavor::Anthropic);
    EXPECT_EQ(body["type"], "error");
    EXPECT_EQ(body["error"]["type"], c.type);
    EXPECT_EQ(body["error"]["message"], "m");
  }
}

TEST(ApiError, OllamaShapeIsTheMessageAlone) {
  const ApiError e(ErrorKind::NotImplemented, "model 'm' does not support embeddings");
  EXPECT_EQ(e.status(), 501);
  EXPECT_EQ(error_body(e, ApiFlavor::Ollama), (Json{{"error", "model 'm' does not support embeddings"}}));
  EXPECT_EQ(error_body(ApiError::invalid("bad"), ApiFlavor::Ollama), (Json{{"error", "bad"}}));
}

}  // namespace
}  // namespace tachyon::server
