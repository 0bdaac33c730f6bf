#include "cli/serve_model.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "base/byte_size.h"
#include "base/error.h"
#include "base/hash64.h"
#include "cli/device_model.h"
#include "cli/default_model.h"
#include "cli/quantize_option.h"
#include "chat/chat_template.h"
#include "chat/parsers/output_parser.h"
#include "cli/model_text.h"
#include "engine/embedder.h"
#include "engine/engine.h"
#include "engine/grammar_vocabulary.h"
#include "io/config.h"
#include "io/embedding_config.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/safetensors.h"
#include "io/weights_fingerprint.h"
#include "kernels/backend.h"
#include "model/kv_format_choice.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

namespace {

// One line per loading stage; on a terminal a ticking elapsed-time line while it runs.
class Progress {
 public:
  explicit Progress(bool ticker) : tty_(ticker && isatty(STDERR_FILENO) != 0) {}
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
// load rather than every request that leaves the field out.
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
  if (const auto gguf = io::gguf_model_file(dir)) {  // dtype: the ggml type holding the most bytes
    const auto file = io::GgufFile::open(*gguf);
    d.format = "gguf";
    std::map<std::string, int64_t> bytes_by_type;
    for (const io::GgufTensor& t : file->tensors()) {
      d.num_parameters += t.num_elements();
      d.size_bytes += static_cast<int64_t>(t.num_bytes);
      bytes_by_type[io::ggml_type_name(t.type)] += static_cast<int64_t>(t.num_bytes);
    }
    int64_t most = -1;
    for (const auto& [type, bytes] : bytes_by_type)
      if (bytes > most) most = bytes, d.dtype = type;
    return d;
  }
  const io::Checkpoint checkpoint = io::Checkpoint::open(dir);
  for (const auto& [name, t] : checkpoint.tensors()) {
    d.num_parameters += t.num_elements();
    d.size_bytes += static_cast<int64_t>(t.num_bytes);
  }
  return d;
}

engine::EngineConfig engine_config_of(const ServeModelOptions& o) {
  engine::EngineConfig c;
  c.max_concurrent = o.max_concurrent;
  c.max_tokens_per_step = o.max_tokens_per_step;
  c.num_blocks = o.kv_blocks;
  c.kv_memory_bytes = o.kv_cache_memory;
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.max_context = o.ctx_size;
  c.kv_format = model::parse_kv_cache_dtype(o.kv_cache_dtype);
  c.prefix_cache = o.prefix_cache == "on";
  c.prefix_cache_dir = o.prefix_cache_dir;
  c.prefix_cache_disk_bytes = o.prefix_cache_disk_bytes;
  c.swap_space_bytes = o.swap_space_bytes;
  c.overlap_steps = o.step_overlap == "on"    ? engine::EngineConfig::Overlap::On
                    : o.step_overlap == "off" ? engine::EngineConfig::Overlap::Off
                                              : engine::EngineConfig::Overlap::Auto;
#ifdef TACHYON_FAULT_INJECTION
  // Debug builds only: TACHYON_FAULTS=device:every=5,after=2 fails chosen requests' forwards
  // (engine/fault_injection.h), for fault tests and soak runs against a live server.
  if (const char* faults = std::getenv("TACHYON_FAULTS"); faults && *faults) {
    c.fault_injector = engine::parse_fault_spec(faults);
    std::fprintf(stderr, "tachyon serve: injecting faults: %s\n", faults);
  }
#endif
  return c;
}

// Declared in the order they are built, so that they are freed engine first, backend last.
struct Owned {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<model::Model> model;
  cli::SpecDrafters drafters;
  std::unique_ptr<engine::PromptScorer> pflash_scorer;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<engine::Embedder> embedder;  // embedding models only
};

std::string device_of(const ServeModelOptions& o) { return o.device.empty() ? kernels::default_device() : o.device; }

}  // namespace

