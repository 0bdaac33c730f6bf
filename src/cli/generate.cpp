#include "cli/generate.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "cli/device_model.h"
#include "cli/kv_options.h"
#include "cli/quantize_option.h"
#include "cli/model_text.h"
#include "io/config.h"
#include "model/kv_format_choice.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

Generator::Generator(model::Model& model, const std::string& model_dir, const engine::EngineConfig& config)
    : model_dir_(model_dir), engine_(std::make_unique<engine::Engine>(model, config)) {
  for (int64_t id : io::load_generation_config(model_dir).eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (eos_ids_.empty())
    for (int64_t id : model.config().eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  ModelText text = load_model_text(model_dir, /*need_tokenizer=*/false);
  tokenizer_ = std::move(text.tokenizer);
  for (int32_t id : text.end_of_generation_ids)  // GGUF: llama.cpp's end-of-generation set
    if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
}

Generator::~Generator() = default;

std::vector<int32_t> Generator::encode(const std::string& text, bool add_special_tokens) const {
  if (tokenizer_) return tokenizer_->encode(text, add_special_tokens);
  throw Error("{}: no tokenizer available; give the prompt as --ids", model_dir_);
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const sampling::SamplingParams& params,
                                   int max_tokens, const std::function<void(int32_t, const std::string&)>& on_token,
                                   const std::function<bool()>& stop) {
  engine::GenerationRequest request;
  request.prompt = prompt;
  request.sampling = params;
  request.max_tokens = max_tokens;
  request.stop_token_ids = eos_ids_;
  auto stream = engine_->submit(std::move(request));
  std::unique_ptr<tokenizer::StreamingDecoder> detok;
  if (tokenizer_) detok = std::make_unique<tokenizer::StreamingDecoder>(*tokenizer_, true);
  GenerateResult result;
  const auto poll = stop ? std::chrono::milliseconds(50) : std::chrono::milliseconds(std::chrono::minutes(10));
  for (;;) {
    auto out = stream->next(poll);
    if (stop && stop()) {
      stream->cancel();
      result.stop_reason = "cancelled";
      return result;
    }
    if (!out && stop) continue;
    if (!out) throw Error("generation stalled for 10 minutes");
    for (int32_t token : out->tokens) {
      result.tokens.push_back(token);
      const bool eos = std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
      if (eos) continue;
      std::string text;
      if (detok) text = detok->push(token);
      on_token(token, text);
    }
    if (out->finish != engine::FinishReason::None) {
      result.stop_reason = engine::finish_reason_name(out->finish);
      result.spec = out->spec;
      if (out->finish == engine::FinishReason::Error) throw Error("generation failed: {}", out->error);
      break;
    }
  }
  if (detok) {
    const std::string rest = detok->flush();
    if (!rest.empty()) on_token(-1, rest);
  }
  return result;
}

void GenerateOptions::add_to(CLI::App& command) {
  command.add_option("--temperature", sampling.temperature, "0 = greedy")->check(CLI::NonNegativeNumber);
  command.add_option("--top-p", sampling.top_p, "Nucleus sampling mass");
  command.add_option("--top-k", sampling.top_k, "Keep the k most likely tokens (0 = off)");
  command.add_option("--min-p", sampling.min_p, "Drop tokens below min_p x the best probability");
  command.add_option("--repetition-penalty", sampling.repetition_penalty, "HF repetition penalty");
  command.add_option("--seed", seed, "RNG seed (same seed, same output)");
  command.add_option("--device", device, "cpu or cuda (default: cuda when a GPU is visible)");
  add_kv_sizing_options(command, {.kv_blocks = &kv_blocks,
                                  .kv_cache_memory = &kv_cache_memory,
                                  .gpu_memory_utilization = &gpu_memory_utilization});
  add_quantize_option(command, quantize);
  add_quantize_decode_option(command, quantize_decode);
  add_int8_activations_option(command, int8_activations);
  add_tensor_parallel_option(command, tensor_parallel);
  command.add_option("--kv-cache-dtype", kv_cache_dtype,
                     "KV cache storage: auto (bf16; f16 for f16 models), f32, bf16, f16, fp8, int8, int4, turbo")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "fp8", "int8", "int4", "turbo"}))->capture_default_str();
  spec.add_to(command);
}

namespace {

// generation_config.json's sampling defaults fill the fields the command line leaves out, as the
// server fills those a request leaves out; a flag given always wins.
void apply_model_sampling_defaults(const std::string& model_dir, const CLI::App& command,
                                   sampling::SamplingParams& s) {
  const io::GenerationConfig g = io::load_generation_config(model_dir);
  if (g.temperature && !command.count("--temperature")) s.temperature = static_cast<float>(*g.temperature);
  if (g.top_p && !command.count("--top-p")) s.top_p = static_cast<float>(*g.top_p);
  if (g.top_k && !command.count("--top-k")) s.top_k = static_cast<int32_t>(*g.top_k);
  if (g.min_p && !command.count("--min-p")) s.min_p = static_cast<float>(*g.min_p);
  if (g.repetition_penalty && !command.count("--repetition-penalty"))
    s.repetition_penalty = static_cast<float>(*g.repetition_penalty);
}

}  // namespace

TerminalModel load_terminal_model(const std::string& model_dir, GenerateOptions& options, const CLI::App& command) {
  if (command.count("--seed")) options.sampling.seed = options.seed;
  apply_model_sampling_defaults(model_dir, command, options.sampling);
  TerminalModel loaded;
  DeviceModel device = load_device_model(model_dir, options.device.empty() ? kernels::default_device() : options.device,
                                         options.tensor_parallel,
                                         load_options_for(options.quantize, options.quantize_decode, options.int8_activations));
  loaded.backend = std::move(device.backend);
  loaded.model = std::move(device.model);
  options.sampling.validate(loaded.model->config().vocab_size);
  engine::EngineConfig config;
  config.max_concurrent = 1;
  config.num_blocks = options.kv_blocks;
  config.kv_memory_bytes = options.kv_cache_memory;
  config.gpu_memory_utilization = options.gpu_memory_utilization;
  config.swap_space_bytes = 0;  // one request at a time is never preempted: no pinned swap space
  config.kv_format = model::parse_kv_cache_dtype(options.kv_cache_dtype);
  loaded.drafters = options.spec.apply(model_dir, *loaded.model, loaded.model->backend(), config);
  loaded.generator = std::make_unique<Generator>(*loaded.model, model_dir, config);
  return loaded;
}

}  // namespace tachyon::cli
