#include "base/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace tachyon::log {

void init_from_env() {
  auto logger = spdlog::stderr_color_mt("tachyon");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  const char* level = std::getenv("TACHYON_LOG");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
}

}  // namespace tachyon::log
