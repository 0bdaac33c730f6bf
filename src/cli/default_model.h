// Where the embedded default model lives: next to the binary's source tree (models/
// tachyon-demo), or TACHYON_DEFAULT_MODEL when set.
#pragma once

#include <string>

namespace tachyon::cli {
std::string default_model_dir();
}
