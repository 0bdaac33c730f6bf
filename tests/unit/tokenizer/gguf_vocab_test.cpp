// Tokenizer::from_gguf on hand-made vocabularies: llama.cpp's special-token partition, the
// SentencePiece merge-by-score algorithm, the pre-tokenizer family table, BOS/EOS and the
// end-of-generation set, and hostile metadata failing closed with the key named.
#include <gtest/gtest.h>

#include <cstdio>

#include "base/error.h"
#include "tokenizer/gguf_pre_tokenizers.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tachyon::tokenizer {
namespace {

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kByte = 6;

std::string error_of(const GgufVocab& v) {
  try {
    Tokenizer::from_gguf(v, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Byte-level BPE: the 256 byte-level characters, a few merges, and extra tokens.
GgufVocab byte_level_vocab(std::string pre = "qwen2") {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  const auto& alphabet = unicode::byte_level_alphabet();
  for (int b = 0; b < 256; ++b) v.tokens.push_back(alphabet.byte_to_utf8[b]);
  for (const char* merge : {"h e", "l l", "he ll", "hell o", "Ġ w", "o r"}) {
    const std::string m = merge;
    v.merges.push_back(m);
    v.tokens.push_back(m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1));
  }
  v.token_types.assign(v.tokens.size(), kNormal);
  return v;
}

int32_t add_token(GgufVocab& v, const std::string& text, int32_t type, float score = 0.0f) {
  v.tokens.push_back(text);
  if (!v.token_types.empty() || type != kNormal) v.token_types.resize(v.tokens.size() - 1, kNormal);
  v.token_types.push_back(type);
  if (!v.scores.empty()) v.scores.push_back(score);
  return static_cast<int32_t>(v.tokens.size() - 1);
}

int32_t id(const Tokenizer& t, const std::string& token) {
  auto i = t.token_to_id(token);
  EXPECT_TRUE(i.has_value()) << token;
  return i.value_or(-1);
}

TEST(gguf_bpe, MergesAndByteLevelMapping) {
  const Tokenizer tok = Tokenizer::from_gguf(byte_level_vocab(), "t.gguf");
  EXPECT_EQ(tok.encode("hello world", false),
            (std::vector<int32_t>{id(tok, "hello"), id(tok, "Ġw"), id(tok, "or"), id(tok, "l"), id(tok, "d")}));
  EXPECT_EQ(tok.decode(tok.encode("héllo\n wörld", false)), "héllo\n wörld");
  EXPECT_FALSE(tok.add_bos_token().value());
}

TEST(gguf_bpe, EveryKnownPreTokenizerFamilyBuildsAndRoundTrips) {
  for (const char* pre : {"", "default", "llama3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "deepseek-llm",
                          "deepseek-coder", "deepseek-v3", "youtu", "falcon", "mpt", "starcoder", "refact",
                          "command-r", "gpt-2", "phi-2", "jina-v2-code", "jais", "jais-2", "qwen2", "qwen35",
                          "stablelm2", "olmo", "poro-chat", "glm4", "viking", "tekken", "smollm", "codeshell",
                          "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe", "chameleon", "minerva-7b",
                          "megrez", "gpt-4o", "llama4", "granite-embed-multi-97m", "tiny_aya", "superbpe",
                          "trillion", "bailingmoe", "seed-coder", "hunyuan", "hunyuan-dense", "grok-2", "laguna",
                          "minimax-m2", "minicpm5", "solar-open", "mellum2"}) {
    SCOPED_TRACE(pre);
    const Tokenizer tok = Tokenizer::from_gguf(byte_level_vocab(pre), "t.gguf");
    const std::string text = "Hello world's 12345 ÄÖÜ 日本語 x=1;\r\n\n  \ttabs  ";
    EXPECT_EQ(tok.decode(tok.encode(text, false)), text);
  }
}

TEST(gguf_bpe, FamiliesSplitAsLlamaCppDoes) {
  // Qwen 2 splits digits one by one, Llama 3 in threes; "hello" is one merged word in both.
  const Tokenizer qwen = Tokenizer::from_gguf(byte_level_vocab("qwen2"), "t.gguf");
  const Tokenizer llama3 = Tokenizer::from_gguf(byte_level_vocab("llama-bpe"), "t.gguf");
  GgufVocab with_triple = byte_level_vocab("llama-bpe");
  with_triple.merges.push_back("1 2");
  with_triple.tokens.push_back("12");
  with_triple.merges.push_back("12 3");
  with_triple.tokens.push_back("123");
  with_triple.token_types.resize(with_triple.tokens.size(), kNormal);
  const Tokenizer triple = Tokenizer::from_gguf(with_triple, "t.gguf");
  EXPECT_EQ(triple.encode("1234", false), (std::vector<int32_t>{id(triple, "123"), id(triple, "4")}));
  GgufVocab qwen_triple = with_triple;
  qwen_triple.pre = "qwen2";
  const Tokenizer q = Tokenizer::from_gguf(qwen_triple, "t.gguf");
  EXPECT_EQ(q.encode("1234", false), (std::vector<int32_t>{id(q, "1"), id(q, "2"), id(q, "3"), id(q, "4")}));
  (void)qwen;
  (void)llama3;
}

TEST(gguf_bpe, IgnoreMergesEmitsWholeWordTokensForLlama3) {
  // "ho" is a token no merge builds: Llama 3 (ignore_merges) emits it whole, Qwen 2 merges.
  GgufVocab v = byte_level_vocab("llama-bpe");
  add_token(v, "ho", kNormal);
  const Tokenizer llama3 = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(llama3.encode("ho", false), (std::vector<int32_t>{id(llama3, "ho")}));
  v.pre = "qwen2";
  const Tokenizer qwen = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(qwen.encode("ho", false), (std::vector<int32_t>{id(qwen, "h"), id(qwen, "o")}));
}

TEST(gguf_special, LongestTokenCutsFirstAsInLlamaCpp) {
  // "AB" (control) and "B C" (user-defined, longer): llama.cpp cuts "B C" out first, so
  // "AB C" is "A" + "B C"; Hugging Face's leftmost-longest would take "AB" + " C".
  GgufVocab v = byte_level_vocab();
  const int32_t ab = add_token(v, "AB", kControl);
  const int32_t bc = add_token(v, "B C", kUserDefined);
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(tok.encode("AB C", false), (std::vector<int32_t>{id(tok, "A"), bc}));
  EXPECT_EQ(tok.encode("ABAB", false), (std::vector<int32_t>{ab, ab}));
  EXPECT_EQ(tok.encode("xAByB C", false), (std::vector<int32_t>{id(tok, "x"), ab, id(tok, "y"), bc}));
  // Control tokens are hidden by skip_special_tokens, user-defined ones are text.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{ab, bc}, true), "B C");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{ab, bc}, false), "ABB C");
}

TEST(gguf_special, EndOfTurnMarkersBecomeControlAndEndGeneration) {
  GgufVocab v = byte_level_vocab();
  const int32_t im_end = add_token(v, "<|im_end|>", kNormal);  // mistyped as normal: llama.cpp fixes it
  const int32_t eos = add_token(v, "<|endoftext|>", kControl);
  v.eos_id = eos;
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(tok.encode("a<|im_end|>", false), (std::vector<int32_t>{id(tok, "a"), im_end}));
  EXPECT_TRUE(tok.is_special(im_end));
  EXPECT_EQ(gguf_end_of_generation_ids(v), (std::vector<int32_t>{im_end, eos}));
  EXPECT_EQ(gguf_eot_id(v), std::optional<int32_t>(im_end));
  EXPECT_EQ(tok.eos_id(), std::optional<int32_t>(eos));
}

TEST(gguf_special, HarmonyEndClosesAMessageNotTheGeneration) {
  GgufVocab v = byte_level_vocab("gpt-4o");
  const int32_t end = add_token(v, "<|end|>", kControl);
  const int32_t ret = add_token(v, "<|return|>", kControl);
  const int32_t call = add_token(v, "<|call|>", kControl);
  const int32_t channel = add_token(v, "<|channel|>", kControl);
  const auto eog = gguf_end_of_generation_ids(v);
  EXPECT_EQ(eog, (std::vector<int32_t>{ret, call}));
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  // Rendered as text (user-defined) like llama.cpp, though still cut out of the input.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{end, channel}, true), "<|end|><|channel|>");
}

TEST(gguf_special, BosAndEosAddedWhenTheFileSaysSo) {
  GgufVocab v = byte_level_vocab();
  const int32_t bos = add_token(v, "<s>", kControl);
  const int32_t eos = add_token(v, "</s>", kControl);
  v.bos_id = bos;
  v.eos_id = eos;
  v.add_bos = true;
  v.add_eos = true;
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(tok.encode("a", true), (std::vector<int32_t>{bos, id(tok, "a"), eos}));
  EXPECT_EQ(tok.encode("a", false), (std::vector<int32_t>{id(tok, "a")}));
  EXPECT_EQ(tok.decode(tok.encode("a", true), true), "a");
}

// SentencePiece: <unk> <s> </s>, 256 byte tokens, then pieces with scores.
GgufVocab spm_vocab() {
  GgufVocab v;
  v.model = "llama";
  v.scores = {0, 0, 0};
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, kControl, kControl};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add_token(v, name, kByte);
  }
  for (const auto& [piece, score] : std::vector<std::pair<std::string, float>>{
           {"▁", -1}, {"h", -10}, {"e", -10}, {"l", -10}, {"o", -10}, {"i", -10}, {"▁h", -5}, {"el", -2},
           {"ll", -3}, {"lo", -4}, {"ell", -6}, {"▁hi", -7}})
    add_token(v, piece, kNormal, score);
  return v;
}

TEST(gguf_spm, MergesTheBestScoringPairFirst) {
  const Tokenizer tok = Tokenizer::from_gguf(spm_vocab(), "t.gguf");
  // ▁ h e l l o: "el" (-2) first, then "lo" (-4) (the queued "ll" is stale), then "▁h" (-5);
  // the "ell" pair is stale by then.
  EXPECT_EQ(tok.encode("hello", false), (std::vector<int32_t>{id(tok, "▁h"), id(tok, "el"), id(tok, "lo")}));
  EXPECT_EQ(tok.decode(tok.encode("hello", false)), "hello");
}

TEST(gguf_spm, ByteFallbackSpacePrefixAfterSpecialsAndBos) {
  const Tokenizer tok = Tokenizer::from_gguf(spm_vocab(), "t.gguf");
  // é is no piece: its UTF-8 bytes.
  EXPECT_EQ(tok.encode("hé", false), (std::vector<int32_t>{id(tok, "▁h"), id(tok, "<0xC3>"), id(tok, "<0xA9>")}));
  // A space is put before the first piece and before every piece after a special token.
  EXPECT_EQ(tok.encode("hi</s>hi", false), (std::vector<int32_t>{id(tok, "▁hi"), 2, id(tok, "▁hi")}));
  // SentencePiece files add BOS unless add_bos_token says otherwise.
  EXPECT_EQ(tok.encode("hi", true), (std::vector<int32_t>{1, id(tok, "▁hi")}));
  EXPECT_EQ(tok.decode(tok.encode("hé hi", true), true), "hé hi");

  GgufVocab no_prefix = spm_vocab();
  no_prefix.add_space_prefix = false;
  no_prefix.add_bos = false;
  const Tokenizer bare = Tokenizer::from_gguf(no_prefix, "t.gguf");
  EXPECT_EQ(bare.encode("hi", true), (std::vector<int32_t>{id(bare, "h"), id(bare, "i")}));
  EXPECT_EQ(bare.encode(" hi", false), (std::vector<int32_t>{id(bare, "▁hi")}));
  EXPECT_EQ(bare.decode(bare.encode(" hé", false)), " hé");
}

TEST(gguf_spm, ByteWithoutTokenBecomesUnknown) {
  // Without <0xXX> pieces a character that is no piece becomes <unk> (id 0 by default).
  GgufVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "h", "i", "\xE2\x96\x81h"};
  v.scores = {0, 0, 0, -1, -5, -5, -2};
  v.token_types = {2, kControl, kControl, kNormal, kNormal, kNormal, kNormal};
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(tok.encode("hé", false), (std::vector<int32_t>{6, 0, 0}));
}

