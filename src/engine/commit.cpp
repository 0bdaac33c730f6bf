#include "engine/commit.h"

#include <algorithm>

#include "base/error.h"
#include "engine/hidden_layers.h"
#include "engine/stats_recorder.h"
#include "spec/draft_tree.h"

namespace tachyon::engine {

namespace {

TokenLogprob logprob_of(std::span<const float> logits, int32_t token, int32_t top) {
  const auto lp = sampling::log_softmax(logits);
  TokenLogprob t{token, lp[token], {}};
  if (top > 0) {
    std::vector<int32_t> idx(lp.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    const size_t k = std::min<size_t>(static_cast<size_t>(top), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<long>(k), idx.end(),
                      [&](int32_t x, int32_t y) { return lp[x] > lp[y] || (lp[x] == lp[y] && x < y); });
    for (size_t i = 0; i < k; ++i) t.top.emplace_back(idx[i], lp[idx[i]]);
  }
  return t;
}

}  // namespace

Commit::Totals Commit::commit_step(const StepPlan& plan, const model::Batch& batch, const model::StepOutput& out) {
  size_t logit_row = 0, hidden_row = 0;
  Totals totals;
  for (const auto& c : plan.chunks) {
    ActiveRequest& a = state_.active.at(c.id);
    const auto chunk_index = static_cast<int32_t>(&c - plan.chunks.data());
    totals.computed_prompt_tokens +=
        static_cast<uint64_t>(std::max(0, std::min(c.begin + c.count, a.num_prompt) - c.begin));
    const bool has_hidden = !batch.hidden_rows.empty() && hidden_row < batch.hidden_rows.size() &&
                            batch.row_seq[batch.hidden_rows[hidden_row]] == chunk_index;
    // The rows of this request's drafter's layers (a step may return more: engine/hidden_layers.h).
    std::span<const float> hidden;
    if (has_hidden) {
      const spec::Drafter* drafter = state_.policy.drafter(a.spec);
      hidden = drafter_hidden_rows(drafter->hidden_layers(), batch.hidden_layers,
                                   static_cast<int32_t>(state_.model.config().num_hidden_layers),
                                   out.hidden.data() + hidden_row * static_cast<size_t>(out.hidden_size),
                                   out.hidden_size, c.count, hidden_scratch_);
      hidden_row += static_cast<size_t>(c.count);
    }
    if (a.spec.num_drafts > 0) {
      totals.generated_tokens += verify_drafts(c, a, out, logit_row, hidden);
      logit_row += static_cast<size_t>(c.count);
      continue;
    }
    if (!hidden.empty() && a.pending.finish == FinishReason::None)
      state_.policy.drafter(a.spec)->observe_hidden(c.id, c.begin, hidden, c.count);
    const bool all_rows = a.request.prompt_logprobs && c.begin < a.num_prompt;
    if (all_rows) {  // logprob of each next prompt token
      for (int32_t r = 0; r < c.count; ++r) {
        const int32_t t = c.begin + r;
        if (t + 1 < a.num_prompt)
          a.prompt_logprobs.push_back(logprob_of(out.logits_row(logit_row + r), a.tokens[t + 1], a.request.logprobs));
      }
    }
    state_.scheduler.on_computed(c.id, c.count);
    if (state_.config.prefix_cache && a.prefix_cacheable())
      state_.kv.register_blocks(a.seq, a.tokens, cacheable_tokens(a, c.begin + c.count));
    const size_t rows_used = all_rows ? static_cast<size_t>(c.count) : (c.completes ? 1 : 0);
    if (c.completes && !out.argmax.empty()) {
      emit(c.id, a, out.argmax[logit_row + rows_used - 1]);
      ++totals.generated_tokens;
    } else if (c.completes) {
      const auto logits = out.logits_row(logit_row + rows_used - 1);
      row_.assign(logits.begin(), logits.end());
      if (a.constraint && a.constraint->mask_logits(row_) == 0) {  // constrained decoding
        fail_stuck_grammar(a);
      } else {
        const int32_t token = a.sampler->sample(row_,
                                                {std::span<const int32_t>(a.tokens.data(), a.num_prompt),
                                                 std::span<const int32_t>(a.tokens.data() + a.num_prompt,
                                                                          a.tokens.size() - a.num_prompt)},
                                                a.num_generated());
        if (a.request.logprobs >= 0) a.pending.logprobs.push_back(logprob_of(logits, token, a.request.logprobs));
        emit(c.id, a, token);
        ++totals.generated_tokens;
      }
    }
    logit_row += rows_used;
  }
  return totals;
}

// Verifies the drafted chunk, commits accepted tokens + the bonus token, rolls back the rest
// (KV truncated; nothing copied). Returns the number of tokens emitted.
uint64_t Commit::verify_drafts(const ScheduledChunk& c, ActiveRequest& a, const model::StepOutput& out,
                               size_t logit_row, std::span<const float> hidden) {
  kv::KvCache& kv = state_.kv;
  Scheduler& scheduler = state_.scheduler;
  const int32_t committed = c.begin + 1;  // the last sampled token is committed; drafts follow
  // The drafts are the tail of a.tokens; read before the tail is cut below.
  const auto drafts = std::span<const int32_t>(a.tokens).subspan(static_cast<size_t>(committed));
  const size_t num_drafted = drafts.size();
  const auto prompt = std::span<const int32_t>(a.tokens.data(), a.num_prompt);
  const auto generated = std::span<const int32_t>(a.tokens.data() + a.num_prompt, committed - a.num_prompt);
  const bool tree = !a.spec.tree_parents.empty();
  // A constrained request's rows are masked with its grammar (step_runner asks for its logits).
  TACHYON_CHECK(!a.constraint || out.argmax.empty(), "a constrained request's drafts came back as argmax ids");
  const auto row = [&](size_t i) { return out.logits_row(logit_row + i); };
  const auto result =
      tree ? verify_tree(a, drafts, out, logit_row, prompt, generated)
      : out.argmax.empty()
          ? spec::verify_chain(drafts, row, *a.sampler, prompt, generated, a.constraint.get())
          : spec::verify_chain_greedy(drafts, std::span<const int32_t>(out.argmax).subspan(logit_row, num_drafted + 1));
  // Tree: the accepted branch's K/V move to consecutive positions after the root (one op).
  tree_moves_.clear();
  for (size_t d = 0; d < result.nodes.size(); ++d)
    tree_moves_.emplace_back(c.begin + result.nodes[d], c.begin + static_cast<int32_t>(d) + 1);
  kv.copy_positions(a.seq, tree_moves_);
  a.spec.tree_parents.clear();
  int32_t num_computed = committed + result.num_accepted;
  if (!hidden.empty()) {  // rows of the last committed token and of the accepted drafts are real
    const int32_t valid = 1 + result.num_accepted;
    const size_t h = hidden.size() / static_cast<size_t>(c.count);
    spec::Drafter* drafter = state_.policy.drafter(a.spec);
    if (tree) {  // the accepted nodes' rows, gathered in depth order after the root's
      std::vector<float> branch(hidden.begin(), hidden.begin() + static_cast<long>(h));
      for (int32_t node : result.nodes)
        branch.insert(branch.end(), hidden.begin() + static_cast<long>(node * h),
                      hidden.begin() + static_cast<long>((node + 1) * h));
      drafter->observe_hidden(c.id, c.begin, branch, valid);
    } else {
      drafter->observe_hidden(c.id, c.begin, hidden.first(valid * h), valid);
    }
  }
  a.tokens.resize(static_cast<size_t>(committed));
  a.spec.num_drafts = 0;
  scheduler.rollback(c.id, committed, std::min(num_computed, committed));
  kv.truncate(a.seq, num_computed);
  // A recurrent state that cannot resume exactly here (not expected: the ring holds k + 1
  // rows) is recomputed from the last snapshot rather than continued wrongly.
  if (const int32_t resume = kv.resume_position(a.seq, num_computed); resume < num_computed) {
    scheduler.rollback(c.id, committed, std::min(resume, committed));
    kv.truncate(a.seq, resume);
    num_computed = resume;
  }
  // KV is valid for the accepted drafts: the scheduler counts them as computed once appended.
  uint64_t emitted = 0;
  for (size_t i = 0; i < result.tokens.size() && a.pending.finish == FinishReason::None; ++i) {
    if (a.request.logprobs >= 0)
      a.pending.logprobs.push_back(logprob_of(out.logits_row(logit_row + i), result.tokens[i], a.request.logprobs));
    emit(c.id, a, result.tokens[i]);
    if (static_cast<int32_t>(a.tokens.size()) - 1 < num_computed) scheduler.on_computed(c.id, 1);  // an accepted draft
    ++emitted;
  }
  if (result.grammar_stuck && a.pending.finish == FinishReason::None) fail_stuck_grammar(a);
  if (state_.config.prefix_cache && a.prefix_cacheable())
    kv.register_blocks(a.seq, a.tokens, cacheable_tokens(a, std::min<int32_t>(num_computed, a.tokens.size())));
  const char* gate = state_.policy.record_verification(a.spec, static_cast<int32_t>(num_drafted), result.num_accepted,
                                                       static_cast<int32_t>(emitted), result.nodes);
  a.pending.spec = a.spec.usage;
  if (gate) state_.stats.record_gate(gate);
  state_.stats.record_verification(static_cast<int32_t>(num_drafted), result.num_accepted, tree);
  return emitted;
}

// Verification of a's draft tree (rows logit_row.. hold the root and every node).
spec::VerifyResult Commit::verify_tree(ActiveRequest& a, std::span<const int32_t> drafts, const model::StepOutput& out,
                                       size_t logit_row, std::span<const int32_t> prompt,
                                       std::span<const int32_t> generated) {
  spec::DraftTree tree{{drafts.begin(), drafts.end()}, a.spec.tree_parents};
  if (!out.argmax.empty())
    return spec::verify_tree_greedy(tree,
                                    [&](int32_t node) { return out.argmax[logit_row + static_cast<size_t>(node)]; });
  return spec::verify_tree(
      tree, [&](size_t node) { return out.logits_row(logit_row + node); }, *a.sampler, prompt, generated,
      a.constraint.get());
}

int32_t Commit::cacheable_tokens(const ActiveRequest& a, int32_t computed) const {
  return state_.model.has_decode_weights() ? std::min(computed, a.num_prompt) : computed;
}

void Commit::fail_stuck_grammar(ActiveRequest& a) {
  a.pending.finish = FinishReason::Error;
  a.pending.error = "constrained decoding: no token of the vocabulary continues the grammar";
}

// Appends a sampled token; decides whether the request is finished.
void Commit::emit(RequestId id, ActiveRequest& a, int32_t token) {
  a.tokens.push_back(token);
  a.pending.tokens.push_back(token);
  state_.scheduler.on_token_appended(id);
  state_.stats.record_token(a);
  const auto& stops = a.request.stop_token_ids;
  if (a.constraint) a.constraint->accept(token);  // the mask allowed it
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) a.pending.finish = FinishReason::Stop;
  else if (a.constraint && a.constraint->is_terminal()) a.pending.finish = FinishReason::Stop;
  else if (a.num_generated() >= a.request.max_tokens) a.pending.finish = FinishReason::Length;
}

void trim_drafts(LoopState& state, RequestId id, ActiveRequest& a, int32_t n) {
  a.tokens.resize(a.tokens.size() - static_cast<size_t>(n));
  a.spec.num_drafts -= n;
  a.spec.tree_parents.resize(a.spec.tree_parents.empty() ? 0 : static_cast<size_t>(a.spec.num_drafts));
  state.scheduler.rollback(id, static_cast<int32_t>(a.tokens.size()),
                           std::min(state.scheduler.num_computed(id), static_cast<int32_t>(a.tokens.size())));
}

}  // namespace tachyon::engine
