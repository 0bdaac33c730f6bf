// Fuzz target: the GGUF reader must turn any bytes into either a validated file or a
// tachyon::Error, never a crash or a read outside the input; every accessor of every value
// it accepted must be safe to call.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "io/gguf.h"

namespace {

template <typename F>
void swallow(F&& f) {
  try {
    f();
  } catch (const tachyon::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon::io;
  std::shared_ptr<const GgufFile> file;
  try {
    file = GgufFile::parse(data, size, "fuzz");
  } catch (const tachyon::Error&) {
    return 0;
  }
  volatile uint64_t sink = 0;
  for (const GgufValue& v : file->metadata()) {
    swallow([&] { sink = sink + static_cast<uint64_t>(v.as_int()); });
    swallow([&] { sink = sink + v.as_uint(); });
    swallow([&] { sink = sink + (v.as_float() > 0.5 ? 1u : 0u); });  // (a negative float cast to unsigned is UB)
    swallow([&] { sink = sink + v.as_bool(); });
    swallow([&] { sink = sink + v.as_string().size(); });
    swallow([&] { sink = sink + v.as_ints().size(); });
    swallow([&] { sink = sink + v.as_f32s().size(); });
    swallow([&] { sink = sink + v.as_bools().size(); });
    swallow([&] {
      for (std::string_view s : v.as_strings())
        if (!s.empty()) sink = sink + static_cast<uint8_t>(s.front()) + static_cast<uint8_t>(s.back());
    });
    sink = sink + v.summary().size();
  }
  for (const GgufTensor& t : file->tensors()) {
    // First and last byte of every tensor: must be inside the input.
    if (t.num_bytes) sink = sink + (t.data[0] ^ t.data[t.num_bytes - 1]);
    if (file->find_tensor(t.name) != &t) __builtin_trap();
  }
  return 0;
}
