// The HTTP server: cpp-httplib routes for the OpenAI, Anthropic and Ollama APIs over the
// served models (model_registry.h), API-key checks, the body size limit, /health and /metrics. Handlers run on a pool
// of HTTP threads; each generation blocks its thread while it pulls tokens from the engine.
//
//   server::HttpServer http(models, {.host = "127.0.0.1", .port = 8000});
//   int port = http.bind();      // port 0 picks a free one
//   http.run();                  // blocks until stop() (another thread, a signal handler's thread)
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/generation.h"
#include "server/model_registry.h"

namespace tachyon::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::vector<std::string> api_keys;    // any of them opens the API; none: no authentication
  bool metrics_auth = false;            // /metrics needs a key too (it names models and counts requests)
  std::string cors_origins = "*";       // CorsPolicy::parse (server/access.h)
  size_t max_body_bytes = size_t{4} << 20;
  int http_threads = 128;               // concurrent connections served (at least max_in_flight + 16)
  int32_t max_in_flight = 256;          // generation requests queued or running; beyond: 429
  std::chrono::milliseconds request_timeout{0};  // a generation ends with finish reason "timeout" after it; 0: none
  // A connection whose client sends nothing (request line, headers, body) or reads nothing (its
  // socket buffers full) for this long is closed, freeing its thread; a generation it held is
  // cancelled.
  std::chrono::milliseconds client_timeout{30000};
  ModelPuller pull;                     // Ollama's /api/pull; null: 501 for models not served
};

class HttpServer {
 public:
  HttpServer(std::shared_ptr<ModelRegistry> models, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws tachyon::Error when it cannot.
  int bind();
  // Serves until stop().
  void run();
  // Stops accepting connections; requests in flight finish, and run() returns once they have.
  // With a grace period, generations still running when it ends stop there with their output so
  // far (finish reason "timeout").
  void stop();
  void stop(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon::server
