// `tachyon serve [MODEL...] [--models-dir DIR] [--max-loaded-models N] [--models-memory BYTES] [--host 127.0.0.1]
// [--port 8000] [--api-key KEY] [--max-concurrent N] [--ctx-size N] [--kv-cache-memory BYTES | --gpu-memory-utilization F] ...`: serves the
// OpenAI, Anthropic and Ollama APIs (src/server) over the continuous-batching engine. With no model it serves the
// embedded tachyon-demo. Several models: each built on first use (the first one at start-up), the least recently used
// idle one unloaded when another would not fit the budget. SIGINT/SIGTERM stop it cleanly.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "base/byte_size.h"
#include "base/error.h"
#include "base/host_memory.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/device_model.h"
#include "cli/kv_options.h"
#include "cli/quantize_option.h"
#include "cli/serve_model.h"
#include "io/config.h"
#include "io/gguf_config.h"
#include "io/hub_download.h"
#include "server/api_error.h"
#include "server/model_registry.h"
#include "server/access.h"
#include "server/server.h"

namespace tachyon::cli {

namespace {

// Every connection is a file descriptor: a burst of a thousand clients must not run into a soft
// limit of 1024 (then accept fails and clients wait unanswered). Raised to the hard limit.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
    std::fprintf(stderr, "tachyon serve: warning: cannot raise the open-file limit: %s\n", std::strerror(errno));
}

struct ServeOptions {
  std::vector<std::string> models;
  std::string models_dir, served_name;
  int32_t max_loaded = 0;
  int64_t models_memory = 0;
  server::ServerOptions server;
  ServeModelOptions model;
  std::string api_key, api_key_file;
  double request_timeout_s = 0, shutdown_timeout_s = 30, client_timeout_s = 30;
};

// What the server serves: each MODEL argument, then the model folders directly under
// --models-dir (a folder with config.json, or one holding a single GGUF file), by name. A name
// served twice is an error: a request could not say which it means.
std::vector<std::pair<server::ModelEntry, io::ResolvedModel>> served_entries(const ServeOptions& o) {
  std::vector<std::pair<server::ModelEntry, io::ResolvedModel>> out;
  std::vector<std::string> args = o.models;
  if (args.empty() && o.models_dir.empty()) args.push_back("");  // the embedded demo
  if (!o.served_name.empty() && args.size() + (o.models_dir.empty() ? 0 : 1) != 1)
    throw Error("--served-model-name names one model; with several, each is served under its own name");
  for (const std::string& arg : args) {
    io::ResolvedModel r = resolve_model_arg(arg);
    io::load_model_config(r.path);  // a folder without config.json (or an unsupported GGUF) stops here, named
    const std::string name = o.served_name.empty() ? r.display_name : o.served_name;
    out.push_back({{name, r.path}, std::move(r)});
  }
  if (!o.models_dir.empty()) {
    namespace fs = std::filesystem;
    if (!fs::is_directory(o.models_dir)) throw Error("--models-dir {}: not a folder", o.models_dir);
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(o.models_dir))
      if (e.is_directory()) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      if (fs::exists(dir / "config.json")) {
        io::ResolvedModel r = resolve_model_arg(dir.string());
        out.push_back({{dir.filename().string(), r.path}, std::move(r)});
        continue;
      }
      try {  // a folder holding one GGUF file
        if (io::gguf_model_file(dir.string())) {
          io::ResolvedModel r = resolve_model_arg(dir.string());
          out.push_back({{dir.filename().string(), r.path}, std::move(r)});
        }
      } catch (const Error& e) {
        std::fprintf(stderr, "tachyon serve: skipping %s: %s\n", dir.c_str(), e.what());
      }
    }
  }
  std::map<std::string, int> seen;
  for (const auto& [entry, r] : out)
    if (++seen[entry.name] == 2) throw Error("two models are served as '{}': serve one of them", entry.name);
  if (out.empty()) throw Error("--models-dir {}: no model folder (one with config.json, or one GGUF file) in it", o.models_dir);
  return out;
}

