#include "server/reasoning_effort.h"

#include <fmt/format.h>

#include <array>

#include "server/api_error.h"

namespace tachyon::server {

namespace {
constexpr std::array<std::string_view, 5> kEfforts = {"none", "minimal", "low", "medium", "high"};
}

std::string validate_reasoning_effort(std::string_view effort, const std::string& path) {
  for (std::string_view known : kEfforts)
    if (effort == known) return std::string(effort);
  throw ApiError::invalid(
      fmt::format("'{}' must be one of none, minimal, low, medium, high; got '{}'", path, effort), path);
}

void apply_reasoning_effort(const std::string& template_source, const std::string& effort, OrderedJson& kwargs) {
  const bool off = effort == "none" || effort == "minimal";
  if (template_source.find("reasoning_effort") != std::string::npos) {
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = off ? "low" : effort;
  } else if (template_source.find("enable_thinking") != std::string::npos) {
    if (!kwargs.contains("enable_thinking")) kwargs["enable_thinking"] = !off;
  }
}

}  // namespace tachyon::server
