// What a command's MODEL argument names. Every command that takes a model resolves it here,
// through io::resolve_model (a path, an alias, or a hub id in the Hugging Face cache), so a name
// means the same in `serve`, `run`, `info`, `logits`, `tokenize`, `template`, ...
//
// The embedded default model lives next to the binary's source tree (models/tachyon-demo), or
// at TACHYON_DEFAULT_MODEL when set; an empty MODEL and the alias `tachyon-demo` name it.
#pragma once

#include <string>

#include "io/hf_cache.h"
#include "io/model_resolve.h"

namespace tachyon::cli {

std::string default_model_dir();
io::ResolveOptions resolve_options();  // the environment's cache and alias file, and the demo
// "" -> the embedded model; anything else -> io::resolve_model (throws, listing what was searched).
io::ResolvedModel resolve_model_arg(const std::string& name);
// The repository `tachyon pull NAME` (and rm, and Ollama's /api/pull) means: an alias's hub id,
// or NAME itself as org/name[@rev]. Throws tachyon::Error prefixed with `verb`.
io::RepoRef hub_repo_of(const std::string& name, const char* verb);

}  // namespace tachyon::cli
