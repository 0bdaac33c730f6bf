#include "server/server.h"

#include <sys/socket.h>

#include <httplib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"
#include "base/logging.h"
#include "server/access.h"
#include "server/api_error.h"
#include "server/connection_threads.h"
#include "server/connection_watch.h"
#include "server/handlers.h"
#include "server/metrics.h"
#include "server/ollama.h"
#include "server/sse.h"
#include "server/web_page.h"

namespace tachyon::server {

namespace {

ApiFlavor flavor_of(const std::string& path) {
  if (path.rfind("/api/", 0) == 0) return ApiFlavor::Ollama;
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::Anthropic : ApiFlavor::OpenAI;
}

void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& error) {
  res.status = error.status();
  res.set_content(dump_json(error_body(error, flavor_of(req.path))), "application/json");
}

// httplib::Server whose listening socket we can reach (httplib keeps it in a protected member).
//
// Debian's cpp-httplib 0.11 is a shared library that listens with a backlog of 5
// (CPPHTTPLIB_LISTEN_BACKLOG is compiled into the .so; defining it here changes nothing). A
// burst of clients connecting while the accept thread is off the CPU (a busy 2-core box,
// prefill running) overflows that queue: the kernel drops handshakes and ACKs, falls back to
// SYN cookies, and resets some connections when the client retransmits (issue #5: 8 of 96
// streaming requests reset at 32 clients; each reset came with a ListenOverflow and a failed
// SYN-cookie check in nstat). Linux lets listen() on a listening socket change its backlog,
// so bind() calls it again with SOMAXCONN (the kernel caps it at net.core.somaxconn).
class ListeningServer : public httplib::Server {
 public:
  int listening_socket() const { return svr_sock_; }
};

void raise_listen_backlog(int fd) {
  if (::listen(fd, SOMAXCONN) != 0) throw Error("cannot set the listen backlog: {}", std::strerror(errno));
}

// Back-pressure from a client that reads slowly or not at all. Linux grows a socket's send
// buffer with the traffic, up to net.ipv4.tcp_wmem's 4 MiB: a stream to a client that stopped
// reading kept generating (tokens, KV, a thread) until megabytes piled up in the kernel, so its
// writes never waited long enough for --client-timeout to end it. A fixed send buffer (the
// kernel doubles the value; accepted connections inherit it from the listening socket) holds a
// few hundred tokens of SSE, far more than any reader keeping up needs on the way.
constexpr int kSendBufferBytes = 64 << 10;
void bound_send_buffer(int fd) {
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSendBufferBytes, sizeof kSendBufferBytes) != 0)
    throw Error("cannot set the send buffer size: {}", std::strerror(errno));
}

// httplib's task queue on ConnectionThreads: threads on demand, each replaced after a few
// connections so that what a connection thread keeps (the allocator's per-thread cache,
// thread-local scratch) stays bounded on a long-running server (connection_threads.h).
constexpr size_t kConnectionsPerThread = 8;
class ConnectionQueue : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(size_t max_threads) : threads_(max_threads, kConnectionsPerThread) {}
  void enqueue(std::function<void()> connection) override { threads_.enqueue(std::move(connection)); }
  void shutdown() override { threads_.shutdown(); }

 private:
  ConnectionThreads threads_;
};

// The "model" (Ollama: or "name") of a JSON body; "" when absent or the body is not JSON (the
// handler's own parse then says what is wrong).
std::string requested_model(const std::string& body) {
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object()) return "";
  for (const char* key : {"model", "name"})
    if (auto it = j.find(key); it != j.end() && it->is_string()) return it->get<std::string>();
  return "";
}

