// `tachyon info [MODEL_DIR] [--json]`: one screen about a checkpoint after the fail-closed
// load: architecture, parameters, dtypes, context, chat formats, KV memory, and for every
// speculation method whether it is supported and eligible here, and why not.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include <fmt/ranges.h>

#include "base/error.h"
#include "base/host_memory.h"
#include "base/json.h"
#include "chat/commands.h"
#include "chat/parsers/output_parser.h"
#include "engine/engine.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/kv_report.h"
#include "cli/quantize_option.h"
#include "kernels/cpu/isa/matmul_int8.h"
#include "io/config.h"
#include "io/gguf.h"
#include "io/gguf_config.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "kernels/weight_dequant.h"
#include "model/kv_format_choice.h"
#include "model/model.h"
#include "model/dflash_head.h"
#include "model/mtp_head.h"
#include "model/sources/packed_source.h"
#include "model/sources/weight_source.h"
#include "model/sources/gguf_repack.h"
#include "spec/draft_model.h"
#include "spec/drafter.h"

namespace tachyon::cli {

namespace {

const char* family_name(chat::ParserFamily f) {
  switch (f) {
    case chat::ParserFamily::kHermes: return "hermes (<tool_call> JSON)";
    case chat::ParserFamily::kLlama3: return "llama3 (JSON / python_tag)";
    case chat::ParserFamily::kDeepseekV3: return "deepseek_v3";
    case chat::ParserFamily::kGemma: return "gemma (tool_code)";
    case chat::ParserFamily::kHarmony: return "harmony (gpt-oss)";
    default: return "plain";
  }
}

Json speculation_report(const std::string& dir, const model::Model& model, kernels::Backend& backend) {
  namespace fs = std::filesystem;
  Json methods = Json::object();
  // MTP: declared by the config, verified tensor by tensor.
  try {
    auto head = model::MtpHead::load(dir, model.config(), backend);
    if (head)
      methods["mtp"] = {{"supported", true}, {"eligible", true},
                        {"why", fmt::format("MTP heads: 1, all {} tensors verified", head->num_tensors())}};
    else
      methods["mtp"] = {{"supported", true}, {"eligible", false}, {"why", "config declares no MTP heads"}};
  } catch (const Error& e) {
    methods["mtp"] = {{"supported", true}, {"eligible", false}, {"why", std::string("refused: ") + e.what()}};
  }
  const fs::path companion = fs::path(dir) / "drafter";
  if (!fs::exists(companion / "config.json")) {
    methods["draft"] = {{"supported", true}, {"eligible", false}, {"why", "no drafter/ folder (give --drafter DIR)"}};
  } else {
    try {
      spec::make_draft_model_drafter(companion.string(), dir, model, backend);
      methods["draft"] = {{"supported", true}, {"eligible", true}, {"why", "drafter/: found, tokenizer compatible"}};
    } catch (const Error& e) {
      methods["draft"] = {{"supported", true}, {"eligible", false}, {"why", std::string("drafter/: ") + e.what()}};
    }
  }
  // DFlash: a block drafter in MODEL/dflash, checked against this target.
  const fs::path dflash = fs::path(dir) / "dflash";
  int32_t dflash_block = 0;
  if (!fs::exists(dflash / "config.json")) {
    methods["dflash"] = {{"supported", true}, {"eligible", false}, {"why", "no dflash/ folder"}};
  } else {
    try {
      auto head = model::DFlashHead::load(dflash.string(), dir, model.config(), backend);
      dflash_block = head->block_size();
      methods["dflash"] = {{"supported", true}, {"eligible", true},
                           {"why", fmt::format("dflash/: block {}, all {} tensors verified", head->block_size(),
                                               head->num_tensors())}};
    } catch (const Error& e) {
      methods["dflash"] = {{"supported", true}, {"eligible", false}, {"why", std::string("dflash/: ") + e.what()}};
    }
  }
  methods["ngram"] = {{"supported", true}, {"eligible", true},
                      {"why", "model-free; per request behind the 3-gram repetition, acceptance and throughput gates"}};
  methods["suffix"] = {{"supported", true}, {"eligible", true},
                       {"why", "model-free; suffix trees over prompts and this server's outputs"}};
  // The merged drafter: one tree from prompt lookup and the model drafters, held by default beside them.
  std::vector<std::string> model_drafters;
  for (const char* name : {"draft", "mtp", "dflash"})
    if (methods[name]["eligible"].get<bool>()) model_drafters.push_back(name);
  if (model_drafters.size() > 1 && methods["mtp"]["eligible"].get<bool>() && methods["dflash"]["eligible"].get<bool>())
    model_drafters.pop_back();  // it takes one drafter that reads hidden states: MTP's
  methods["merged"] = {{"supported", true}, {"eligible", !model_drafters.empty()},
                       {"why", model_drafters.empty()
                                   ? std::string("needs a model drafter beside prompt lookup")
                                   : fmt::format("one tree from ngram + {}: nodes scored by measured acceptance, pruned "
                                                 "by measured verify cost; model drafters run where their gain pays",
                                                 fmt::join(model_drafters, " + "))}};
  // The default (no method pinned): every eligible drafter held at once, and per request the one
  // with the best measured tokens per second on its kind of text. Live figures per drafter and
  // kind exist only in a running server: its /metrics (tachyon_spec_drafter_*).
  for (auto it = methods.begin(); it != methods.end(); ++it) (*it)["default"] = (*it)["eligible"].get<bool>();
  // Drafts per step at most where no k is given (auto-k picks fewer where they do not pay).
  const int32_t engine_k = engine::EngineConfig{}.num_speculative_tokens;
  for (const char* name : {"ngram", "suffix"}) methods[name]["max_drafts"] = spec::kModelFreeMaxDrafts;
  for (const char* name : {"draft", "mtp", "merged"}) methods[name]["max_drafts"] = engine_k;
  if (methods["dflash"]["eligible"].get<bool>()) methods["dflash"]["max_drafts"] = dflash_block - 1;
  return methods;
}

// Draft trees (several continuations verified in one forward) for this model.
Json draft_tree_report(const model::Model& model) {
  if (model.kv_layout(1).num_state_layers > 0)
    return {{"eligible", false}, {"why", "hybrid model: the recurrent state follows one branch, so drafts stay chains"}};
  return {{"eligible", true},
          {"why", "requests without per-token logprobs; draft/mtp runner-up trees where verify rows measure cheap "
                  "(GPUs), chains on CPUs; DFlash DDTrees and merged trees sized per step from node probabilities "
                  "and the measured verify cost; any drafter with \"tree_nodes\":N"}};
}

// Bytes of KV per 1k tokens in every storage format (what the pool holds per token, params
// included), the format auto picks, and the rules for MLA latents and recurrent state.
Json kv_formats_report(const model::Model& model, const kernels::Backend& backend) {
  Json formats = Json::object();
  for (int i = 0; i <= static_cast<int>(kernels::KvFormat::Turbo); ++i) {
    const auto f = static_cast<kernels::KvFormat>(i);
    kv::KvLayout layout = model.kv_layout(1, 16);
    layout.format = f;
    const char* why = kernels::kv_format_unsupported(layout.storage_format(), layout.head_dim);
    formats[std::string(kernels::kv_format_name(f))] = {
        {"bytes_per_1k_tokens", static_cast<double>(layout.bytes_per_block()) / 16 * 1000},
        {"stored_as", std::string(kernels::kv_format_name(layout.storage_format()))},
        {"supported", why == nullptr},
        {"why", why ? why : ""}};
  }
  return {{"default", std::string(kernels::kv_format_name(model::resolve_kv_format(std::nullopt, model.config(), backend)))},
          {"formats", formats},
          {"rules", model::kv_format_rules()}};
}

// generation_config.json's sampling defaults: what a request that leaves a field out gets.
Json sampling_defaults_report(const std::string& dir) {
  const io::GenerationConfig g = io::load_generation_config(dir);
  Json out = Json::object();
  if (g.temperature) out["temperature"] = *g.temperature;
  if (g.top_p) out["top_p"] = *g.top_p;
  if (g.top_k) out["top_k"] = *g.top_k;
  if (g.min_p) out["min_p"] = *g.min_p;
  if (g.repetition_penalty) out["repetition_penalty"] = *g.repetition_penalty;
  return out;
}

// A GGUF file's version and tensor-type mix: count and bytes per ggml type, and the weight format
// each type is repacked into.
Json gguf_report(const io::GgufFile& file) {
  Json types = Json::object();
  int64_t total = 0;
  for (const io::GgufTensor& t : file.tensors()) {
    const std::string type = io::ggml_type_name(t.type);
    Json& entry = types[type];
    if (entry.is_null())
      entry = {{"count", 0}, {"bytes", 0},
               {"runs_as", model::ggml_type_supported(t.type) ? model::repacked_format_name(t.type) : "unsupported"}};
    entry["count"] = entry["count"].get<int64_t>() + 1;
    entry["bytes"] = entry["bytes"].get<int64_t>() + static_cast<int64_t>(t.num_bytes);
    total += static_cast<int64_t>(t.num_bytes);
  }
  return {{"version", file.version()}, {"tensors", file.tensors().size()}, {"tensor_bytes", total},
          {"tensor_types", types}};
}

}  // namespace

Command add_info_command(CLI::App& app) {
  struct Options {
    std::string dir, quantize, quantize_decode, int8_activations, device = "cpu";
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("info", "Load a model (checking every tensor) and describe it");
  cmd->add_option("model", opt->dir, "Model: a folder, a .gguf file, a hub id org/name[@rev] in the HF cache, or an alias "
                                     "(default: the embedded tachyon-demo)");
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  add_quantize_option(*cmd, opt->quantize);
  add_quantize_decode_option(*cmd, opt->quantize_decode);
  add_int8_activations_option(*cmd, opt->int8_activations);
  cmd->add_option("--device", opt->device, "Backend that loads the weights (cpu, reference, cuda)")->capture_default_str();
  return [opt] {
    const io::ResolvedModel resolved = resolve_model_arg(opt->dir);
    opt->dir = resolved.path;
    auto backend = kernels::make_backend(opt->device);
    // Bytes of the weights handed to the backend, per storage format (kernels/weight.h), as the
    // loaders repacked them and --quantize quantized them; and of the decode copies that
    // --quantize-decode adds beside them.
    using BytesPerFormat = std::map<std::string, std::pair<int64_t, int64_t>>;  // format -> bytes, tensors
    BytesPerFormat weight_bytes, decode_bytes;
    auto tally = [](BytesPerFormat& to) {
      return [&to](const std::string&, const kernels::Weight& w) {
        auto& [bytes, count] = to[model::format_name(w)];
        bytes += kernels::weight_bytes(w);
        count += 1;
      };
    };
    model::LoadOptions load_options = load_options_for(opt->quantize, opt->quantize_decode, opt->int8_activations);
    load_options.on_weight = tally(weight_bytes);
    load_options.on_decode_weight = tally(decode_bytes);
    const bool decode_copies = load_options.quantize_decode != kernels::QuantizeMode::None;
    auto model = model::load_model(opt->dir, *backend, load_options);
    const std::string method = model::quantization_method(model->config());
    const auto& c = model->config();
    int64_t params = 0, mtp_params = 0;
    std::map<std::string, int64_t> dtypes;
    Json gguf;  // a GGUF file: its version and tensor-type mix
    if (const auto gguf_file = io::gguf_model_file(opt->dir)) {
      const auto file = io::GgufFile::open(*gguf_file);
      gguf = gguf_report(*file);
      for (const io::GgufTensor& t : file->tensors()) params += t.num_elements();
      for (const auto& [type, mix] : gguf["tensor_types"].items()) dtypes[type] = mix["count"].get<int64_t>();
    } else {
      // The logical tensors (a quantized checkpoint's packed parts count as the weight they hold).
      const auto weights = model::open_weight_source(opt->dir, c);
      // MTP tensors: Qwen3-Next's mtp.*, or DeepSeek-V3's extra layer model.layers.{num_hidden_layers}.*
      const std::string extra_layer = "model.layers." + std::to_string(c.num_hidden_layers) + ".";
      for (const auto& name : weights->names()) {
        const bool mtp = name.rfind("mtp.", 0) == 0 || name.rfind(extra_layer, 0) == 0;
        const model::WeightSource::Info t = weights->info(name);
        int64_t elements = 1;
        for (int64_t d : t.shape) elements *= d;
        (mtp ? mtp_params : params) += elements;
        dtypes[t.type] += 1;
      }
    }
    std::string tool_format = "plain", reasoning = "no";
    try {
      const auto parser = chat::parser_options_for_model(opt->dir);
      tool_format = family_name(parser.family);
      reasoning = parser.reasoning ? "<think> ... </think>" : "no";
    } catch (const std::exception&) {
      tool_format = "no chat template";
    }
    kv::KvLayout layout = engine_kv_layout(model->kv_layout(1, 16), c.max_position_embeddings);  // per token: what grows
    layout.format = model::resolve_kv_format(std::nullopt, c, *backend);
    const double kv_per_1k = static_cast<double>(layout.bytes_per_block()) / 16 * 1000;
    const Json kv_memory = kv_memory_report(layout, c.max_position_embeddings, host_available_bytes());
    Json info = {{"model", opt->dir},
                 {"architecture", c.architectures.empty() ? c.model_type : c.architectures.front()},
                 {"model_type", c.model_type},
                 {"parameters", params},
                 {"mtp_parameters", mtp_params},
                 {"dtypes", dtypes},
                 {"layers", c.num_hidden_layers},
                 {"hidden_size", c.hidden_size},
                 {"heads", c.num_attention_heads},
                 {"kv_heads", c.num_key_value_heads},
                 {"head_dim", c.head_dim},
                 {"vocab_size", c.vocab_size},
                 {"context_length", c.max_position_embeddings},
                 {"tool_call_format", tool_format},
                 {"reasoning_format", reasoning},
                 {"sampling_defaults", sampling_defaults_report(opt->dir)},
                 {"kv_bytes_per_1k_tokens", kv_per_1k},
                 {"kv_memory", kv_memory},
                 {"kv_swap", kv_swap_report(backend->device_memory().has_value())},
                 {"kv_formats", kv_formats_report(*model, *backend)},
                 {"backend", backend->name()},
                 {"speculation", speculation_report(opt->dir, *model, *backend)},
                 {"draft_trees", draft_tree_report(*model)},
                 {"quantization", method.empty() ? "none" : method},
                 {"quantize_at_load", opt->quantize.empty() ? "none" : opt->quantize},
                 {"quantize_decode", decode_copies ? opt->quantize_decode : "none"},
                 {"int8_activations", {{"option", opt->int8_activations.empty() ? "auto" : opt->int8_activations},
                                       {"weights", backend->int8_activation_weights()},
                                       {"kernel", backend->int8_activation_weights() > 0 ? kernels::cpu::matmul_int8_kernel_name() : "-"}}},
                 {"f32_stored_as_bf16", {{"tensors", backend->f32_weights_stored_as_bf16().tensors},
                                         {"bytes_saved", backend->f32_weights_stored_as_bf16().bytes_saved}}}};
    auto bytes_report = [](const BytesPerFormat& per_format, int64_t& total) {
      Json out = Json::object();
      for (const auto& [format, bc] : per_format) {
        out[format] = {{"bytes", bc.first}, {"tensors", bc.second}};
        total += bc.first;
      }
      return out;
    };
    // The footprint: the weights as loaded (prefill rows read these) plus the decode copies.
    int64_t total_bytes = 0, decode_total = 0;
    info["weight_bytes"] = bytes_report(weight_bytes, total_bytes);
    info["decode_copy_bytes"] = bytes_report(decode_bytes, decode_total);
    info["weight_footprint_bytes"] = total_bytes + decode_total;
    // Where the name led: the path, the hub snapshot, or the alias and the defaults it brings.
    Json source = {{"name", resolved.display_name}, {"source", io::model_source_name(resolved.source)},
                   {"path", resolved.path}};
    if (!resolved.repo_id.empty())
      source.update({{"repo_id", resolved.repo_id}, {"revision", resolved.revision}, {"commit", resolved.commit}});
    if (resolved.alias)
      source["alias"] = {{"name", resolved.alias->name}, {"target", resolved.alias->target},
                         {"origin", resolved.alias->origin}, {"drafter", resolved.alias->defaults.drafter},
                         {"kv_format", resolved.alias->defaults.kv_format}};
    info["resolved"] = source;
    if (!gguf.is_null()) info["gguf"] = gguf;
    if (opt->json) {
      std::cout << info.dump(2) << "\n";
      return 0;
    }
    std::string sampling;
    for (const auto& [name, value] : info["sampling_defaults"].items())
      sampling += fmt::format("{}{} {}", sampling.empty() ? "" : ", ", name, value.dump());
    sampling = sampling.empty() ? "none (requests get temperature 1, no truncation or penalty)"
                                : sampling + " (generation_config.json; a request's own values win)";
    std::string dtype_list;
    for (const auto& [d, n] : dtypes) dtype_list += fmt::format("{}{} x{}", dtype_list.empty() ? "" : ", ", d, n);
    std::printf("model            %s\narchitecture     %s (%s)\nparameters       %.2fM (+%.2fM MTP)\ndtypes           %s\n"
                "layers           %lld, hidden %lld, heads %lld / kv %lld, head_dim %lld\nvocab            %lld\n"
                "context          %lld tokens\nKV memory        %.2f MiB per 1k tokens (%s, the default)\ntool calls       %s\n"
                "reasoning        %s\nsampling         %s\nbackend          %s\n",
                opt->dir.c_str(), info["architecture"].get<std::string>().c_str(), c.model_type.c_str(), params / 1e6,
                mtp_params / 1e6, dtype_list.c_str(), static_cast<long long>(c.num_hidden_layers),
                static_cast<long long>(c.hidden_size), static_cast<long long>(c.num_attention_heads),
                static_cast<long long>(c.num_key_value_heads), static_cast<long long>(c.head_dim),
                static_cast<long long>(c.vocab_size), static_cast<long long>(c.max_position_embeddings),
                kv_per_1k / (1 << 20), info["kv_formats"]["default"].get<std::string>().c_str(), tool_format.c_str(), reasoning.c_str(), sampling.c_str(),
                backend->name().c_str());
    std::printf("%s", kv_memory_lines(kv_memory).c_str());
    std::printf("KV swap space    %s\n", info["kv_swap"]["rule"].get<std::string>().c_str());
    if (!gguf.is_null()) {
      std::printf("gguf             version %d, %lld tensors, %.1f MiB of tensor data\n", gguf["version"].get<int>(),
                  static_cast<long long>(gguf["tensors"].get<int64_t>()), gguf["tensor_bytes"].get<double>() / (1 << 20));
      for (const auto& [type, mix] : gguf["tensor_types"].items())
        std::printf("  %-14s %4lld tensors %10.2f MiB  -> %s\n", type.c_str(),
                    static_cast<long long>(mix["count"].get<int64_t>()), mix["bytes"].get<double>() / (1 << 20),
                    mix["runs_as"].get<std::string>().c_str());
    }
    std::printf("KV formats       --kv-cache-dtype; %s\n", info["kv_formats"]["rules"].get<std::string>().c_str());
    if (!resolved.repo_id.empty())
      std::printf("hub              %s@%s (commit %s)\n", resolved.repo_id.c_str(), resolved.revision.c_str(),
                  resolved.commit.c_str());
    if (resolved.alias)
      std::printf("alias            %s (%s): drafter %s, KV format %s (serve applies it unless --kv-cache-dtype is given)\n",
                  resolved.alias->name.c_str(), resolved.alias->origin.c_str(),
                  resolved.alias->defaults.drafter.empty() ? "-" : resolved.alias->defaults.drafter.c_str(),
                  resolved.alias->defaults.kv_format.empty() ? "-" : resolved.alias->defaults.kv_format.c_str());
    const std::string quantization = (method.empty() ? std::string("none (float checkpoint)") : method) +
                                     (opt->quantize.empty() ? "" : ", --quantize " + opt->quantize) +
                                     (decode_copies ? ", --quantize-decode " + opt->quantize_decode : "");
    const auto print_formats = [](const BytesPerFormat& per_format) {
      for (const auto& [format, bc] : per_format)
        std::printf("  %-24s %9.2f MiB in %lld tensors\n", format.c_str(), static_cast<double>(bc.first) / (1 << 20),
                    static_cast<long long>(bc.second));
    };
    std::printf("quantization     %s\nweights          %.2f MiB%s\n", quantization.c_str(),
                static_cast<double>(total_bytes) / (1 << 20), decode_copies ? " (prefill rows read these)" : "");
    print_formats(weight_bytes);
    const int64_t int8_weights = backend->int8_activation_weights();
    std::printf("int8 activations %s (--int8-activations %s)%s\n", int8_weights > 0 ? "on" : "off",
                info["int8_activations"]["option"].get<std::string>().c_str(),
                int8_weights > 0 ? fmt::format(": {} integer matmul weights on int8 x int8 dot products ({})",
                                               int8_weights, kernels::cpu::matmul_int8_kernel_name()).c_str()
                                 : "");
    if (const auto narrowed = backend->f32_weights_stored_as_bf16(); narrowed.tensors > 0)
      std::printf("f32 as bf16      %lld F32 matrices hold only bf16 values: stored as bf16, %.2f MiB less\n",
                  static_cast<long long>(narrowed.tensors), static_cast<double>(narrowed.bytes_saved) / (1 << 20));
    if (decode_copies) {
      std::printf("decode copies    %.2f MiB (decode and verify rows read these; footprint %.2f MiB)\n",
                  static_cast<double>(decode_total) / (1 << 20),
                  static_cast<double>(total_bytes + decode_total) / (1 << 20));
      print_formats(decode_bytes);
    }
    std::printf("speculation\n");
    for (const auto& [name, m] : info["speculation"].items())
      std::printf("  %-7s %-13s %s%s\n", name.c_str(),
                  !m["supported"].get<bool>() ? "unsupported" : (m["eligible"].get<bool>() ? "eligible" : "not eligible"),
                  m["why"].get<std::string>().c_str(),
                  m.contains("max_drafts") && m["eligible"].get<bool>()
                      ? fmt::format("; up to {} drafts per step", m["max_drafts"].get<int>()).c_str()
                      : "");
    std::printf("  %-7s %-13s %s\n", "trees", info["draft_trees"]["eligible"].get<bool>() ? "eligible" : "not eligible",
                info["draft_trees"]["why"].get<std::string>().c_str());
    return 0;
  };
}

}  // namespace tachyon::cli
