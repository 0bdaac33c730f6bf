#include "io/model_resolve.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "base/json.h"
#include "io/hf_cache.h"

namespace tachyon::io {

namespace fs = std::filesystem;

namespace {

std::string home() {
  const char* h = std::getenv("HOME");
  return h ? h : "";
}

std::string expand_home(const std::string& path) {
  if (path == "~" || path.rfind("~/", 0) == 0) return home() + path.substr(1);
  return path;
}

// The .gguf files directly inside `dir`, sorted.
std::vector<fs::path> gguf_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".gguf" && e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

bool has_safetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json") return true;
  return false;
}

// Kind and load path of something that exists. A folder with safetensors weights is a
// checkpoint even when it also carries .gguf files (repositories often publish both); one whose
// only weights are .gguf files is GGUF, config.json or not (a pull takes config.json by default).
std::pair<ModelKind, std::string> classify(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (has_safetensors(p)) return {ModelKind::Dir, p.string()};
    const auto ggufs = gguf_files_in(p);
    if (ggufs.size() == 1) return {ModelKind::Gguf, ggufs.front().string()};
    if (!ggufs.empty()) return {ModelKind::Gguf, p.string()};
    return {ModelKind::Dir, p.string()};
  }
  if (p.extension() == ".gguf") return {ModelKind::Gguf, p.string()};
  return {ModelKind::File, p.string()};
}

// One line per place searched, for the unknown-name error.
struct Searched {
  std::vector<std::string> lines;
  void add(const std::string& what, const std::string& detail) { lines.push_back(fmt::format("  {:<9} {}", what, detail)); }
  std::string text() const {
    std::string s;
    for (const auto& l : lines) s += "\n" + l;
    return s;
  }
};

// The snapshot of repo@revision, or a description of why there is none (for `searched`).
std::optional<CachedSnapshot> lookup_cache(const std::string& cache_dir, const RepoRef& ref, std::string* why) {
  const fs::path repo = fs::path(cache_dir) / repo_folder_name(ref.repo_id);
  std::error_code ec;
  if (auto snap = find_cached_snapshot(cache_dir, ref.repo_id, ref.revision)) return snap;
  if (!fs::is_directory(cache_dir, ec)) *why = fmt::format("{} (absent: the cache folder does not exist)", repo.string());
  else if (!fs::is_directory(repo, ec)) *why = fmt::format("{} (absent)", repo.string());
  else {
    std::string have;
    for (const auto& r : list_cached_models(cache_dir))
      if (r.repo_id == ref.repo_id) {
        for (const auto& [name, commit] : r.refs) have += fmt::format("{}{} -> {}", have.empty() ? "" : ", ", name, commit.substr(0, 8));
        for (const auto& s : r.snapshots) have += fmt::format("{}{}", have.empty() ? "" : ", ", s.substr(0, 8));
      }
    *why = fmt::format("{}: no ref or snapshot '{}' (has: {})", repo.string(), ref.revision, have.empty() ? "nothing" : have);
  }
  return std::nullopt;
}

ResolvedModel from_snapshot(const std::string& name, const RepoRef& ref, const CachedSnapshot& snap) {
  ResolvedModel m;
  m.name = name;
  std::tie(m.kind, m.path) = classify(snap.path);
  m.source = ModelSource::HfCache;
  m.display_name = ref.repo_id;
  m.repo_id = ref.repo_id;
  m.revision = ref.revision;
  m.commit = snap.commit;
  return m;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (std::tolower(a[i - 1]) != std::tolower(b[j - 1]))});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

ModelAlias alias_from_json(const std::string& name, const Json& v, const std::string& file) {
  ModelAlias a;
  a.name = name;
  a.origin = file;
  if (v.is_string()) {
    a.target = v.get<std::string>();
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      if (key != "model" && key != "drafter" && key != "kv_format" && key != "description")
        throw Error("{}: alias '{}': unknown field '{}' (model, drafter, kv_format, description)", file, name, key);
      if (!it.value().is_string()) throw Error("{}: alias '{}': '{}' must be a string", file, name, key);
    }
    if (!v.contains("model")) throw Error("{}: alias '{}' has no \"model\"", file, name);
    a.target = v["model"].get<std::string>();
    a.defaults.drafter = v.value("drafter", "");
    a.defaults.kv_format = v.value("kv_format", "");
    a.description = v.value("description", "");
    static const char* kDrafters[] = {"", "ngram", "mtp", "draft", "suffix", "none"};
    if (std::find(std::begin(kDrafters), std::end(kDrafters), a.defaults.drafter) == std::end(kDrafters))
      throw Error("{}: alias '{}': drafter '{}' is not one of ngram, mtp, draft, suffix, none", file, name,
                  a.defaults.drafter);
  } else {
    throw Error("{}: alias '{}' must be a hub id, a path, or an object with \"model\"", file, name);
  }
  if (a.target.empty()) throw Error("{}: alias '{}' names an empty model", file, name);
  // "org/name" is a hub id; a path starts with '/', '~' or '.', or is one word. A relative path
  // is relative to the file, so the file can move with the checkpoints it names.
  const bool path_like = a.target[0] == '/' || a.target[0] == '~' || a.target[0] == '.';
  if (a.target != kDemoTarget && (path_like || !looks_like_repo_id(a.target))) {
    fs::path p = expand_home(a.target);
    if (p.is_relative()) p = fs::path(file).parent_path() / p;
    a.target = p.lexically_normal().string();
  }
  return a;
}

}  // namespace