// A streamed answer is written after its handler returned: the lease goes with the content
// provider, which is destroyed first (it holds the Generation that refers to the model).
void hold_until_sent(httplib::Response& res, ModelRegistry::Lease model) {
  if (!res.content_provider_) return;
  struct Held {
    ModelRegistry::Lease model;
    httplib::ContentProvider provider;
  };
  auto held = std::make_shared<Held>(Held{std::move(model), std::move(res.content_provider_)});
  res.content_provider_ = [held](size_t offset, size_t length, httplib::DataSink& sink) {
    return held->provider(offset, length, sink);
  };
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<ModelRegistry> models;
  int64_t started = unix_time();
  ServerOptions options;
  ApiKeys keys;
  CorsPolicy cors;
  Admission admission;
  HttpCounters counters;
  ResponseStore responses;  // the Responses API's previous_response_id
  ListeningServer http;
  int port = 0;

  Impl(std::shared_ptr<ModelRegistry> m, ServerOptions o)
      : models(std::move(m)),
        options(std::move(o)),
        keys(options.api_keys),
        cors(CorsPolicy::parse(options.cors_origins)),
        admission(options.max_in_flight, options.request_timeout) {}

  bool authorized(const httplib::Request& req) const {
    if (!keys.required()) return true;
    std::string key = req.get_header_value("x-api-key");
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Bearer ", 0) == 0) key = auth.substr(7);
    return keys.accepts(key);
  }
  static void refuse_unauthorized() {
    throw ApiError(ErrorKind::Authentication, "Invalid API key: pass it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
                   "", "invalid_api_key");
  }

  // Wraps an endpoint: authentication, error rendering, counters.
  httplib::Server::Handler wrap(HttpCounters::Route route,
                                std::function<void(const httplib::Request&, httplib::Response&)> handler) {
    return [this, route, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!authorized(req)) refuse_unauthorized();
        handler(req, res);
      } catch (const ApiError& e) {
        send_error(req, res, e);
      } catch (const Error& e) {
        send_error(req, res, ApiError::invalid(e.what()));
      } catch (const std::exception& e) {
        log::error("{} {}: {}", req.method, req.path, e.what());
        send_error(req, res, ApiError(ErrorKind::Internal, fmt::format("internal error: {}", e.what())));
      }
      // A handler that succeeded leaves the status unset (-1); httplib sends 200.
      counters.count(route, res.status == -1 ? 200 : res.status);
    };
  }

  // The context length is known once the model is loaded.
  Json model_json(const ModelEntry& entry) const {
    const std::shared_ptr<const ServedModel> model = models->loaded(entry.name);
    Json j = {{"id", entry.name}, {"object", "model"}, {"created", model ? model->created : started},
              {"owned_by", "tachyon"}};
    if (model) j["max_model_len"] = model->max_context;
    return j;
  }

  // Ollama's /api/* on the same port (ollama.h).
  template <typename Generation>
  void add_ollama_routes(const Generation& generation) {
    using Req = const httplib::Request&;
    using Res = httplib::Response&;
    constexpr auto kOllama = HttpCounters::kOllamaOther;
    http.Post("/api/chat", wrap(HttpCounters::kOllamaChat, generation(handle_ollama_chat)));
    http.Post("/api/generate", wrap(HttpCounters::kOllamaGenerate, generation(handle_ollama_generate)));
    http.Get("/api/tags", wrap(kOllama, [this](Req, Res res) { handle_ollama_tags(*models, started, res); }));
    http.Get("/api/ps", wrap(kOllama, [this](Req, Res res) { handle_ollama_ps(*models, res); }));
    http.Post("/api/show", wrap(kOllama, [this](Req req, Res res) { handle_ollama_show(*models, req.body, res); }));
    http.Post("/api/pull", wrap(kOllama, [this](Req req, Res res) { handle_ollama_pull(*models, options.pull, req.body, res); }));
    http.Post("/api/embed", wrap(kOllama, generation(handle_ollama_embed)));
    http.Post("/api/embeddings", wrap(kOllama, generation(handle_ollama_embeddings)));
    // Clients probe the version as a liveness check, so it stays open like /health.
    http.Get("/api/version", [this](Req, Res res) {
      handle_ollama_version(res);
      counters.count(HttpCounters::kOllamaOther, res.status);
    });
    auto refuse = wrap(kOllama, [](Req req, Res) { refuse_ollama_model_management(req.method + " " + req.path); });
    for (const char* path : {"/api/create", "/api/copy", "/api/push", R"(/api/blobs/(.+))"}) http.Post(path, refuse);
    http.Delete("/api/delete", refuse);
    http.Get(R"(/api/blobs/(.+))", refuse);  // httplib answers HEAD through the GET route
  }

  // The engine metrics are the most recently used loaded model's (zeros before any loads); the
  // registry's loads and unloads follow.
  std::string metrics_text() const {
    const std::vector<std::string> loaded = models->loaded_names();
    std::shared_ptr<const ServedModel> model = loaded.empty() ? nullptr : models->loaded(loaded.front());
    const std::optional<ResponseCacheStats> response_cache =
        model && model->response_cache ? std::optional(model->response_cache->stats()) : std::nullopt;
    std::string out = render_metrics(model ? model->id : models->find("").name,
                                     model ? model->engine->stats() : engine::EngineStats{}, counters,
                                     admission.in_flight(), response_cache ? &*response_cache : nullptr);
    const ModelRegistry::Counts c = models->counts();
    auto metric = [&out](const char* name, const char* type, const char* help, int64_t value) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    metric("tachyon_models_served", "gauge", "Models the server serves (loaded or not).",
           static_cast<int64_t>(models->size()));
    metric("tachyon_models_loaded", "gauge", "Models loaded now.", c.loaded);
    metric("tachyon_model_loads_total", "counter", "Models loaded since the start.", c.loads);
    metric("tachyon_model_unloads_total", "counter", "Models unloaded to make room for another.", c.unloads);
    return out;
  }

  void add_routes() {
    // The request's model, loaded if it is not, leased until its answer is sent. One model
    // served: no body is parsed twice; the handler's check_model still checks the name.
    auto generation = [this](void (*fn)(HandlerContext, const std::string&, httplib::Response&)) {
      return [this, fn](const httplib::Request& req, httplib::Response& res) {
        ModelRegistry::Lease model = models->acquire(models->size() > 1 ? requested_model(req.body) : "");
        HandlerContext c{*model, admission, nullptr, models.get(), &responses};
        c.client_gone = [watch = std::make_shared<ConnectionWatch>(req)] { return watch->closed(); };
        fn(c, req.body, res);
        hold_until_sent(res, std::move(model));
      };
    };
    http.Post("/v1/chat/completions", wrap(HttpCounters::kChat, generation(handle_chat_completions)));
    http.Post("/v1/completions", wrap(HttpCounters::kCompletions, generation(handle_completions)));
    http.Post("/v1/responses", wrap(HttpCounters::kResponses, generation(handle_responses)));
    http.Post("/v1/messages", wrap(HttpCounters::kMessages, generation(handle_messages)));
    http.Post("/v1/messages/count_tokens", wrap(HttpCounters::kMessages, generation(handle_count_tokens)));
    http.Post("/v1/embeddings", wrap(HttpCounters::kOther, generation(handle_embeddings)));
    http.Post("/tokenize", wrap(HttpCounters::kOther, generation(handle_tokenize)));
    http.Post("/detokenize", wrap(HttpCounters::kOther, generation(handle_detokenize)));
    http.Get("/v1/models", wrap(HttpCounters::kModels, [this](const httplib::Request&, httplib::Response& res) {
               Json data = Json::array();
               for (const ModelEntry& e : models->entries()) data.push_back(model_json(e));
               res.set_content(dump_json({{"object", "list"}, {"data", std::move(data)}}), "application/json");
             }));
    http.Get(R"(/v1/models/(.+))", wrap(HttpCounters::kModels, [this](const httplib::Request& req, httplib::Response& res) {
               res.set_content(dump_json(model_json(models->find(req.matches[1]))), "application/json");
             }));
    add_ollama_routes(generation);
    add_web_page_route(http);  // GET /: open like /health; the page sends the key with its API calls
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump_json({{"status", "ok"}, {"model", models->find("").name}}), "application/json");
      counters.count(HttpCounters::kHealth, res.status);
    });
    http.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (options.metrics_auth && !authorized(req)) {
        send_error(req, res, ApiError(ErrorKind::Authentication, "/metrics needs an API key (--metrics-auth)", "",
                                      "invalid_api_key"));
      } else {
        res.set_content(metrics_text(), "text/plain; version=0.0.4");
      }
      counters.count(HttpCounters::kMetrics, res.status);
    });
    // Browser clients (chat UIs served from another origin) need CORS: by default any origin
    // (the API key, not the origin, guards the server); --cors-origins narrows it to a list or
    // turns it off.
    http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const std::string allow = cors.allow_origin(req.get_header_value("Origin"));
      if (!allow.empty()) res.set_header("Access-Control-Allow-Origin", allow);
      if (cors.varies_by_origin()) res.set_header("Vary", "Origin");
    });
    http.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta, OpenAI-Beta");
      res.set_header("Access-Control-Max-Age", "86400");
      res.status = 204;
    });
    // Errors httplib produces itself (413 over the body limit, 404 unknown route, 400
    // unparseable HTTP) get the API's JSON shape too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) {
        send_error(req, res, ApiError(ErrorKind::TooLarge, fmt::format("the request body exceeds the limit of {} bytes",
                                                                       options.max_body_bytes)));
      } else if (res.status == 404) {
        send_error(req, res, ApiError(ErrorKind::NotFound, fmt::format("no route {} {}", req.method, req.path)));
      } else {
        ApiError e = ApiError::invalid(fmt::format("HTTP error {}", res.status));
        res.set_content(dump_json(error_body(e, flavor_of(req.path))), "application/json");
      }
      counters.count(HttpCounters::kOther, res.status);
    });
    http.set_payload_max_length(options.max_body_bytes);
    // Every queued or running generation request holds a connection thread (it waits for, or
    // streams, its tokens), so the pool holds max_in_flight of them plus a few for /health,
    // /metrics and the 429 answers; with fewer threads the excess would wait unseen in
    // httplib's unbounded task queue and the 429 of --max-queue could never be returned.
    const size_t threads =
        static_cast<size_t>(std::max({options.http_threads, 4, options.max_in_flight + 16}));
    http.new_task_queue = [threads] { return new ConnectionQueue(threads); };
    const auto client_s = std::chrono::duration_cast<std::chrono::seconds>(options.client_timeout);
    const auto client_us = std::chrono::duration_cast<std::chrono::microseconds>(options.client_timeout - client_s);
    http.set_read_timeout(client_s.count(), client_us.count());
    http.set_write_timeout(client_s.count(), client_us.count());
    // An idle keep-alive connection holds its thread too: no longer than a hung client may.
    http.set_keep_alive_timeout(std::clamp<time_t>(client_s.count(), 1, 5));
    // A response goes out in several writes (headers, body, SSE chunks): without TCP_NODELAY
    // Nagle holds each small write until the client's delayed ACK (40 ms on Linux), which
    // dominated a cached answer and every streamed chunk after the first.
    http.set_tcp_nodelay(true);
  }
};

HttpServer::HttpServer(std::shared_ptr<ModelRegistry> models, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(models), std::move(options))) {
  impl_->add_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  if (impl_->options.port == 0) impl_->port = impl_->http.bind_to_any_port(impl_->options.host);
  else if (impl_->http.bind_to_port(impl_->options.host, impl_->options.port)) impl_->port = impl_->options.port;
  else impl_->port = -1;
  if (impl_->port <= 0)
    throw Error("cannot listen on {}:{} (in use, or not a local address)", impl_->options.host, impl_->options.port);
  raise_listen_backlog(impl_->http.listening_socket());
  bound_send_buffer(impl_->http.listening_socket());
  return impl_->port;
}

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() { impl_->http.stop(); }

void HttpServer::stop(std::chrono::milliseconds grace) {
  impl_->admission.set_drain_deadline(Admission::Clock::now() + grace);
  impl_->http.stop();
}

}  // namespace tachyon::server
