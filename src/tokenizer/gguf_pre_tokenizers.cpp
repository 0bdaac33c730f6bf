#include "tokenizer/gguf_pre_tokenizers.h"

#include <algorithm>
#include <array>

#include "base/error.h"

namespace tachyon::tokenizer {

namespace {

// Regexes shared by several families. Hugging Face writes the contractions as
// (?i:'s|'t|...); the case-insensitive group is spelled out ('[sS]...) the way llama.cpp
// does, which matches the same strings.
constexpr const char* kContractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// GPT-2's own split (tiktoken r50k): contractions, letters, digits, other symbols, each
// with one optional leading space; whitespace not followed by a non-space.
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

std::string llama3_like(const char* digits) {
  // cl100k-style (Llama 3, Qwen 2): one non-letter may lead a run of letters, digit groups
  // of `digits`, symbols absorb trailing newlines, newline runs keep leading spaces.
  return std::string(kContractions) + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" + digits +
         "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
}

// o200k-style (GPT-4o): words split at case changes (upper* lower+ | upper+ lower*) with a
// trailing contraction. `\p{Lu}...` classes are written as letter-and-not-[a-z] lookaheads
// as llama.cpp does; PCRE2 gives both the same meaning.
std::string gpt4o_like(const char* letter_class) {
  const std::string not_lower = std::string("((?=[") + letter_class + "])([^a-z]))";
  const std::string not_upper = std::string("((?=[") + letter_class + "])([^A-Z]))";
  const std::string c = std::string("(?:") + kContractions + ")?";
  return "[^\\r\\n\\p{L}\\p{N}]?" + not_lower + "*" + not_upper + "+" + c + "|[^\\r\\n\\p{L}\\p{N}]?" + not_lower +
         "+" + not_upper + "*" + c + "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
}

GgufPreTokenizer family(std::string name, std::vector<std::string> regexes, bool ignore_merges = false) {
  return {std::move(name), std::move(regexes), ignore_merges};
}

GgufPreTokenizer lookup(std::string_view pre) {
  auto is = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), pre) != names.end();
  };
  // llama.cpp's fallback for BPE files without a family: punctuation runs, GPT-2 words,
  // digit runs, then digits in threes.
  if (is({"", "default"}))
    return family("default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"});
  // Llama 3 (tiktoken cl100k with digit triples); whole-word tokens skip merges.
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}))
    return family("llama3", {llama3_like("\\p{N}{1,3}")}, true);
  // DBRX, Smaug: the Llama 3 regex, merges always applied.
  if (is({"dbrx", "smaug-bpe"})) return family(std::string(pre), {llama3_like("\\p{N}{1,3}")});
  // GLM-4: the Llama 3 regex.
  if (is({"glm4", "chatglm-bpe"})) return family("chatglm4", {llama3_like("\\p{N}{1,3}")});
  // Jais 2: Llama 3 with whitespace runs cut in power-of-two lengths.
  if (is({"jais-2"}))
    return family("jais-2", {std::string(kContractions) +
                             "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                             "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|"
                             "\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"});
  // Qwen 2/2.5/3 (and models sharing their tokenizer): the Llama 3 regex with single digits.
  if (is({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open"}))
    return family("qwen2", {llama3_like("\\p{N}")});
  // Qwen 3.5: letters take combining marks (\p{M}) along.
  if (is({"qwen35"}))
    return family("qwen35", {std::string(kContractions) +
                             "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"});
  // Grok 2, Laguna (after cutting at newlines): the Qwen 2 regex.
  if (is({"grok-2"})) return family("grok-2", {llama3_like("\\p{N}")});
  if (is({"laguna"})) return family("laguna", {"[^\\n]+|[\\n]+", llama3_like("\\p{N}")});
  // DeepSeek LLM (v1): newlines, Latin/Greek/Cyrillic... letter runs (code points escaped:
  // some of them change under Unicode normalization), ASCII/full-width punctuation,
  // trailing whitespace, CJK runs, digit runs.
  if (is({"deepseek-llm"}))
    return family(
        "deepseek-llm",
        {"[\r\n]",
         "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
         "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
         "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
         "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
         "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
         "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-"
         "\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
         "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
         "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
         "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
         "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
         "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
         "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
         "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-"
         "\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
         "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"});
  // DeepSeek Coder: newlines, letter runs, punctuation runs, CJK, single digits.
  if (is({"deepseek-coder"}))
    return family("deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"});
  // DeepSeek V3/R1 (and Hunyuan dense, JoyAI): digit triples, CJK/kana runs, then words
  // that keep marks and an ASCII punctuation lead.
  if (is({"deepseek-v3", "hunyuan-dense", "joyai-llm"}))
    return family("deepseek-v3", {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
                                  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
                                  "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"});
  // Youtu: Hangul/CJK punctuation/bopomofo/CJK runs, then o200k-like words.
  if (is({"youtu"}))
    return family("youtu",
                  {"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
                   "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:" +
                       std::string(kContractions) +
                       ")?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:" +
                       kContractions + ")?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
                  true);
  // Falcon: punctuation runs first, GPT-2 words, digit triples.
  if (is({"falcon"})) return family("falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"});
  // StarCoder and relatives: single digits, then GPT-2 words.
  if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"}))
    return family("starcoder", {"\\p{N}", kGpt2});
  // GPT-2 itself and tokenizers trained with its regex.
  if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
          "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion",
          "granite-docling"}))
    return family("gpt-2", {kGpt2});
  // BLOOM, Poro, GPT-3 Finnish: runs of anything but whitespace and sentence punctuation.
  if (is({"poro-chat", "bloom", "gpt3-finnish"})) return family("bloom", {" ?[^(\\s|.,!?…。，、।۔،)]+"});
  // Viking: the BLOOM split, then single digits.
  if (is({"viking"})) return family("viking", {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"});
  // Mistral Tekken: case-split words, single digits; whole-word tokens skip merges.
  if (is({"tekken"}))
    return family("tekken",
                  {"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}]"
                   ")([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
                   "\\s+"},
                  true);
  // Chameleon: sentinel and image tokens, tabs/newlines/space pairs, digits, punctuation,
  // then GPT-2 words.
  if (is({"chameleon"}))
    return family("chameleon", {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
                                "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", kGpt2});
  // GPT-4o / Llama 4 (tiktoken o200k).
  if (is({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) return family("gpt-4o", {gpt4o_like("\\p{L}")});
  // Granite multilingual embeddings: o200k with combining marks kept on their letters.
  if (is({"granite-embed-multi-97m"})) return family("granite-embed-multi", {gpt4o_like("\\p{L}\\p{M}")}, true);
  // Tiny Aya / Cohere 2 MoE: numbers in thousands groups, then o200k-like words.
  if (is({"tiny_aya", "cohere2moe"}))
    return family("tiny_aya",
                  {"\\d{1,3}(?=(?:\\d{3})*\\b)",
                   "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:" +
                       std::string(kContractions) +
                       ")?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:" +
                       kContractions + ")?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"});
  // SuperBPE: digit runs, then cut before every group of three digits from the right.
  if (is({"superbpe"})) return family("superbpe", {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"});
  // Ling / BailingMoE: Qwen 2-like, single newline in the newline rule.
  if (is({"bailingmoe", "bailingmoe2", "llada-moe"}))
    return family("bailingmoe", {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                 "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"});
  // Seed-Coder: symbols do not take newlines along.
  if (is({"seed-coder"}))
    return family("seed-coder", {std::string(kContractions) +
                                 "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
                                 "\\s+(?!\\S)|\\s+"});
  // EXAONE MoE: letter runs may span single spaces between words.
  if (is({"exaone-moe"}))
    return family("exaone-moe", {std::string(kContractions) +
                                 "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| "
                                 "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"});
  // MiniCPM 5: digit triples, then the Llama 3 regex with digit runs; whole words skip merges.
  if (is({"minicpm5"})) return family("minicpm5", {"\\p{N}{1,3}", llama3_like("\\p{N}+")}, true);
  if (is({"kimi-k2", "afmoe", "gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace"}))
    throw Error("tokenizer.ggml.pre '{}': this pre-tokenizer family needs llama.cpp's hand-written splitter or a "
                "non-byte-level BPE, which tachyon does not implement",
                pre);
  throw Error("tokenizer.ggml.pre '{}': unknown pre-tokenizer family (known: default, llama-bpe, qwen2, qwen35, "
              "deepseek-llm, deepseek-coder, deepseek-v3, gpt-2, gpt-4o, starcoder, falcon, tekken, ... as llama.cpp "
              "names them)",
              pre);
}

}  // namespace

GgufPreTokenizer gguf_pre_tokenizer(std::string_view pre) { return lookup(pre); }

}  // namespace tachyon::tokenizer