const char* model_kind_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::Dir: return "dir";
    case ModelKind::Gguf: return "gguf";
    default: return "file";
  }
}

const char* model_source_name(ModelSource source) {
  switch (source) {
    case ModelSource::Path: return "path";
    case ModelSource::HfCache: return "hf-cache";
    default: return "alias";
  }
}

std::vector<ModelAlias> builtin_aliases() {
  // Drafter: the method that pays on this checkpoint: MTP where the checkpoint ships its heads
  // (Qwen3-Next, DeepSeek-V3), else prompt lookup (model-free, measured never slower).
  // KV format: bf16 halves the f32 pool at no measurable quality cost on these families.
  struct Row {
    const char *name, *target, *drafter, *kv, *description;
  };
  static const Row kRows[] = {
      {"tachyon-demo", kDemoTarget, "ngram", "f32", "the embedded 12.6M-parameter code model"},
      {"qwen3-0.6b", "Qwen/Qwen3-0.6B", "ngram", "bf16", "Qwen3 0.6B"},
      {"qwen3-1.7b", "Qwen/Qwen3-1.7B", "ngram", "bf16", "Qwen3 1.7B"},
      {"qwen3-4b", "Qwen/Qwen3-4B", "ngram", "bf16", "Qwen3 4B"},
      {"qwen3-8b", "Qwen/Qwen3-8B", "ngram", "bf16", "Qwen3 8B"},
      {"qwen3-8b-fp8", "Qwen/Qwen3-8B-FP8", "ngram", "bf16", "Qwen3 8B, FP8 weights"},
      {"qwen3-14b", "Qwen/Qwen3-14B", "ngram", "bf16", "Qwen3 14B"},
      {"qwen3-32b", "Qwen/Qwen3-32B", "ngram", "bf16", "Qwen3 32B"},
      {"qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "ngram", "bf16", "Qwen3 MoE, 30B total / 3B active"},
      {"qwen3-next-80b-a3b", "Qwen/Qwen3-Next-80B-A3B-Instruct", "mtp", "bf16", "Qwen3-Next hybrid MoE with MTP heads"},
      {"llama3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "ngram", "bf16", "Llama 3.1 8B Instruct (gated: HF_TOKEN)"},
      {"llama3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", "ngram", "bf16", "Llama 3.2 1B Instruct (gated: HF_TOKEN)"},
      {"llama3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", "ngram", "bf16", "Llama 3.2 3B Instruct (gated: HF_TOKEN)"},
      {"mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", "ngram", "bf16", "Mistral 7B Instruct v0.3"},
      {"gemma3-1b", "google/gemma-3-1b-it", "ngram", "bf16", "Gemma 3 1B (gated: HF_TOKEN)"},
      {"gemma3-4b", "google/gemma-3-4b-it", "ngram", "bf16", "Gemma 3 4B (gated: HF_TOKEN)"},
      {"gpt-oss-20b", "openai/gpt-oss-20b", "ngram", "bf16", "gpt-oss 20B (MXFP4 experts)"},
      {"gpt-oss-120b", "openai/gpt-oss-120b", "ngram", "bf16", "gpt-oss 120B (MXFP4 experts)"},
      {"deepseek-v3", "deepseek-ai/DeepSeek-V3", "mtp", "bf16", "DeepSeek-V3 (MLA, MTP layer)"},
  };
  std::vector<ModelAlias> out;
  for (const Row& r : kRows) out.push_back({r.name, r.target, r.description, {r.drafter, r.kv}, "built-in"});
  return out;
}

std::string user_alias_file() {
  if (const char* v = std::getenv("TACHYON_ALIASES"); v && *v) return expand_home(v);
  if (const char* v = std::getenv("XDG_CONFIG_HOME"); v && *v)
    return (fs::path(expand_home(v)) / "tachyon" / "aliases.json").string();
  return (fs::path(home()) / ".config" / "tachyon" / "aliases.json").string();
}

std::vector<ModelAlias> load_aliases(const std::string& alias_file) {
  std::vector<ModelAlias> aliases = builtin_aliases();
  const std::string file = alias_file.empty() ? user_alias_file() : alias_file;
  std::error_code ec;
  if (!fs::exists(file, ec)) return aliases;
  const Json j = parse_json(read_file(file), file);
  if (!j.is_object()) throw Error("{}: expected a JSON object of alias names", file);
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key().empty() || it.key().find_first_of(" \t/@") != std::string::npos)
      throw Error("{}: alias name '{}' must be one word without '/' or '@'", file, it.key());
    ModelAlias a = alias_from_json(it.key(), it.value(), file);
    auto same = std::find_if(aliases.begin(), aliases.end(), [&](const ModelAlias& x) { return x.name == a.name; });
    if (same != aliases.end()) *same = std::move(a);
    else aliases.push_back(std::move(a));
  }
  return aliases;
}

