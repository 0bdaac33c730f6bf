#include "spec/verify.h"

#include <optional>

namespace tachyon::spec {

bool exact_accept(const std::vector<sampling::Candidate>& p, int32_t draft, double u) {
  for (const auto& c : p)
    if (c.id == draft) return u < c.p;
  return false;  // outside the truncated support: probability 0
}

VerifyResult verify_chain(std::span<const int32_t> drafts, const LogitsRow& row, sampling::Sampler& sampler,
                          std::span<const int32_t> prompt, std::span<const int32_t> generated,
                          const AcceptRule& accept, sampling::TokenConstraint* grammar) {
  VerifyResult result;
  const auto& params = sampler.params();
  std::optional<sampling::TokenConstraint::Snapshot> grammar_before;
  if (grammar) grammar_before = grammar->snapshot();
  std::vector<int32_t> history(generated.begin(), generated.end());
  std::vector<float> logits;
  for (size_t i = 0; i <= drafts.size(); ++i) {
    const auto raw = row(i);
    logits.assign(raw.begin(), raw.end());
    if (grammar && grammar->mask_logits(logits) == 0) {
      result.grammar_stuck = true;
      break;
    }
    sampling::apply_processors(params, {prompt, history}, logits);
    if (params.greedy()) {
      const int32_t best = sampling::argmax(logits);
      result.tokens.push_back(best);
      if (i == drafts.size() || best != drafts[i]) break;
    } else {
      auto p = sampling::distribution(params, logits);
      if (i == drafts.size()) {
        result.tokens.push_back(sampler.draw(p));
        break;
      }
      if (!accept(p, drafts[i], sampler.uniform())) {
        // Residual distribution: p with the rejected draft removed, renormalised.
        std::erase_if(p, [&](const sampling::Candidate& c) { return c.id == drafts[i]; });
        double total = 0;
        for (const auto& c : p) total += c.p;
        for (auto& c : p) c.p = static_cast<float>(c.p / total);
        result.tokens.push_back(p.empty() ? drafts[i] : sampler.draw(p));
        break;
      }
      result.tokens.push_back(drafts[i]);
    }
    ++result.num_accepted;
    history.push_back(drafts[i]);
    if (grammar) grammar->accept(drafts[i]);  // allowed: the masked row chose it
  }
  if (grammar) grammar->restore(*grammar_before);
  return result;
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
