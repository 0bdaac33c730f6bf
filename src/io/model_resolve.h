// What a model argument names: the one resolution every command uses (serve, run, info,
// logits, tokenize, template, ...), so a name means the same thing everywhere.
//
//   io::ResolveOptions where{.demo_dir = "models/tachyon-demo"};
//   const io::ResolvedModel m = io::resolve_model("qwen3-8b", where);   // throws when unknown
//   load_model(m.path);
//
// A name is tried, in order, as
//   1. a path that exists: a model folder, a .gguf file, a folder whose only weights are .gguf
//      files (GGUF: the loader names them and stops), or any other file (tokenizer.json for `tokenize`);
//   2. an alias: the user's file ($TACHYON_ALIASES, else $XDG_CONFIG_HOME/tachyon/aliases.json,
//      else ~/.config/tachyon/aliases.json), then the built-in table; an alias names a hub id,
//      a path or the embedded demo, plus defaults (drafter, KV format);
//   3. a hub id `org/name[@revision]` in the Hugging Face cache (io/hf_cache.h); the revision is
//      a branch or tag (refs/<revision>) or a commit hash (full or a 7+ digit prefix).
// Nothing else: an unknown name is an Error that lists every place searched, never a fallback.
//
// The user alias file maps names to a hub id, a path, or an object:
//   {"coder": "Qwen/Qwen2.5-Coder-7B-Instruct",
//    "mine":  {"model": "~/ckpt/run7", "drafter": "ngram", "kv_format": "bf16", "description": "..."}}
// Relative paths are relative to the file's folder. User names shadow built-in ones.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tachyon::io {

enum class ModelKind { Dir, Gguf, File };
enum class ModelSource { Path, HfCache, Alias };
const char* model_kind_name(ModelKind kind);      // "dir" | "gguf" | "file"
const char* model_source_name(ModelSource source);  // "path" | "hf-cache" | "alias"

// Defaults an alias brings with it. Empty: no preference (the command's own default holds).
struct AliasDefaults {
  std::string drafter;    // ngram | mtp | draft | suffix: the speculation method when none is given
  std::string kv_format;  // the KV storage format the model is meant to run with (applied once
                          // KV formats other than f32 exist; recorded and shown until then)
};

struct ModelAlias {
  std::string name;
  std::string target;  // "org/name[@rev]", a path, or kDemoTarget
  std::string description;
  AliasDefaults defaults;
  std::string origin;  // "built-in" or the alias file it came from
};
inline constexpr const char* kDemoTarget = "builtin:tachyon-demo";

struct ResolvedModel {
  std::string name;   // as given
  std::string path;   // the folder or file to load
  ModelKind kind = ModelKind::Dir;
  ModelSource source = ModelSource::Path;
  std::string display_name;  // what clients call it: the alias, the hub id, or the folder name
  std::string repo_id, revision, commit;  // hub models: where the snapshot came from
  std::optional<ModelAlias> alias;        // when named by an alias
};

struct ResolveOptions {
  std::string demo_dir;    // where kDemoTarget points (the CLI knows; io does not)
  std::string cache_dir;   // empty: hf_hub_cache_dir()
  std::string alias_file;  // empty: user_alias_file()
};

ResolvedModel resolve_model(const std::string& name, const ResolveOptions& options);

// The built-in table, then the user's file (its entries replace built-in ones of the same
// name). A malformed user file is an Error naming the file and entry.
std::vector<ModelAlias> builtin_aliases();
std::vector<ModelAlias> load_aliases(const std::string& alias_file);  // "" = user_alias_file()
std::string user_alias_file();
const ModelAlias* find_alias(const std::vector<ModelAlias>& aliases, const std::string& name);
// The alias closest to `name` by edit distance (at most 2), for "did you mean" hints.
std::optional<std::string> closest_alias(const std::vector<ModelAlias>& aliases, const std::string& name);

}  // namespace tachyon::io
