// Fuzz target: arbitrary bytes as tokenizer.json. Loading must either succeed or throw
// tachyon::Error (a malformed file is reported, never a crash, hang or other exception);
// a file that loads must encode and decode without failing.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using tachyon::tokenizer::Tokenizer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Tokenizer tok = Tokenizer::from_json(text, "fuzz input");
    for (std::string_view sample : {"", " ", "Hello world", "a\xff\xfe b", "  \t\n123 ab-cd x\xE2\x96\x81y"}) {
      const std::vector<int32_t> ids = tok.encode(sample, true);
      tok.decode(ids, false);
      tok.decode(ids, true);
      tachyon::tokenizer::StreamingDecoder stream(tok);
      for (int32_t id : ids) stream.push(id);
      stream.flush();
    }
    const std::vector<int32_t> odd_ids = {0, 1, 2, 3, -1, 1 << 30, 5, 5};
    tok.decode(odd_ids, false);
  } catch (const tachyon::Error&) {
    // Reported as an error: the expected outcome for most mutations.
  }
  return 0;
}
