// Fuzz target: arbitrary bytes (valid or not as UTF-8) encoded by real pipelines. Checks,
// beyond not crashing: every id is a token; the byte-level demo tokenizer (no normalizer)
// decodes its ids back to the input exactly (after invalid UTF-8 became U+FFFD); the
// streaming detokenizer's output concatenates to the one-shot decode.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using tachyon::tokenizer::StreamingDecoder;
using tachyon::tokenizer::Tokenizer;

const Tokenizer& demo() {
  static const Tokenizer t = Tokenizer::from_file(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo/tokenizer.json");
  return t;
}
const Tokenizer& metaspace() {
  static const Tokenizer t = Tokenizer::from_file(std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/tokenizers/mini_metaspace.json");
  return t;
}

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "tokenizer_encode_fuzz: %s for a %zu-byte input\n", what, input.size());
  std::abort();
}

void check(const Tokenizer& tok, std::string_view input, bool exact_round_trip) {
  const auto ids = tok.encode(input, false);
  for (int32_t id : ids)
    if (tok.id_to_token(id).empty() && !tok.is_special(id)) fail("encode produced an empty token", input);
  const std::string text = tok.decode(ids, false);
  if (exact_round_trip && text != tachyon::tokenizer::unicode::sanitize_utf8(input))
    fail("decode(encode(x)) != x", input);
  StreamingDecoder stream(tok, false);
  std::string streamed;
  for (int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != text) fail("streamed text differs from decode", input);
  tok.encode(input, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check(demo(), input, true);
  check(metaspace(), input, false);
  return 0;
}