TEST(gguf_hostile, MetadataFailsClosedNamingTheKey) {
  auto expect_error = [](const GgufVocab& v, const std::string& needle) {
    const std::string e = error_of(v);
    EXPECT_NE(e.find(needle), std::string::npos) << e;
    EXPECT_NE(e.find("bad.gguf"), std::string::npos) << e;
  };
  GgufVocab v = byte_level_vocab();
  v.tokens.clear();
  v.token_types.clear();
  expect_error(v, "tokenizer.ggml.tokens is empty");

  v = byte_level_vocab();
  v.merges.push_back("nope missing");
  expect_error(v, "tokenizer.ggml.merges[6]");
  v = byte_level_vocab();
  v.merges.push_back("nospace");
  expect_error(v, "tokenizer.ggml.merges[6]");
  v = byte_level_vocab();
  v.merges.clear();
  expect_error(v, "tokenizer.ggml.merges");

  v = byte_level_vocab();
  v.bos_id = int64_t{1} << 40;
  expect_error(v, "tokenizer.ggml.bos_token_id = 1099511627776");
  v = byte_level_vocab();
  v.eos_id = -1;
  expect_error(v, "tokenizer.ggml.eos_token_id = -1");
  v = byte_level_vocab();
  v.pad_id = static_cast<int64_t>(v.tokens.size());
  expect_error(v, "tokenizer.ggml.padding_token_id");
  v = byte_level_vocab();
  v.add_bos = true;
  expect_error(v, "add_bos_token is true but there is no bos_token_id");

  v = byte_level_vocab();
  v.token_types.pop_back();
  expect_error(v, "tokenizer.ggml.token_type has");
  v = spm_vocab();
  v.scores.push_back(1.0f);
  expect_error(v, "tokenizer.ggml.scores has");
  v = byte_level_vocab();
  v.tokens[5] = v.tokens[4];
  expect_error(v, "tokenizer.ggml.tokens[5] repeats token 4");

  v = byte_level_vocab("mystery-family");
  expect_error(v, "tokenizer.ggml.pre 'mystery-family'");
  v = byte_level_vocab("kimi-k2");
  expect_error(v, "'kimi-k2'");
  v = byte_level_vocab();
  v.model = "bert";
  expect_error(v, "tokenizer.ggml.model 'bert'");

  v = byte_level_vocab();
  add_token(v, "\xff\xfe", kControl);
  expect_error(v, "not valid UTF-8");
}

TEST(gguf_hostile, OddButHarmlessValuesAreAccepted) {
  // Unknown token-type numbers are "undefined" (not special); empty texts get llama.cpp's
  // placeholder name; an SPM vocabulary without scores merges by position only.
  GgufVocab v = byte_level_vocab();
  add_token(v, "", kNormal);
  add_token(v, "<x>", 99);
  const Tokenizer tok = Tokenizer::from_gguf(v, "t.gguf");
  EXPECT_EQ(tok.id_to_token(static_cast<int32_t>(v.tokens.size() - 2)),
            "[EMPTY_" + std::to_string(v.tokens.size() - 2) + "]");
  EXPECT_EQ(tok.encode("<x>", false).size(), 3u);

  GgufVocab s = spm_vocab();
  s.scores.clear();
  const Tokenizer spm = Tokenizer::from_gguf(s, "t.gguf");
  EXPECT_EQ(spm.decode(spm.encode("hello", false)), "hello");
}

}  // namespace
}  // namespace tachyon::tokenizer
