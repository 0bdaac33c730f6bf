// Fuzz target: the safetensors header parser and the config.json reader must turn any
// bytes into either tensors or a tachyon::Error, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "io/config.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto tensors = tachyon::io::parse_safetensors(data, size, "fuzz");
    for (const auto& [name, t] : tensors) {
      // Touch the first and last byte of every tensor: must be inside the input.
      volatile uint8_t sink = 0;
      if (t.num_bytes) sink = static_cast<const uint8_t*>(t.data)[0] ^ static_cast<const uint8_t*>(t.data)[t.num_bytes - 1];
      (void)sink;
    }
  } catch (const tachyon::Error&) {
  }
  tachyon::Json json;
  try {
    json = tachyon::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const tachyon::Error&) {  // parse_json reports every failure as Error, nothing else
    return 0;
  }
  try {
    tachyon::io::parse_model_config(json, "fuzz");
  } catch (const tachyon::Error&) {
  } catch (const tachyon::Json::exception&) {  // type errors inside arbitrary JSON values
  }
  return 0;
}
