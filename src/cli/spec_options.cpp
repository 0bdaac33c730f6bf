#include "cli/spec_options.h"

#include <filesystem>

#include <fmt/ranges.h>

#include "base/error.h"
#include "base/json.h"
#include "base/logging.h"
#include "cli/default_model.h"
#include "model/dflash_head.h"
#include "spec/dflash.h"
#include "spec/draft_model.h"
#include "spec/merged_drafter.h"
#include "spec/mtp.h"
#include "model/mtp_head.h"
#include "spec/ngram.h"
#include "spec/suffix.h"

namespace tachyon::cli {

void SpecOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--speculative-config", speculative_config,
                 R"(JSON: {"method":"ngram|draft|mtp|suffix|dflash","num_speculative_tokens":k,"disable_auto_k":false,)"
                 R"("disable_gates":false,"tree_nodes":n})");
  cmd.add_option("--drafter", drafter_dir, "Draft model: folder, hub id or alias (default: MODEL/drafter when present)");
  cmd.add_flag("--no-pld", no_pld, "Disable the drafters that look text up: prompt lookup (ngram) and suffix trees");
  cmd.add_flag("--no-suffix", no_suffix, "Disable suffix-tree speculation");
  cmd.add_flag("--no-drafter", no_drafter, "Do not load drafter models (MODEL/drafter or --drafter, MODEL/dflash)");
  cmd.add_flag("--no-mtp", no_mtp, "Do not use the checkpoint's MTP heads");
  cmd.add_flag("--no-dflash", no_dflash, "Do not load the DFlash drafter (MODEL/dflash)");
}

namespace {

// A DFlash drafter from `dir`; k up to its block - 1 unless told (`k`).
std::unique_ptr<spec::Drafter> load_dflash(const std::string& dir, const std::string& model_dir,
                                           const model::Model& model, kernels::Backend& backend, int32_t& k) {
  std::unique_ptr<model::DFlashHead> head;
  {
    const kernels::DraftWeights scope(backend);  // it only drafts: its matrices in draft precision
    head = model::DFlashHead::load(dir, model_dir, model.config(), backend);
  }
  log::info("DFlash drafter: block {}, target layers {}, all {} tensors verified", head->block_size(),
            fmt::join(head->target_layer_ids(), ","), head->num_tensors());
  k = head->block_size() - 1;  // one forward drafts the whole block
  return spec::make_dflash_drafter(std::move(head), backend);
}

}  // namespace

