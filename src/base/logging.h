// Logging: spdlog under tachyon's names. Everything goes to stderr so stdout stays clean
// for command output (token streams, JSON).
#pragma once

#include <spdlog/spdlog.h>

namespace tachyon::log {
using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;
void init_from_env();  // TACHYON_LOG=debug|info|warn|error (default info)
}  // namespace tachyon::log