std::shared_ptr<const server::ServedModel> build_served_model(const io::ResolvedModel& resolved,
                                                              const std::string& served_name,
                                                              const ServeModelOptions& options, bool ticker) {
  const std::string& dir = resolved.path;
  io::load_model_config(dir);  // a folder without config.json (or an unsupported GGUF) stops here, named
  if (resolved.source == io::ModelSource::Path) std::fprintf(stderr, "tachyon serve: loading %s\n", dir.c_str());
  else std::fprintf(stderr, "tachyon serve: loading %s (%s)\n", resolved.name.c_str(), dir.c_str());
  Progress progress(ticker);
  auto served = std::make_shared<server::ServedModel>();
  auto owned = std::make_shared<Owned>();
  served->id = served_name;
  ModelText text = progress.stage("tokenizer and chat template", [&] { return load_model_text(dir); });
  served->tokenizer = text.tokenizer;
  served->chat_template = text.chat_template;
  if (!served->chat_template)
    std::fprintf(stderr, "  (no chat template: %s; chat endpoints will answer 400)\n", text.chat_template_error.c_str());
  const std::string device = device_of(options);
  owned->model = progress.stage("weights", [&] {
    DeviceModel loaded = load_device_model(dir, device, options.tensor_parallel,
                                           load_options_for(options.quantize, options.quantize_decode, options.int8_activations));
    owned->backend = std::move(loaded.backend);
    return std::move(loaded.model);
  });
  const io::ModelConfig& config = owned->model->config();
  const io::GenerationConfig generation = io::load_generation_config(dir);
  for (int64_t id : generation.eos_token_ids.empty() ? config.eos_token_ids : generation.eos_token_ids)
    served->eos_ids.push_back(static_cast<int32_t>(id));
  for (int32_t id : text.end_of_generation_ids)  // GGUF: llama.cpp's end-of-generation set
    if (std::find(served->eos_ids.begin(), served->eos_ids.end(), id) == served->eos_ids.end()) served->eos_ids.push_back(id);
  if (auto eos = served->tokenizer->eos_id();
      eos && std::find(served->eos_ids.begin(), served->eos_ids.end(), *eos) == served->eos_ids.end())
    served->eos_ids.push_back(*eos);
  served->vocab_size = config.vocab_size;
  served->sampling_defaults = sampling_defaults(generation, dir, config.vocab_size);
  served->details = model_details(dir, config, device, served->chat_template.get());
  if (!options.tool_parser.empty()) served->parser.family = chat::parser_family_from_name(options.tool_parser);
  else if (served->chat_template) served->parser = chat::detect_parser(served->chat_template->source(), config.model_type);

  engine::EngineConfig engine_config = engine_config_of(options);
  // An alias's KV format applies when --kv-cache-dtype is left at auto.
  if (resolved.alias && !resolved.alias->defaults.kv_format.empty() && options.kv_cache_dtype == "auto")
    engine_config.kv_format = model::parse_kv_cache_dtype(resolved.alias->defaults.kv_format);
  // Every token's bytes, as a trie, for constrained decoding (json_object, forced tool calls).
  engine_config.vocabulary = progress.stage("token trie", [&] {
    return engine::grammar_vocabulary(*served->tokenizer);
  });
  SpecOptions spec = options.spec;
  if (resolved.alias) spec.alias_method = resolved.alias->defaults.drafter;
  // The weights as loaded (a --quantize or --quantize-decode changes them); the engine adds the KV
  // layout and backend.
  if (!options.prefix_cache_dir.empty() || options.response_cache_bytes > 0) {
    engine_config.model_fingerprint = hash64_combine(io::weights_fingerprint(dir), hash64(options.quantize));
    if (!options.quantize_decode.empty() && options.quantize_decode != "none")
      engine_config.model_fingerprint =
          hash64_combine(engine_config.model_fingerprint, hash64("decode:" + options.quantize_decode));
    // KV written with int8 activations differs from KV written without them, and from KV written
    // when every activation block was 32 columns (now the weight's group, up to 128: matmul_int8.h).
    if (owned->backend->int8_activation_weights() > 0)
      engine_config.model_fingerprint =
          hash64_combine(engine_config.model_fingerprint, hash64("int8-activations, blocks by weight group"));
  }
  owned->drafters = spec.apply(dir, *owned->model, owned->model->backend(), engine_config);
  owned->pflash_scorer = progress.stage("PFlash scorer", [&] {
    const std::string drafter_dir = spec.drafter_dir.empty() ? "" : resolve_model_arg(spec.drafter_dir).path;
    return options.pflash.apply(dir, drafter_dir, *owned->model, owned->model->backend(), engine_config);
  });
  owned->engine = progress.stage("engine", [&] { return std::make_unique<engine::Engine>(*owned->model, engine_config); });
  served->engine = owned->engine.get();
  if (options.response_cache_bytes > 0) {
    // Outputs also depend on the KV format (lossy ones) and the backend's arithmetic.
    served->fingerprint =
        hash64_combine(hash64_combine(engine_config.model_fingerprint, hash64(kernels::kv_format_name(owned->engine->kv_format()))),
                       hash64(owned->backend->name()));
    served->response_cache = std::make_shared<server::ResponseCache>(options.response_cache_bytes);
  }
  served->max_context = owned->engine->max_context();
  if (const std::optional<io::EmbeddingConfig> embedding = io::load_embedding_config(dir)) {
    owned->embedder = std::make_unique<engine::Embedder>(*owned->model, *embedding, served->max_context,
                                                         options.max_tokens_per_step);
    served->embedder = owned->embedder.get();
    std::fprintf(stderr, "  %s: embedding model (%s pooling%s, %lld dimensions); generation is refused\n",
                 served->id.c_str(), io::pooling_name(embedding->pooling), embedding->normalize ? ", normalized" : "",
                 static_cast<long long>(owned->embedder->dimensions()));
  }
  served->created = server::unix_time();
  const auto stats = owned->engine->stats();
  std::fprintf(stderr, "  %s: KV pool %s\n", served->id.c_str(), owned->engine->kv_pool().why.c_str());
  std::fprintf(stderr, "  %s: KV swap space %s\n", served->id.c_str(), owned->engine->swap_space().why.c_str());
  std::fprintf(stderr, "  %s: context %d tokens, %d KV blocks (%s), up to %d concurrent, prefix cache %s, tool parser %s\n",
               served->id.c_str(), served->max_context, stats.kv_blocks_total,
               std::string(kernels::kv_format_name(owned->engine->kv_format())).c_str(), options.max_concurrent,
               options.prefix_cache.c_str(), chat::parser_family_name(served->parser.family));
  if (served->response_cache)
    std::fprintf(stderr, "  %s: response cache %s\n", served->id.c_str(), format_byte_size(options.response_cache_bytes).c_str());
  served->owner = std::move(owned);
  return served;
}

int64_t served_model_footprint(const std::string& dir, const ServeModelOptions& options) {
  int64_t bytes = 0;
  std::error_code ec;
  if (const auto gguf = io::gguf_model_file(dir)) bytes += static_cast<int64_t>(std::filesystem::file_size(*gguf, ec));
  for (const auto& file : std::filesystem::directory_iterator(dir, ec))
    if (file.path().extension() == ".safetensors") bytes += static_cast<int64_t>(file.file_size(ec));
  if (options.kv_blocks == 0) bytes += options.kv_cache_memory;
  return bytes;
}

server::ModelDetails describe_model(const std::string& dir, const ServeModelOptions& options) {
  return model_details(dir, io::load_model_config(dir), device_of(options), nullptr);
}

}  // namespace tachyon::cli
