#include "cli/default_model.h"

#include <cstdlib>

namespace tachyon::cli {

std::string default_model_dir() {
  if (const char* env = std::getenv("TACHYON_DEFAULT_MODEL")) return env;
  return std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";
}

}  // namespace tachyon::cli
