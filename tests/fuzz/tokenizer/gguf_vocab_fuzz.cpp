// Fuzz target: arbitrary bytes as GGUF tokenizer metadata (a GgufVocab decoded from the
// input: model, pre-tokenizer family, token texts that may be empty, repeated or invalid
// UTF-8, token types and scores of any value, merges naming tokens or not, special-token
// ids in and far out of range, add_bos/add_eos). Building must either succeed or throw
// tachyon::Error; a tokenizer that builds must encode and decode any text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string text(size_t max_length) {
    const size_t n = byte() % (max_length + 1);
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(byte()));
    return s;
  }
  std::string_view rest() const {
    return {reinterpret_cast<const char*>(data_) + pos_, size_ - std::min(pos_, size_)};
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

std::optional<int64_t> special_id(Reader& in, size_t n_tokens) {
  const uint8_t b = in.byte();
  switch (b % 5) {
    case 0: return std::nullopt;
    case 1: return static_cast<int64_t>(b / 5) % static_cast<int64_t>(n_tokens + 2);  // in range or just past
    case 2: return -static_cast<int64_t>(b);
    case 3: return int64_t{1} << (32 + b % 31);
    default: return static_cast<int64_t>(n_tokens) - 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon::tokenizer;
  Reader in(data, size);
  GgufVocab v;
  const uint8_t flags = in.byte();
  v.model = flags % 8 < 4 ? "gpt2" : flags % 8 < 7 ? "llama" : "bert";
  static const char* const kPre[] = {"qwen2",  "llama-bpe", "gpt-2", "deepseek-v3",
                                     "gpt-4o", "default",   "falcon", "nope"};
  v.pre = kPre[(flags >> 3) % 8];
  const size_t n_tokens = in.byte() % 48;
  for (size_t i = 0; i < n_tokens; ++i) v.tokens.push_back(in.text(6));
  if (flags & 0x40) {
    const size_t n = n_tokens + (in.byte() % 4 == 0 ? 1 : 0);  // sometimes one too many
    for (size_t i = 0; i < n; ++i) v.token_types.push_back(static_cast<int32_t>(in.byte() % 9) - 1);
  }
  if (flags & 0x80) {
    for (size_t i = 0; i < n_tokens; ++i) v.scores.push_back(static_cast<float>(static_cast<int8_t>(in.byte())));
  }
  const size_t n_merges = in.byte() % 24;
  for (size_t i = 0; i < n_merges && n_tokens > 0; ++i) {
    const uint8_t kind = in.byte();
    if (kind % 4 == 0) {
      v.merges.push_back(in.text(8));  // anything
    } else {
      v.merges.push_back(v.tokens[in.byte() % n_tokens] + " " + v.tokens[in.byte() % n_tokens]);
    }
  }
  v.bos_id = special_id(in, n_tokens);
  v.eos_id = special_id(in, n_tokens);
  v.eot_id = special_id(in, n_tokens);
  v.pad_id = special_id(in, n_tokens);
  const uint8_t options = in.byte();
  if (options & 1) v.add_bos = (options & 2) != 0;
  if (options & 4) v.add_eos = (options & 8) != 0;
  if (options & 16) v.add_space_prefix = (options & 32) != 0;

  try {
    const Tokenizer tok = Tokenizer::from_gguf(v, "fuzz");
    gguf_end_of_generation_ids(v);
    std::vector<std::string> samples = {std::string(in.rest()), "", " hello  world\n", "a\xff\xfe b"};
    for (const std::string& t : v.tokens) samples.push_back("x" + t + t + " " + t);
    for (const std::string& sample : samples) {
      for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok.encode(sample, special);
        for (int32_t id : ids)
          if (id < 0 || static_cast<size_t>(id) >= v.tokens.size()) __builtin_trap();
        tok.decode(ids, false);
        tok.decode(ids, true);
        StreamingDecoder stream(tok);
        for (int32_t id : ids) stream.push(id);
        stream.flush();
      }
    }
    const std::vector<int32_t> odd_ids = {0, 1, -1, 1 << 30, 2};
    tok.decode(odd_ids, false);
  } catch (const tachyon::Error&) {
    // Malformed metadata (or an SPM text needing a byte token the vocabulary lacks): reported.
  }
  return 0;
}
