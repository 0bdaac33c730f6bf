// Verification of a drafted chain against the target's logits from one forward over
// [last committed token, d1, ..., dm]: row i holds the target's logits after d1..di.
//
// Temperature 0: accept while argmax(row i) == d(i+1); the first mismatch's argmax (or, when
// all m are accepted, row m's argmax) is the bonus token. Output is identical to plain
// greedy decoding.
// Temperature > 0: position-keyed draws (sampling/sampler.h). Row i decides generated token
// t0 + i, where t0 = generated.size(); the target's own draw there (Sampler::choose: the
// processed row's inverse CDF at uniform_at(t0 + i)) is always what is emitted, and the draft
// is accepted iff it equals that draw. For a drafted point mass d (every drafter's proposal:
// greedy chains, lookups) the draft is accepted with probability p(d), as rejection sampling
// (Leviathan et al. 2023) accepts it, and on a miss the draw is a sample of p without d, its
// residual; but unlike a draw from a sequential stream, the emitted tokens are exactly plain
// sampling's for that seed, whatever was drafted, batched or overlapped.
// Under a grammar (constrained requests, sampling/token_mask.h): row i is masked with the
// grammar's state after the tokens committed so far and d1..di, before anything else, exactly
// as constrained decoding without speculation masks each step's row. Greedy then picks the
// masked argmax, and sampling draws from the masked, renormalised target distribution; a
// drafter's proposal is one-hot on a token, which the mask leaves alone where the grammar
// allows it and which the grammar's p(d) = 0 rejects where it does not (grammar_drafts.h cuts
// such drafts before they are verified). So the output is constrained decoding's, token for
// token at every temperature.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/token_mask.h"

namespace tachyon::spec {

struct VerifyResult {
  std::vector<int32_t> tokens;  // accepted drafts then the bonus/correction token (1..m+1 tokens)
  int32_t num_accepted = 0;     // drafts accepted
  std::vector<int32_t> nodes;   // draft trees: the accepted nodes (spec/draft_tree.h), in depth order
  // Under a grammar: the grammar allows no token at all after `tokens` (then no bonus token
  // follows the accepted drafts; constrained decoding without speculation fails there too).
  bool grammar_stuck = false;
};

// `row(i)` returns the raw logits of row i (i = 0..drafts.size()); rows are copied before the
// request's processors (penalties see the accepted drafts as generated history).
using LogitsRow = std::function<std::span<const float>(size_t)>;

// `grammar` (null: none) is the request's constraint in its state after `generated`; it is
// walked along the accepted drafts and restored to that state before returning.
VerifyResult verify_chain(std::span<const int32_t> drafts, const LogitsRow& row, const sampling::Sampler& sampler,
                          std::span<const int32_t> prompt, std::span<const int32_t> generated,
                          sampling::TokenConstraint* grammar = nullptr);

// What both verifications walk (a chain is a tree of one path): from row 0, the token plain
// decoding emits at row i, then `next(i, token)`: the row that continues the accepted path (-1:
// the token is the bonus or correction). `tree`: the rows are nodes, recorded in `nodes`.
using NextRow = std::function<int32_t(int32_t, int32_t)>;
VerifyResult verify_walk(const NextRow& next, bool tree, const LogitsRow& row, const sampling::Sampler& sampler,
                         std::span<const int32_t> prompt, std::span<const int32_t> generated,
                         sampling::TokenConstraint* grammar);

// The same for plain greedy requests (SamplingParams::plain_greedy) when the step returned
// only each row's argmax (model::StepOutputs::argmax): `argmax` holds drafts.size() + 1 ids.
VerifyResult verify_chain_greedy(std::span<const int32_t> drafts, std::span<const int32_t> argmax);

}  // namespace tachyon::spec
