#include "engine/fault_injection.h"

#include <charconv>
#include <new>
#include <string_view>

#include "base/error.h"

namespace tachyon::engine {

void throw_injected_fault(FaultKind kind, RequestId id) {
  if (kind == FaultKind::kOutOfMemory) throw std::bad_alloc();
  throw Error("injected device error in the forward of request {}", id);
}

namespace {

int64_t parse_count(std::string_view text, const std::string& spec) {
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw Error("TACHYON_FAULTS '{}': '{}' is not a count", spec, text);
  return value;
}

}  // namespace

FaultInjector parse_fault_spec(const std::string& spec) {
  const size_t colon = spec.find(':');
  const std::string_view kind_name = std::string_view(spec).substr(0, colon);
  FaultKind kind;
  if (kind_name == "device") kind = FaultKind::kDeviceError;
  else if (kind_name == "oom") kind = FaultKind::kOutOfMemory;
  else throw Error("TACHYON_FAULTS '{}': the kind must be 'device' or 'oom' (as in device:every=5,after=2)", spec);
  int64_t every = 0, after = 0;
  std::string_view rest = colon == std::string::npos ? std::string_view() : std::string_view(spec).substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) throw Error("TACHYON_FAULTS '{}': '{}' is not key=value", spec, item);
    const std::string_view key = item.substr(0, eq);
    const int64_t value = parse_count(item.substr(eq + 1), spec);
    if (key == "every") every = value;
    else if (key == "after") after = value;
    else throw Error("TACHYON_FAULTS '{}': unknown key '{}' (every, after)", spec, key);
  }
  if (every < 1) throw Error("TACHYON_FAULTS '{}': every=N (N >= 1) is required", spec);
  return [kind, every, after](RequestId id, const GenerationRequest&, int32_t num_generated) {
    return id % static_cast<RequestId>(every) == 0 && num_generated >= after ? kind : FaultKind::kNone;
  };
}

}  // namespace tachyon::engine