// Ollama's /api/pull: `tachyon pull NAME` into the Hugging Face cache, its progress as Ollama's
// objects (a file's byte counts at most every 250 ms), then the model served under the name
// `serve NAME` would give it.
server::PullJob ollama_puller(const std::string& name) {
  const io::RepoRef ref = hub_repo_of(name, "pull");
  return [ref, name](const server::PullProgressFn& progress) {
    progress({.status = "pulling manifest"});
    io::PullOptions options;
    auto last = std::chrono::steady_clock::now();
    options.on_progress = [&](const io::PullProgress& p) {
      if (p.event == io::PullProgress::Event::Retry) return;
      const auto now = std::chrono::steady_clock::now();
      const bool whole = p.event != io::PullProgress::Event::Bytes;
      if (!whole && now - last < std::chrono::milliseconds(250)) return;
      last = now;
      const bool finished = p.event == io::PullProgress::Event::Done || p.event == io::PullProgress::Event::Cached;
      progress({.status = "pulling " + p.file, .digest = p.file, .total = p.file_total,
                .completed = finished ? p.file_total : p.file_done});
    };
    const io::PullResult r = io::pull_model(ref, options);
    progress({.status = "verifying sha256 digest"});  // each file was checked as it arrived
    progress({.status = "writing manifest"});
    const io::ResolvedModel m = resolve_model_arg(name);
    std::fprintf(stderr, "tachyon serve: pulled %s (%s), serving it as '%s'\n", name.c_str(), r.snapshot_dir.c_str(),
                 m.display_name.c_str());
    return server::ModelEntry{m.display_name, m.path};
  };
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve",
                                 "Serve the OpenAI, Anthropic and Ollama HTTP APIs (default: the embedded demo model)");
  cmd->add_option("model", opt->models, "Models: each a folder, a hub id org/name[@rev] in the HF cache (tachyon pull), "
                                        "or an alias (tachyon ls) (default: the embedded tachyon-demo). A request's "
                                        "\"model\" picks one; the first serves requests that name none");
  cmd->add_option("--models-dir", opt->models_dir, "Also serve every model folder (with config.json) directly in DIR, "
                                                   "by its folder name");
  cmd->add_option("--max-loaded-models", opt->max_loaded,
                  "Models loaded at once; loading another unloads the least recently used idle one. Models load on "
                  "first use (the first at start-up). Default, with --models-memory unset too: unload only when the "
                  "machine's available memory cannot hold the next model's weights and KV cache")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--models-memory", opt->models_memory,
                  "Bytes the loaded models may hold together (weight files + --kv-cache-memory each), the same LRU rule")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--host", opt->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->server.port, "Port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", opt->api_key, "Require this key (Authorization: Bearer, or x-api-key)");
  cmd->add_option("--api-key-file", opt->api_key_file,
                  "Require one of the keys in FILE (one per line, '#' comments; with --api-key, either opens)");
  cmd->add_option("--request-timeout", opt->request_timeout_s,
                  "Seconds a generation may run (queueing included); then it ends with its output so far and finish "
                  "reason \"timeout\" (0: no limit)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--shutdown-timeout", opt->shutdown_timeout_s,
                  "On SIGTERM/SIGINT, seconds requests in flight may take to finish before they are ended with their "
                  "output so far")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--client-timeout", opt->client_timeout_s,
                  "Seconds a connection may wait on its client (a request or body not sent, a response not read); "
                  "then it is closed and its generation cancelled")
      ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("--metrics-auth", opt->server.metrics_auth, "/metrics needs an API key too");
  cmd->add_option("--cors-origins", opt->server.cors_origins,
                  "Origins browsers may call the API from: *, none, or a comma-separated list of scheme://host[:port]")
      ->capture_default_str();
  cmd->add_option("--max-concurrent", opt->model.max_concurrent, "Requests in the running batch at most")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--ctx-size", opt->model.ctx_size, "Context length (default: the model's)")->check(CLI::NonNegativeNumber);
  add_kv_sizing_options(*cmd, {.kv_blocks = &opt->model.kv_blocks,
                               .kv_cache_memory = &opt->model.kv_cache_memory,
                               .gpu_memory_utilization = &opt->model.gpu_memory_utilization});
  cmd->add_option("--kv-cache-dtype", opt->model.kv_cache_dtype,
                  "KV cache storage: auto (bf16; f16 for f16 models), f32, bf16, f16, fp8, int8, int4, turbo")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "fp8", "int8", "int4", "turbo"}))->capture_default_str();
  cmd->add_option("--prefix-cache", opt->model.prefix_cache, "Automatic prefix caching")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  auto byte_option = [&](const char* name, int64_t* target, const char* help) {
    return cmd->add_option_function<std::string>(name, [target](const std::string& text) { *target = parse_byte_size(text); },
                                                 help)
        ->type_name("BYTES")
        ->check(CLI::Validator(
            [name](std::string& text) -> std::string {
              try {
                if (parse_byte_size(text) < 0) return fmt::format("{} must not be negative", name);
                return {};
              } catch (const Error& e) {
                return e.what();
              }
            },
            ""));
  };
  cmd->add_option("--prefix-cache-dir", opt->model.prefix_cache_dir,
                  "Keep the prefix cache on disk too: KV blocks evicted from memory (and every cached block at "
                  "shutdown) are written under DIR, per model fingerprint, and read back by later requests and later "
                  "servers (default: memory only)");
  byte_option("--prefix-cache-disk-bytes", &opt->model.prefix_cache_disk_bytes,
              "Bytes the disk prefix cache may hold per model, least recently used files removed first (default 16G)");
  byte_option("--swap-space", &opt->model.swap_space_bytes,
              "Host memory for KV blocks evicted from the pool, preempted requests' among them: they come back on "
              "admission instead of being recomputed (pinned on a GPU; default on a GPU: the KV pool's size up to 4G "
              "and a quarter of free host memory; 0: off; default off on the CPU)");
  byte_option("--response-cache", &opt->model.response_cache_bytes,
              "Answer exact repeats of deterministic requests (temperature 0, or a fixed seed) from a cache of this "
              "many bytes, LRU (e.g. 256M; default 0: off)");
  cmd->add_option("--step-overlap", opt->model.step_overlap,
                  "Issue each plain decode step before the last one's tokens are read (auto: on a GPU)")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  cmd->add_option("--max-tokens-per-step", opt->model.max_tokens_per_step, "Token budget of one step (chunked prefill)")
      ->check(CLI::Range(16, 1 << 20))->capture_default_str();
  cmd->add_option("--max-queue", opt->server.max_in_flight, "Generation requests queued or running before 429")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--max-body-bytes", opt->server.max_body_bytes, "Largest request body (413 beyond)")
      ->check(CLI::Range(1024, 1 << 30))->capture_default_str();
  cmd->add_option("--http-threads", opt->server.http_threads, "Concurrent HTTP connections served")
      ->check(CLI::Range(4, 4096))->capture_default_str();
  cmd->add_option("--served-model-name", opt->served_name, "Model name clients use (default: the folder name)");
  cmd->add_option("--tool-parser", opt->model.tool_parser, "Tool-call syntax: hermes, llama3, deepseek_v3, gemma, harmony, plain "
                                                     "(default: detected from the chat template)");
  cmd->add_option("--device", opt->model.device, "cpu or cuda (default: cuda when a GPU is visible)");
  add_quantize_option(*cmd, opt->model.quantize);
  add_quantize_decode_option(*cmd, opt->model.quantize_decode);
  add_int8_activations_option(*cmd, opt->model.int8_activations);
  add_tensor_parallel_option(*cmd, opt->model.tensor_parallel);
  opt->model.spec.add_to(*cmd);
  opt->model.pflash.add_to(*cmd);
  return [opt] {
    if (!opt->api_key.empty()) opt->server.api_keys.push_back(opt->api_key);
    opt->server.request_timeout = std::chrono::milliseconds(static_cast<int64_t>(opt->request_timeout_s * 1000));
    opt->server.client_timeout =
        std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(opt->client_timeout_s * 1000)));
    if (!opt->api_key_file.empty())
      for (auto& key : server::read_api_key_file(opt->api_key_file)) opt->server.api_keys.push_back(std::move(key));
    server::CorsPolicy::parse(opt->server.cors_origins);  // a bad origin stops the start, before any load
    const auto entries = served_entries(*opt);
    // Signals go to one waiting thread (blocked everywhere else, including the engine's and
    // httplib's threads, which inherit this mask).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    std::map<std::string, io::ResolvedModel> resolved;
    std::vector<server::ModelEntry> served;
    for (const auto& [entry, r] : entries) {
      served.push_back(entry);
      resolved.emplace(entry.name, r);
    }
    auto started = std::make_shared<std::atomic<bool>>(false);  // start-up's loads tick on a terminal
    server::ModelLoader loader;
    loader.load = [opt, resolved, started](const server::ModelEntry& e) {
      const auto it = resolved.find(e.name);  // absent: a model pulled through /api/pull, by its folder
      return build_served_model(it != resolved.end() ? it->second : resolve_model_arg(e.dir), e.name, opt->model,
                                !started->load());
    };
    loader.footprint = [opt](const server::ModelEntry& e) { return served_model_footprint(e.dir, opt->model); };
    loader.describe = [opt](const server::ModelEntry& e) { return describe_model(e.dir, opt->model); };
    loader.resolve = [](const std::string& name) { return resolve_model_arg(name).path; };
    server::ModelBudget budget{.max_loaded = opt->max_loaded, .max_bytes = opt->models_memory,
                               .free_bytes = host_available_bytes};
    auto models = std::make_shared<server::ModelRegistry>(std::move(served), std::move(loader), std::move(budget));
    try {
      models->acquire("");  // the first model loads now, so a bad checkpoint stops the start
    } catch (const server::ApiError& e) {
      throw Error("{}", e.what());
    }
    started->store(true);
    if (entries.size() > 1) {
      std::string names;
      for (const auto& [entry, r] : entries) names += (names.empty() ? "" : ", ") + entry.name;
      std::fprintf(stderr, "tachyon serve: serving %zu models (loaded on first use): %s\n", entries.size(), names.c_str());
    }

    opt->server.pull = ollama_puller;
    const std::string& host = opt->server.host;
    if (opt->server.api_keys.empty() && host != "127.0.0.1" && host != "localhost" && host != "::1")
      std::fprintf(stderr, "tachyon serve: warning: listening on %s without --api-key: anyone who can reach it can use it\n",
                   host.c_str());
    const std::string model_id = entries.front().first.name;
    raise_open_file_limit();
    server::HttpServer http(models, opt->server);
    const int port = http.bind();
    std::atomic<bool> signalled{false};
    std::thread signal_waiter([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      signalled = true;
      std::fprintf(stderr, "tachyon serve: %s, shutting down (requests in flight get %g s to finish)\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", opt->shutdown_timeout_s);
      http.stop(std::chrono::milliseconds(static_cast<int64_t>(opt->shutdown_timeout_s * 1000)));
    });
    std::fprintf(stderr, "tachyon serve: listening on http://%s:%d  (OpenAI: /v1/chat/completions /v1/completions "
                         "/v1/responses /v1/models; Anthropic: /v1/messages; /health /metrics)\n",
                 opt->server.host.c_str(), port);
    std::fprintf(stdout, "curl http://%s:%d/v1/chat/completions -H 'Content-Type: application/json'%s -d "
                         "'{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Write a Python "
                         "function that adds two numbers.\"}], \"max_tokens\": 64}'\n",
                 opt->server.host.c_str(), port, opt->server.api_keys.empty() ? "" : " -H 'Authorization: Bearer $KEY'",
                 model_id.c_str());
    std::fflush(stdout);
    http.run();
    // Wake the signal thread if the server stopped for another reason.
    if (!signalled) pthread_kill(signal_waiter.native_handle(), SIGTERM);
    signal_waiter.join();
    return 0;
  };
}

}  // namespace tachyon::cli
