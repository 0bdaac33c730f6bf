#include "spec/merged_drafter.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "base/error.h"
#include "spec/ema.h"

namespace tachyon::spec {

bool member_pays(double gain, int32_t samples, int32_t min_samples, double member_seconds, double step_tokens,
                 double step_seconds) {
  if (samples < min_samples || member_seconds <= 0 || step_seconds <= 0) return true;
  return gain * step_seconds > member_seconds * step_tokens;
}

MergedDrafter::MergedDrafter(std::vector<MergedMember> members) : members_(std::move(members)) {
  if (members_.size() < 2 || members_.size() > static_cast<size_t>(kMaxMergedMembers))
    throw Error("a merged drafter merges 2 to {} drafters, not {}", kMaxMergedMembers, members_.size());
  for (size_t m = 0; m < members_.size(); ++m) {
    TACHYON_CHECK(members_[m].drafter, "merged drafter member {} is null", m);
    if (!members_[m].drafter->wants_hidden()) continue;
    if (hidden_member_ >= 0)
      throw Error("a merged drafter takes at most one drafter that reads the target's hidden states: {} and {} both do",
                  members_[static_cast<size_t>(hidden_member_)].drafter->name(), members_[m].drafter->name());
    hidden_member_ = static_cast<int32_t>(m);
  }
  payoffs_.resize(members_.size() * kNumRequestKinds);
}

MergedDrafter::Payoff& MergedDrafter::payoff(RequestKind kind, size_t member) {
  return payoffs_[static_cast<size_t>(kind) * members_.size() + member];
}

double MergedDrafter::forward_seconds(int32_t nodes) const {
  return forward_costs_ ? forward_costs_->bounded_cost(nodes) : 0;
}

std::vector<int32_t> MergedDrafter::propose(RequestKey request, std::span<const int32_t> tokens, int32_t k) {
  if (auto it = requests_.find(request); it != requests_.end()) it->second.base = 0;  // no tree pending
  for (const MergedMember& m : members_)
    if (auto draft = m.drafter->propose(request, tokens, k); !draft.empty()) return draft;
  return {};
}

void MergedDrafter::record_last_outcome(RequestState& s, std::span<const int32_t> tokens) {
  if (s.base == 0 || tokens.size() <= s.base) return;
  const auto actual = tokens.subspan(s.base);
  record_outcome(s.last, actual, figures_[static_cast<size_t>(s.kind)]);
  const int32_t depth = accepted_depth(s.last, actual);
  for (size_t m = 0; m < members_.size(); ++m) {
    const uint32_t bit = 1u << m;
    if (!(s.ran & bit)) continue;
    Payoff& p = payoff(s.kind, m);
    const size_t c = s.cheap_empty ? 1 : 0;
    ema_update(p.gain[c], depth - accepted_depth(s.last, actual, ~bit) + 1e-9, kEmaWeight);  // +ε: 0 means unmeasured
    ++p.samples[c];
  }
  s.base = 0;
}

DraftTree MergedDrafter::propose_tree(RequestKey request, std::span<const int32_t> tokens, int32_t max_depth,
                                      int32_t max_nodes) {
  using Clock = std::chrono::steady_clock;
  RequestState& s = requests_[request];
  record_last_outcome(s, tokens);
  const MergedFigures& figures = figures_[static_cast<size_t>(s.kind)];
  const bool explore = s.steps++ % kExploreEvery == 0;
  const auto start = Clock::now();
  SourcedTree merged;
  for (size_t m = 0; m < members_.size(); ++m)
    if (!members_[m].costly)
      merge_into(merged, members_[m].drafter->propose_tree(request, tokens, max_depth, max_nodes),
                 static_cast<int32_t>(m));
  s.cheap_empty = merged.tree.size() == 0;
  double drafted = std::chrono::duration<double>(Clock::now() - start).count();  // this step's drafting so far
  // A step's seconds with n nodes: the measured verify forward plus this step's drafting.
  auto step_seconds = [&](int32_t n) {
    const double forward = forward_seconds(n);
    return forward > 0 ? forward + drafted : 0.0;
  };
  // The cheap tree's expected tokens and step seconds, which a costly member's gain must beat.
  std::vector<double> scores = score_nodes(merged, figures);
  const int32_t cheap_nodes = best_node_count(scores, step_seconds);
  std::vector<double> sorted = scores;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double expected = 1 + std::accumulate(sorted.begin(), sorted.begin() + cheap_nodes, 0.0);
  const double seconds = step_seconds(cheap_nodes);
  s.ran = 0;
  for (size_t m = 0; m < members_.size(); ++m) {
    if (!members_[m].costly) continue;
    const uint32_t bit = 1u << m;
    Payoff& p = payoff(s.kind, m);
    const size_t c = s.cheap_empty ? 1 : 0;
    const bool primed = s.primed & bit;
    if (primed && !explore && !member_pays(p.gain[c], p.samples[c], kMinGainSamples, p.seconds, expected, seconds)) {
      ++counters_.skips[m];
      continue;
    }
    const auto t0 = Clock::now();
    const int32_t depth = members_[m].max_depth > 0 ? std::min(max_depth, members_[m].max_depth) : max_depth;
    const DraftTree tree = members_[m].drafter->propose_tree(request, tokens, depth, std::min(max_nodes, 2 * depth));
    const double member_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (primed) ema_update(p.seconds, member_seconds, kEmaWeight);  // a first proposal is the catch-up
    drafted += member_seconds;
    s.primed |= bit;
    s.ran |= bit;
    ++counters_.runs[m];
    merge_into(merged, tree, static_cast<int32_t>(m));
  }
  if (s.ran) scores = score_nodes(merged, figures);
  // Exploring steps verify up to twice the best count (plus one), so the cost of larger trees
  // stays measured without paying for the whole tree every time.
  const int32_t best = best_node_count(scores, step_seconds);
  const int32_t keep = explore ? std::min(static_cast<int32_t>(merged.tree.size()), 2 * best + 1) : best;
  s.last = keep_best(merged, scores, std::min(keep, max_nodes));
  s.base = tokens.size();
  if (s.last.tree.size() > 0) {
    ++counters_.trees;
    const uint32_t sources = s.last.members();
    counters_.multi_source_trees += (sources & (sources - 1)) != 0;
    for (size_t i = 0; i < s.last.tree.size(); ++i)
      for (size_t m = 0; m < members_.size(); ++m) counters_.nodes[m] += (s.last.sources(i) >> m) & 1u;
  }
  return s.last.tree;
}

void MergedDrafter::draft_under(sampling::TokenConstraint* grammar) {
  for (const MergedMember& m : members_) m.drafter->draft_under(grammar);
}

void MergedDrafter::on_finish(RequestKey request, std::span<const int32_t> tokens, int32_t num_prompt) {
  requests_.erase(request);
  for (const MergedMember& m : members_) m.drafter->on_finish(request, tokens, num_prompt);
}

std::vector<int32_t> MergedDrafter::hidden_layers() const {
  return hidden_member_ < 0 ? std::vector<int32_t>{} : members_[static_cast<size_t>(hidden_member_)].drafter->hidden_layers();
}

void MergedDrafter::observe_hidden(RequestKey request, int32_t first_position, std::span<const float> hidden,
                                   int32_t count) {
  if (hidden_member_ >= 0)
    members_[static_cast<size_t>(hidden_member_)].drafter->observe_hidden(request, first_position, hidden, count);
}

void MergedDrafter::begin_request(RequestKey request, RequestKind kind) { requests_[request] = {.kind = kind}; }

std::vector<Drafter*> MergedDrafter::parts() const {
  std::vector<Drafter*> out;
  for (const MergedMember& m : members_) out.push_back(m.drafter);
  return out;
}

}  // namespace tachyon::spec
