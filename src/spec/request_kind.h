// The kind of text a request asks for, from cheap features of its admission: whether a grammar
// constrains it, how much its prompt repeats itself, and whether its prompt's bytes look like code
// or like prose. Drafters do not win everywhere alike (prompt lookup wins on text that repeats
// itself, a draft model or DFlash on novel code), so the drafter choice (spec/drafter_choice.h)
// keeps its measurements per kind.
//
//   const RequestKind kind = classify_request(prompt, constrained, vocabulary);  // vocabulary may be null
//   kind_name(kind);  // "code_repetitive"
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace tachyon::sampling {
class TokenVocabulary;
}

namespace tachyon::spec {

// Text: the prompt's bytes were not known (no token vocabulary), so code and prose are one kind.
enum class RequestKind : uint8_t {
  Constrained,
  CodeRepetitive,
  CodeNovel,
  ProseRepetitive,
  ProseNovel,
  TextRepetitive,
  TextNovel,
};
inline constexpr int32_t kNumRequestKinds = 7;

const char* kind_name(RequestKind kind);

// 3-gram repetition (spec/ngram.h trigram_repetition) at or above this: the repetitive bucket.
// The bench prompts: code editing 0.51, an agent loop 0.83, a short completion or question 0.
inline constexpr double kRepetitiveFrom = 0.1;
// Share of code-marking bytes ({}()[];=<>_#, indentation) at or above this: code-like. Measured
// on bench/spec/prompts/*.txt: code completion 0.119, code editing 0.130; prose 0.0, a JSON
// answer 0.036, a tool call 0.066, an agent loop 0.063 (chat-template markers count too).
inline constexpr double kCodeFrom = 0.09;

// The share of code-marking bytes in `text`: brackets, operators, underscores and line indentation.
double code_byte_share(std::string_view text);

// A request's kind. vocabulary: the token bytes (null: code and prose are not told apart).
RequestKind classify_request(std::span<const int32_t> prompt, bool constrained,
                             const sampling::TokenVocabulary* vocabulary);

}  // namespace tachyon::spec
