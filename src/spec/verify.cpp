#include "spec/verify.h"

#include <optional>

namespace tachyon::spec {

VerifyResult verify_walk(const NextRow& next, bool tree, const LogitsRow& row, const sampling::Sampler& sampler,
                         std::span<const int32_t> prompt, std::span<const int32_t> generated,
                         sampling::TokenConstraint* grammar) {
  VerifyResult result;
  std::optional<sampling::TokenConstraint::Snapshot> grammar_before;
  if (grammar) grammar_before = grammar->snapshot();
  std::vector<int32_t> history(generated.begin(), generated.end());
  std::vector<float> logits;
  for (int32_t i = 0;;) {
    const auto raw = row(static_cast<size_t>(i));
    logits.assign(raw.begin(), raw.end());
    if (grammar && grammar->mask_logits(logits) == 0) {
      result.grammar_stuck = true;
      break;
    }
    sampling::apply_processors(sampler.params(), {prompt, history}, logits);
    // The token plain decoding would emit at this position (history.size() generated before it).
    const int32_t token = sampler.choose(logits, static_cast<int64_t>(history.size()));
    result.tokens.push_back(token);
    const int32_t following = next(i, token);
    if (following < 0) break;
    if (tree) result.nodes.push_back(following);
    ++result.num_accepted;
    history.push_back(token);
    if (grammar) grammar->accept(token);  // allowed: the masked row chose it
    i = following;
  }
  if (grammar) grammar->restore(*grammar_before);
  return result;
}

VerifyResult verify_chain(std::span<const int32_t> drafts, const LogitsRow& row, const sampling::Sampler& sampler,
                          std::span<const int32_t> prompt, std::span<const int32_t> generated,
                          sampling::TokenConstraint* grammar) {
  const auto next = [&](int32_t i, int32_t token) {
    return static_cast<size_t>(i) < drafts.size() && token == drafts[static_cast<size_t>(i)] ? i + 1 : -1;
  };
  return verify_walk(next, false, row, sampler, prompt, generated, grammar);
}

VerifyResult verify_chain_greedy(std::span<const int32_t> drafts, std::span<const int32_t> argmax) {
  VerifyResult result;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    result.tokens.push_back(argmax[i]);
    if (i == drafts.size() || argmax[i] != drafts[i]) return result;
    ++result.num_accepted;
  }
  return result;
}

}  // namespace tachyon::spec