SpecDrafters SpecOptions::apply(const std::string& model_dir, const model::Model& model, kernels::Backend& backend,
                                engine::EngineConfig& config) const {
  namespace fs = std::filesystem;
  std::string method;
  bool k_given = false;
  if (!speculative_config.empty()) {
    const Json j = parse_json(speculative_config, "--speculative-config");
    if (!j.is_object()) throw Error("--speculative-config must be a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "method" && it.key() != "num_speculative_tokens" && it.key() != "disable_auto_k" &&
          it.key() != "disable_gates" && it.key() != "tree_nodes")
        throw Error("--speculative-config: unknown field '{}'", it.key());
    if (j.contains("method")) {
      if (!j["method"].is_string()) throw Error("--speculative-config: 'method' must be a string");
      method = j["method"].get<std::string>();
    }
    if (j.contains("num_speculative_tokens")) {
      if (!j["num_speculative_tokens"].is_number_integer() || j["num_speculative_tokens"].get<int>() < 1 ||
          j["num_speculative_tokens"].get<int>() > 16)
        throw Error("--speculative-config: 'num_speculative_tokens' must be an integer in [1, 16]");
      config.num_speculative_tokens = j["num_speculative_tokens"].get<int32_t>();
      k_given = true;
    }
    if (j.contains("tree_nodes")) {
      if (!j["tree_nodes"].is_number_integer() || j["tree_nodes"].get<int>() < -1 || j["tree_nodes"].get<int>() > 64)
        throw Error("--speculative-config: 'tree_nodes' must be an integer in [-1, 64] (0: chains, -1: auto)");
      config.max_tree_nodes = j["tree_nodes"].get<int32_t>();
    }
    for (const char* key : {"disable_auto_k", "disable_gates"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_boolean()) throw Error("--speculative-config: '{}' must be true or false", key);
      (std::string(key) == "disable_auto_k" ? config.auto_k : config.gates) = !j[key].get<bool>();
    }
  }
  // --drafter takes a model name like every MODEL argument (a folder, a hub id, an alias).
  const std::string companion =
      drafter_dir.empty() ? (fs::path(model_dir) / "drafter").string() : resolve_model_arg(drafter_dir).path;
  const bool have_companion = fs::exists(fs::path(companion) / "config.json");
  // Fail closed: a config that declares MTP heads must carry all of them, whatever drafter
  // is chosen, unless --no-mtp.
  std::unique_ptr<model::MtpHead> mtp_head;
  if (!no_mtp) {
    try {
      const kernels::DraftWeights scope(backend);  // the head only drafts: its matrices in draft precision
      mtp_head = model::MtpHead::load(model_dir, model.config(), backend);
    } catch (const Error& e) {
      throw Error("the config declares MTP heads that cannot be loaded (give --no-mtp to run without them): {}",
                  e.what());
    }
  }
  // A pinned method: the model alias's drafter, used when neither --speculative-config's method
  // nor a --no-* flag decides (a method the checkpoint cannot run falls back to ngram).
  if (method.empty() && !alias_method.empty() && !no_pld && !no_suffix && !no_drafter && !no_mtp && !no_dflash) {
    if (alias_method == "none") {
      config.drafter = nullptr;
      return {};
    }
    const bool runnable = alias_method == "ngram" || alias_method == "suffix" || (alias_method == "mtp" && mtp_head) ||
                          (alias_method == "draft" && have_companion);
    method = runnable ? alias_method : "ngram";
    if (!runnable) log::info("the model alias asks for '{}' speculation, which this checkpoint lacks; using ngram", alias_method);
  }
  if (method.empty()) return default_set(model_dir, companion, have_companion, std::move(mtp_head), model, backend,
                                         config, k_given);

  std::unique_ptr<spec::Drafter> drafter;
  if (method == "draft") {
    if (no_drafter) throw Error("--speculative-config asks for method 'draft' but --no-drafter was given");
    if (!have_companion) throw Error("method 'draft': no draft model at {} (give --drafter DIR)", companion);
    drafter = spec::make_draft_model_drafter(companion, model_dir, model, backend);
  } else if (method == "ngram") {
    if (no_pld) throw Error("--speculative-config asks for method 'ngram' but --no-pld was given");
    drafter = spec::make_ngram_drafter({});
    config.model_free_drafter = true;
    if (!k_given) config.num_speculative_tokens = spec::kModelFreeMaxDrafts;
  } else if (method == "mtp") {
    if (no_mtp) throw Error("--speculative-config asks for method 'mtp' but --no-mtp was given");
    if (!mtp_head) throw Error("method 'mtp': {} declares no MTP heads (mtp_num_hidden_layers)", model_dir);
    log::info("MTP heads: 1, all {} tensors verified", mtp_head->num_tensors());
    drafter = spec::make_mtp_drafter(std::move(mtp_head), backend);
  } else if (method == "dflash") {
    // The block drafter: --drafter DIR, else MODEL/dflash.
    if (no_dflash) throw Error("--speculative-config asks for method 'dflash' but --no-dflash was given");
    const std::string dir = drafter_dir.empty() ? (fs::path(model_dir) / "dflash").string() : companion;
    if (!fs::exists(fs::path(dir) / "config.json"))
      throw Error("method 'dflash': no DFlash drafter at {} (give --drafter DIR)", dir);
    int32_t block_k = 0;
    drafter = load_dflash(dir, model_dir, model, backend, block_k);
    if (!k_given) config.num_speculative_tokens = block_k;
  } else if (method == "suffix") {
    if (no_suffix) throw Error("--speculative-config asks for method 'suffix' but --no-suffix was given");
    drafter = spec::make_suffix_drafter({});
    config.model_free_drafter = true;
    if (!k_given) config.num_speculative_tokens = spec::kModelFreeMaxDrafts;
  } else if (!method.empty()) {
    throw Error("--speculative-config: unknown method '{}' (ngram, draft, mtp, suffix, dflash)", method);
  }
  config.drafter = drafter.get();
  if (drafter)
    log::info("speculative decoding: {} (k = {}{}{})", drafter->name(), config.num_speculative_tokens,
              config.auto_k ? ", auto" : "",
              !drafter->proposes_trees() || config.max_tree_nodes == 0 ? std::string()
              : config.max_tree_nodes < 0 ? std::string(drafter->scores_tree_nodes()
                                                            ? ", trees sized by node probability and measured verify cost"
                                                            : ", trees where verify rows measure cheap")
                                          : fmt::format(", trees of {} nodes", config.max_tree_nodes));
  SpecDrafters out;
  if (drafter) out.push_back(std::move(drafter));
  return out;
}

