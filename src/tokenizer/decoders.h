// Decoders of tokenizer.json ("decoder"): ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, BPEDecoder, WordPiece and Sequence.
//
// Like Hugging Face's `decode_chain`, a decoder maps the list of token strings to a new
// list; the text is the concatenation of the final list. Invalid UTF-8 produced by byte
// tokens becomes U+FFFD: ByteLevel applies `from_utf8_lossy` to all bytes together,
// ByteFallback emits one U+FFFD per byte token of an invalid run.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace tachyon::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for JSON null; unknown types throw an Error naming the type and the path.
std::unique_ptr<Decoder> make_decoder(const Json& value, const std::string& path);

}  // namespace tachyon::tokenizer
