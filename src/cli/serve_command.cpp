// `tachyon serve [MODEL] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [--max-concurrent N]
// [--ctx-size N] [--kv-blocks N | --kv-memory GiB] [--prefix-cache on|off] [--step-overlap auto|on|off]
// ...`: serves the OpenAI, Anthropic and Ollama APIs (src/server) over the continuous-batching engine. With no model
// it serves the embedded tachyon-demo. SIGINT/SIGTERM stop it cleanly.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/parsers/output_parser.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/spec_options.h"
#include "engine/engine.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "server/server.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

namespace {

struct ServeOptions {
  std::string model_dir, device, prefix_cache = "on", served_name, tool_parser, step_overlap = "auto";
  server::ServerOptions server;
  int32_t max_concurrent = 16, ctx_size = 0, kv_blocks = 0, max_tokens_per_step = 512;
  double kv_memory_gib = 1.0;
  SpecOptions spec;
};

// One line per loading stage; on a terminal a ticking elapsed-time line while it runs.
class Progress {
 public:
  Progress() : tty_(isatty(STDERR_FILENO) != 0) {}
  template <typename F>
  auto stage(const std::string& what, F&& work) {
    const auto start = std::chrono::steady_clock::now();
    std::atomic<bool> done{false};
    std::thread ticker;
    if (tty_)
      ticker = std::thread([&] {
        static constexpr const char* kSpin = "|/-\\";
        for (int i = 0; !done.load(); ++i) {
          std::fprintf(stderr, "\r  %c %s  %.1fs", kSpin[i % 4], what.c_str(), elapsed(start));
          std::fflush(stderr);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
    auto finish = [&] {
      done = true;
      if (ticker.joinable()) ticker.join();
    };
    try {
      auto result = work();
      finish();
      std::fprintf(stderr, "%s  ✓ %s  %.2fs\n", tty_ ? "\r\033[K" : "", what.c_str(), elapsed(start));
      return result;
    } catch (...) {
      finish();
      if (tty_) std::fprintf(stderr, "\r\033[K  ✗ %s\n", what.c_str());
      throw;
    }
  }

 private:
  static double elapsed(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool tty_;
};

// generation_config.json's sampling fields, checked once here so that a bad value fails the
// start rather than every request that leaves the field out.
server::SamplingDefaults sampling_defaults(const io::GenerationConfig& g, const std::string& dir, int64_t vocab_size) {
  server::SamplingDefaults d;
  auto as_float = [](const std::optional<double>& v) -> std::optional<float> {
    if (!v) return std::nullopt;
    return static_cast<float>(*v);
  };
  d.temperature = as_float(g.temperature);
  d.top_p = as_float(g.top_p);
  d.min_p = as_float(g.min_p);
  d.repetition_penalty = as_float(g.repetition_penalty);
  if (g.top_k) d.top_k = static_cast<int32_t>(std::clamp<int64_t>(*g.top_k, 0, vocab_size));
  try {
    server::apply_sampling_defaults(server::ParsedRequest{}, d).validate(vocab_size);
  } catch (const Error& e) {
    throw Error("{}/generation_config.json: {}", dir, e.what());
  }
  return d;
}

// What Ollama's model listings show: family, dtype, parameters, bytes of weights.
server::ModelDetails model_details(const std::string& dir, const io::ModelConfig& config, const std::string& device,
                                   const chat::ChatTemplate* chat_template) {
  server::ModelDetails d;
  d.family = config.model_type;
  d.dtype = config.dtype;
  d.chat_template = chat_template ? chat_template->source() : "";
  d.hidden_size = config.hidden_size;
  d.num_layers = config.num_hidden_layers;
  d.num_heads = config.num_attention_heads;
  d.num_kv_heads = config.num_key_value_heads;
  d.on_device = device == "cuda";
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  for (const auto& [name, t] : checkpoint.tensors()) {
    d.num_parameters += t.num_elements();
    d.size_bytes += static_cast<int64_t>(t.num_bytes);
  }
  return d;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve",
                                 "Serve the OpenAI, Anthropic and Ollama HTTP APIs (default: the embedded demo model)");
  cmd->add_option("model", opt->model_dir, "Model: a folder, a hub id org/name[@rev] in the HF cache (tachyon pull), "
                                           "or an alias (tachyon ls) (default: the embedded tachyon-demo)");
  cmd->add_option("--host", opt->server.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", opt->server.port, "Port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  cmd->add_option("--api-key", opt->server.api_key, "Require this key (Authorization: Bearer, or x-api-key)");
  cmd->add_option("--max-concurrent", opt->max_concurrent, "Requests in the running batch at most")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  cmd->add_option("--ctx-size", opt->ctx_size, "Context length (default: the model's)")->check(CLI::NonNegativeNumber);
  auto* blocks = cmd->add_option("--kv-blocks", opt->kv_blocks, "KV cache blocks (16 tokens each)")
                     ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-memory", opt->kv_memory_gib, "KV cache memory in GiB")
      ->check(CLI::PositiveNumber)->excludes(blocks)->capture_default_str();
  cmd->add_option("--prefix-cache", opt->prefix_cache, "Automatic prefix caching")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  cmd->add_option("--step-overlap", opt->step_overlap,
                  "Issue each plain decode step before the last one's tokens are read (auto: on a GPU)")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  cmd->add_option("--max-tokens-per-step", opt->max_tokens_per_step, "Token budget of one step (chunked prefill)")
      ->check(CLI::Range(16, 1 << 20))->capture_default_str();
  cmd->add_option("--max-queue", opt->server.max_in_flight, "Generation requests queued or running before 429")
      ->check(CLI::Range(1, 1 << 20))->capture_default_str();
  cmd->add_option("--max-body-bytes", opt->server.max_body_bytes, "Largest request body (413 beyond)")
      ->check(CLI::Range(1024, 1 << 30))->capture_default_str();
  cmd->add_option("--http-threads", opt->server.http_threads, "Concurrent HTTP connections served")
      ->check(CLI::Range(4, 4096))->capture_default_str();
  cmd->add_option("--served-model-name", opt->served_name, "Model name clients use (default: the folder name)");
  cmd->add_option("--tool-parser", opt->tool_parser, "Tool-call syntax: hermes, llama3, deepseek_v3, gemma, harmony, plain "
                                                     "(default: detected from the chat template)");
  cmd->add_option("--device", opt->device, "cpu or cuda (default: cuda when a GPU is visible)");
  opt->spec.add_to(*cmd);
  return [opt] {
    const io::ResolvedModel resolved = resolve_model_arg(opt->model_dir);
    io::load_model_config(resolved.path);  // a GGUF file or a folder without config.json stops here, named
    if (resolved.alias) opt->spec.alias_method = resolved.alias->defaults.drafter;
    // Signals go to one waiting thread (blocked everywhere else, including the engine's and
    // httplib's threads, which inherit this mask).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    const std::string dir = resolved.path;
    if (resolved.source == io::ModelSource::Path) std::fprintf(stderr, "tachyon serve: loading %s\n", dir.c_str());
    else std::fprintf(stderr, "tachyon serve: loading %s (%s)\n", resolved.name.c_str(), dir.c_str());
    Progress progress;
    server::ServedModel served;
    served.id = opt->served_name.empty() ? resolved.display_name : opt->served_name;
    served.tokenizer = progress.stage("tokenizer", [&] {
      return std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::from_model_dir(dir));
    });
    served.chat_template = progress.stage("chat template", [&]() -> std::shared_ptr<const chat::ChatTemplate> {
      try {
        return std::make_shared<const chat::ChatTemplate>(chat::ChatTemplate::from_model_dir(dir));
      } catch (const Error& e) {
        std::fprintf(stderr, "  (no chat template: %s; chat endpoints will answer 400)\n", e.what());
        return nullptr;
      }
    });
    const std::string device = opt->device.empty() ? kernels::default_device() : opt->device;
    auto backend = kernels::make_backend(device);
    std::unique_ptr<model::Model> model = progress.stage("weights", [&] { return model::load_model(dir, *backend); });
    const io::ModelConfig& config = model->config();
    const io::GenerationConfig generation = io::load_generation_config(dir);
    for (int64_t id : generation.eos_token_ids.empty() ? config.eos_token_ids : generation.eos_token_ids)
      served.eos_ids.push_back(static_cast<int32_t>(id));
    if (auto eos = served.tokenizer->eos_id();
        eos && std::find(served.eos_ids.begin(), served.eos_ids.end(), *eos) == served.eos_ids.end())
      served.eos_ids.push_back(*eos);
    served.vocab_size = config.vocab_size;
    served.sampling_defaults = sampling_defaults(generation, dir, config.vocab_size);
    served.details = model_details(dir, config, device, served.chat_template.get());
    if (!opt->tool_parser.empty()) served.parser.family = chat::parser_family_from_name(opt->tool_parser);
    else if (served.chat_template) served.parser = chat::detect_parser(served.chat_template->source(), config.model_type);

    engine::EngineConfig engine_config;
    engine_config.max_concurrent = opt->max_concurrent;
    engine_config.max_tokens_per_step = opt->max_tokens_per_step;
    engine_config.num_blocks = opt->kv_blocks;
    engine_config.kv_memory_bytes = static_cast<size_t>(opt->kv_memory_gib * double(size_t{1} << 30));
    engine_config.max_context = opt->ctx_size;
    engine_config.prefix_cache = opt->prefix_cache == "on";
    engine_config.overlap_steps = opt->step_overlap == "on"    ? engine::EngineConfig::Overlap::On
                                  : opt->step_overlap == "off" ? engine::EngineConfig::Overlap::Off
                                                               : engine::EngineConfig::Overlap::Auto;
    // Every token's bytes, as a trie, for constrained decoding (json_object, forced tool calls).
    engine_config.vocabulary = progress.stage("token trie", [&] {
      return std::make_shared<const sampling::TokenVocabulary>(tokenizer::token_byte_strings(*served.tokenizer));
    });
    const std::unique_ptr<spec::Drafter> drafter = opt->spec.apply(dir, *model, *backend, engine_config);
    auto engine = progress.stage("engine", [&] { return std::make_unique<engine::Engine>(*model, engine_config); });
    served.engine = engine.get();
    served.max_context = engine->max_context();
    served.created = server::unix_time();
    const auto stats = engine->stats();
    std::fprintf(stderr, "  %s: context %d tokens, %d KV blocks, up to %d concurrent, prefix cache %s, tool parser %s\n",
                 served.id.c_str(), served.max_context, stats.kv_blocks_total, opt->max_concurrent,
                 opt->prefix_cache.c_str(), chat::parser_family_name(served.parser.family));

    const std::string& host = opt->server.host;
    if (opt->server.api_key.empty() && host != "127.0.0.1" && host != "localhost" && host != "::1")
      std::fprintf(stderr, "tachyon serve: warning: listening on %s without --api-key: anyone who can reach it can use it\n",
                   host.c_str());
    const std::string model_id = served.id;
    server::HttpServer http(std::move(served), opt->server);
    const int port = http.bind();
    std::atomic<bool> signalled{false};
    std::thread signal_waiter([&] {
      int sig = 0;
      sigwait(&signals, &sig);
      signalled = true;
      std::fprintf(stderr, "tachyon serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      http.stop();
    });
    std::fprintf(stderr, "tachyon serve: listening on http://%s:%d  (OpenAI: /v1/chat/completions /v1/completions "
                         "/v1/responses /v1/models; Anthropic: /v1/messages; /health /metrics)\n",
                 opt->server.host.c_str(), port);
    std::fprintf(stdout, "curl http://%s:%d/v1/chat/completions -H 'Content-Type: application/json'%s -d "
                         "'{\"model\": \"%s\", \"messages\": [{\"role\": \"user\", \"content\": \"Write a Python "
                         "function that adds two numbers.\"}], \"max_tokens\": 64}'\n",
                 opt->server.host.c_str(), port, opt->server.api_key.empty() ? "" : " -H 'Authorization: Bearer $KEY'",
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