const ModelAlias* find_alias(const std::vector<ModelAlias>& aliases, const std::string& name) {
  for (const auto& a : aliases)
    if (a.name == name) return &a;
  return nullptr;
}

std::optional<std::string> closest_alias(const std::vector<ModelAlias>& aliases, const std::string& name) {
  std::optional<std::string> best;
  size_t best_d = 3;
  for (const auto& a : aliases)
    if (const size_t d = edit_distance(a.name, name); d < best_d) best_d = d, best = a.name;
  return best;
}

ResolvedModel resolve_model(const std::string& name, const ResolveOptions& options) {
  if (name.empty()) throw Error("no model given");
  const std::string cache_dir = options.cache_dir.empty() ? hf_hub_cache_dir() : options.cache_dir;
  const std::string alias_file = options.alias_file.empty() ? user_alias_file() : options.alias_file;
  Searched searched;
  std::error_code ec;

  // 1. A path.
  const fs::path as_path = expand_home(name);
  if (fs::exists(as_path, ec)) {
    ResolvedModel m;
    m.name = name;
    std::tie(m.kind, m.path) = classify(as_path);
    m.source = ModelSource::Path;
    const fs::path folder = fs::is_directory(as_path, ec) ? as_path : as_path.parent_path();
    m.display_name = folder.lexically_normal().filename().string();
    if (m.display_name.empty() || m.display_name == ".") m.display_name = fs::weakly_canonical(folder, ec).filename().string();
    if (m.kind == ModelKind::Gguf && !fs::is_directory(as_path, ec)) m.display_name = as_path.stem().string();  // x.gguf: "x"
    return m;
  }
  searched.add("path", fmt::format("{} (no such file or folder{})", as_path.string(),
                                   as_path.is_relative() ? ", relative to " + fs::current_path(ec).string() : ""));

  // 2. An alias, optionally with @revision for hub targets.
  const std::vector<ModelAlias> aliases = load_aliases(alias_file);
  const size_t at = name.find('@');
  const std::string alias_name = name.substr(0, at);
  if (const ModelAlias* a = find_alias(aliases, alias_name)) {
    ResolvedModel m;
    m.name = name;
    m.source = ModelSource::Alias;
    m.display_name = a->name;
    m.alias = *a;
    if (a->target == kDemoTarget) {
      if (at != std::string::npos) throw Error("alias '{}' names the embedded demo model, which has no revisions", a->name);
      if (options.demo_dir.empty() || !fs::is_directory(options.demo_dir, ec))
        throw Error("alias '{}': the embedded demo model is not at '{}'", a->name, options.demo_dir);
      std::tie(m.kind, m.path) = classify(options.demo_dir);
      return m;
    }
    if (auto ref = parse_repo_ref(a->target); ref && looks_like_repo_id(a->target)) {
      if (at != std::string::npos) ref->revision = name.substr(at + 1), ref->revision_given = true;
      std::string why;
      const auto snap = lookup_cache(cache_dir, *ref, &why);
      if (!snap)
        throw Error("alias '{}' ({}, {}) names {}@{}, which is not in the Hugging Face cache: {}\n"
                    "Download it with `tachyon pull {}`.",
                    a->name, a->origin, a->description.empty() ? "no description" : a->description, ref->repo_id,
                    ref->revision, why, name);
      ResolvedModel hub = from_snapshot(name, *ref, *snap);
      m.kind = hub.kind, m.path = hub.path, m.repo_id = hub.repo_id, m.revision = hub.revision, m.commit = hub.commit;
      return m;
    }
    if (at != std::string::npos) throw Error("alias '{}' names a path ({}), which has no revisions", a->name, a->target);
    if (!fs::exists(a->target, ec)) throw Error("alias '{}' ({}) names {}, which does not exist", a->name, a->origin, a->target);
    std::tie(m.kind, m.path) = classify(a->target);
    return m;
  }
  searched.add("aliases", fmt::format("built-in table ({} names), {} ({})", builtin_aliases().size(), alias_file,
                                      fs::exists(alias_file, ec) ? "read" : "no such file"));

  // 3. A hub id in the cache.
  if (const auto ref = parse_repo_ref(name)) {
    std::string why;
    if (const auto snap = lookup_cache(cache_dir, *ref, &why)) return from_snapshot(name, *ref, *snap);
    searched.add("hf cache", why);
  } else {
    searched.add("hf cache", fmt::format("{} (skipped: '{}' is not a hub id org/name[@revision])", cache_dir, name));
  }

  std::string hint;
  if (const auto close = closest_alias(aliases, alias_name); close) hint = fmt::format("\nDid you mean the alias '{}'?", *close);
  if (looks_like_repo_id(name)) hint += fmt::format("\nDownload it with `tachyon pull {}`.", name);
  throw Error("model '{}' not found; searched:{}{}\n`tachyon ls` lists the models and aliases here.", name, searched.text(),
              hint);
}

}  // namespace tachyon::io
