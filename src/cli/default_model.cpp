#include "cli/default_model.h"

#include <cstdlib>

namespace tachyon::cli {

std::string default_model_dir() {
  if (const char* env = std::getenv("TACHYON_DEFAULT_MODEL")) return env;
  return std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
}

io::ResolveOptions resolve_options() { return io::ResolveOptions{default_model_dir(), "", ""}; }

io::ResolvedModel resolve_model_arg(const std::string& name) {
  return io::resolve_model(name.empty() ? default_model_dir() : name, resolve_options());
}

}  // namespace tachyon::cli