SpecDrafters SpecOptions::default_set(const std::string& model_dir, const std::string& companion, bool have_companion,
                                      std::unique_ptr<model::MtpHead> mtp_head, const model::Model& model,
                                      kernels::Backend& backend, engine::EngineConfig& config, bool k_given) const {
  namespace fs = std::filesystem;
  SpecDrafters out;
  const int32_t k = config.num_speculative_tokens;
  auto add = [&](std::unique_ptr<spec::Drafter> d, bool model_free, int32_t lane_k) {
    config.drafters.push_back({d.get(), model_free, lane_k});
    out.push_back(std::move(d));
  };
  if (!no_pld) add(spec::make_ngram_drafter({}), true, k_given ? k : spec::kModelFreeMaxDrafts);
  if (!no_drafter && have_companion) {
    try {
      add(spec::make_draft_model_drafter(companion, model_dir, model, backend), false, k);
    } catch (const Error& e) {  // an explicit --drafter must load; MODEL/drafter may be another model's
      if (!drafter_dir.empty()) throw;
      log::info("draft model left out: {}", e.what());
    }
  }
  if (mtp_head) {
    log::info("MTP heads: 1, all {} tensors verified", mtp_head->num_tensors());
    add(spec::make_mtp_drafter(std::move(mtp_head), backend), false, k);
  }
  const std::string dflash_dir = (fs::path(model_dir) / "dflash").string();
  if (!no_drafter && !no_dflash && fs::exists(fs::path(dflash_dir) / "config.json")) {
    int32_t block_k = 0;
    auto d = load_dflash(dflash_dir, model_dir, model, backend, block_k);
    add(std::move(d), false, k_given ? k : block_k);
  }
  // The merged drafter (spec/merged_drafter.h): prompt lookup's candidates and the model
  // drafters' in one tree, one more lane the choice measures. It takes at most one drafter that
  // reads hidden states: MTP where the checkpoint has heads, else DFlash.
  if (!no_pld && config.drafters.size() >= 2) {
    std::vector<spec::MergedMember> members;
    bool hidden = false;
    for (size_t i = 0; i < out.size(); ++i) {
      spec::Drafter* d = out[i].get();
      if (d->wants_hidden() && hidden) continue;
      hidden |= d->wants_hidden();
      members.push_back({d, d->name() != "ngram", config.drafters[i].num_speculative_tokens});
    }
    if (members.size() >= 2) add(std::make_unique<spec::MergedDrafter>(std::move(members)), false, k);
  }
  std::vector<std::string> names;  // with each lane's k_max
  for (const spec::DrafterLane& lane : config.drafters)
    names.push_back(fmt::format("{} (k {})", lane.drafter->name(), lane.num_speculative_tokens));
  if (config.drafters.size() == 1) {  // one: the engine's single-drafter fields, as a pinned method
    config.drafter = config.drafters.front().drafter;
    config.model_free_drafter = config.drafters.front().model_free;
    config.num_speculative_tokens = config.drafters.front().num_speculative_tokens;
    config.drafters.clear();
  }
  if (!out.empty())
    log::info("speculative decoding: {} held, the best measured per request kind{}", fmt::join(names, ", "),
              config.auto_k ? " (auto-k)" : "");
  return out;
}

}  // namespace tachyon::cli
