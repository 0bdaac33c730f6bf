// `tachyon logits MODEL_DIR --ids 1,2,3 --out FILE.safetensors`: one forward over the ids,
// every position's logits written as float32 tensor `logits` [T, V], so any checkpoint can
// be compared with any reference.
#include <cstdio>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/quantize_option.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/kv_format_choice.h"
#include "model/model.h"

namespace tachyon::cli {

std::vector<int32_t> parse_id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw Error("--ids: '{}' is not a token id (expected comma-separated non-negative integers)", item);
    }
    start = end + 1;
  }
  return ids;
}

Command add_logits_command(CLI::App& app) {
  struct Options {
    std::string model_dir, ids, out, device = "cpu", quantize, int8_activations, kv_cache_dtype = "auto";
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("logits", "Write the logits of every position of --ids to a safetensors file");
  cmd->add_option("model", opt->model_dir, "Model: a folder (config.json + safetensors), a hub id org/name[@rev] in the "
                                          "HF cache, or an alias")->required();
  cmd->add_option("--ids", opt->ids, "Comma-separated token ids")->required();
  cmd->add_option("--out", opt->out, "Output .safetensors file (tensor 'logits' [T, V] float32)")->required();
  cmd->add_option("--device", opt->device, "cpu");
  add_quantize_option(*cmd, opt->quantize);
  add_int8_activations_option(*cmd, opt->int8_activations);
  cmd->add_option("--kv-cache-dtype", opt->kv_cache_dtype,
                  "KV cache storage: auto (bf16; f16 for f16 models), f32, bf16, f16, fp8, int8, int4, turbo")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "fp8", "int8", "int4", "turbo"}))->capture_default_str();
  return [opt] {
    const auto ids = parse_id_list(opt->ids);
    const std::string model_dir = resolve_model_arg(opt->model_dir).path;
    auto backend = kernels::make_backend(opt->device);
    auto model = model::load_model(model_dir, *backend, load_options_for(opt->quantize, "", opt->int8_activations));
    const int32_t block_size = 16;
    kv::KvLayout layout = model->kv_layout(static_cast<int32_t>(ids.size() + block_size - 1) / block_size + 1, block_size);
    layout.format = model::resolve_kv_format(model::parse_kv_cache_dtype(opt->kv_cache_dtype), model->config(), *backend);
    kv::KvCache kv(*backend, layout);
    const auto seq = kv.add_sequence();
    kv.reserve(seq, static_cast<int32_t>(ids.size()));
    model::Batch batch;
    batch.add(seq, ids, 0, model::LogitRows::All);
    const auto out = model->forward(batch, kv);
    io::write_safetensors(opt->out, {{"logits", DType::F32, {static_cast<int64_t>(ids.size()), out.vocab_size}, out.logits.data()}},
                          {{"model", model_dir}, {"ids", opt->ids}});
    std::fprintf(stderr, "wrote logits [%zu, %lld] to %s\n", ids.size(), static_cast<long long>(out.vocab_size),
                 opt->out.c_str());
    return 0;
  };
}

}  // namespace tachyon::cli
