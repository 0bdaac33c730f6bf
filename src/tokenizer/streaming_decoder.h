// Incremental detokenization for streaming responses: feed ids one at a time, get back
// only text that is complete UTF-8 and will not change when later ids arrive.
//
// Text is held back while the decoded tail ends in U+FFFD (a byte-fallback or byte-level
// character whose remaining bytes are still to come, or a character spread over several
// tokens). The decoder keeps the ids of the last emitted step as context, so decoders that
// look at neighbouring tokens (Metaspace's leading-space rule, ByteLevel's byte runs) give
// the same text as decoding everything at once. This is Hugging Face's DecodeStream
// algorithm.
//
//   StreamingDecoder stream(tokenizer);
//   for (int32_t id : generated) send(stream.push(id));   // "" while a character is incomplete
//   send(stream.flush());                                  // the rest, U+FFFD for unfinished bytes
//
// Not thread-safe (one per stream); the Tokenizer it reads is shared and may be used
// concurrently by others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tachyon::tokenizer {

class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = true);

  // Appends `id`; returns the newly completed text (often empty).
  std::string push(int32_t id);
  // Returns whatever is still held back (incomplete bytes become U+FFFD) and resets.
  std::string flush();

 private:
  std::string decode_pending() const;  // the ids not yet part of emitted text, decoded alone

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // context window: the last emitting step's ids and the pending ones
  std::string prefix_;        // decode of ids_ as of the last emission
  // ids_[prefix_index_, end) have not been emitted yet.
  size_t prefix_index_ = 0;
};

}  // namespace tachyon::tokenizer
