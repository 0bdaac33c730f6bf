#include "sampling/cfg_runtime.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace tachyon::sampling {

CfgRuntime::CfgRuntime(std::shared_ptr<const Cfg> cfg) : cfg_(std::move(cfg)) {
  configs_.push_back({});  // kDead: no stacks, not complete
  config_ids_.emplace(std::string(1, '\0'), kDead);
  std::vector<uint32_t> leaves;
  bool complete = false;
  ++visit_mark_;
  for (uint32_t start : cfg_->alternatives[cfg_->root]) expand(intern_stack(start, kNoParent), leaves, complete);
  initial_ = intern_config(leaves, complete);
}

std::shared_ptr<CfgRuntime> CfgRuntime::for_this_thread(const std::shared_ptr<const Cfg>& cfg) {
  // Most recently used first; a grammar's runtime is shared while it is here or in use.
  thread_local std::vector<std::pair<std::shared_ptr<const Cfg>, std::shared_ptr<CfgRuntime>>> recent;
  for (size_t i = 0; i < recent.size(); ++i) {
    if (recent[i].first != cfg) continue;
    auto entry = std::move(recent[i]);
    recent.erase(recent.begin() + static_cast<ptrdiff_t>(i));
    if (entry.second->overflowed() || entry.second->num_configs() > kRetireConfigs) break;  // start afresh
    recent.insert(recent.begin(), entry);
    return entry.second;
  }
  auto runtime = std::make_shared<CfgRuntime>(cfg);
  recent.insert(recent.begin(), {cfg, runtime});
  if (recent.size() > 32) recent.pop_back();
  return runtime;
}

CfgRuntime::Mask CfgRuntime::cached_mask(uint32_t config, const void* vocabulary) const {
  if (vocabulary != mask_vocabulary_) return nullptr;
  auto it = masks_.find(config);
  return it == masks_.end() ? nullptr : it->second;
}

CfgRuntime::Mask CfgRuntime::store_mask(uint32_t config, const void* vocabulary, std::vector<uint64_t> mask) {
  if (vocabulary != mask_vocabulary_ || masks_.size() >= kMaxMasks) {
    masks_.clear();
    mask_vocabulary_ = vocabulary;
  }
  auto shared = std::make_shared<const std::vector<uint64_t>>(std::move(mask));
  masks_.insert_or_assign(config, shared);
  return shared;
}

uint32_t CfgRuntime::intern_stack(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto it = stack_ids_.find(key);
  if (it != stack_ids_.end()) return it->second;
  const uint32_t depth = parent == kNoParent ? 1 : stacks_[parent].depth + 1;
  if (depth > kMaxStackDepth) return kNoParent;
  if (stacks_.size() >= kMaxStacks) {
    overflowed_ = true;
    return kNoParent;
  }
  const auto id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back({pos, parent, depth});
  stack_ids_.emplace(key, id);
  return id;
}

// Follows rule references and rule ends from `stack` down to byte elements.
void CfgRuntime::expand(uint32_t stack, std::vector<uint32_t>& leaves, bool& complete) {
  if (stack == kNoParent) return;
  if (visit_stamp_.size() <= stack) visit_stamp_.resize(stacks_.size() + 1024, 0);
  if (visit_stamp_[stack] == visit_mark_) return;
  visit_stamp_[stack] = visit_mark_;
  const Stack s = stacks_[stack];
  const CfgElement& e = cfg_->elements[s.pos];
  switch (e.kind) {
    case CfgElement::Kind::Bytes:
      leaves.push_back(stack);
      return;
    case CfgElement::Kind::End:
      if (s.parent == kNoParent) complete = true;
      else expand(s.parent, leaves, complete);
      return;
    case CfgElement::Kind::Rule: {
      uint32_t cont = kNoParent;
      const bool tail = cfg_->elements[s.pos + 1].kind == CfgElement::Kind::End;
      if (tail) cont = s.parent;
      else if ((cont = intern_stack(s.pos + 1, s.parent)) == kNoParent) return;  // too deep
      for (uint32_t start : cfg_->alternatives[e.arg]) {
        if (cfg_->elements[start].kind == CfgElement::Kind::End) {  // empty alternative: resume at once
          if (cont == kNoParent) {
            if (tail && s.parent == kNoParent) complete = true;
          } else {
            expand(cont, leaves, complete);
          }
          continue;
        }
        const uint32_t child = intern_stack(start, cont);
        if (child != kNoParent) expand(child, leaves, complete);
      }
      return;
    }
  }
}

uint32_t CfgRuntime::intern_config(std::vector<uint32_t>& leaves, bool complete) {
  std::sort(leaves.begin(), leaves.end());
  leaves.erase(std::unique(leaves.begin(), leaves.end()), leaves.end());
  if (leaves.empty() && !complete) return kDead;
  if (leaves.size() > kMaxLeaves) {
    overflowed_ = true;
    return kDead;
  }
  std::string key(1 + leaves.size() * sizeof(uint32_t), '\0');
  key[0] = complete ? '\1' : '\2';
  // A complete configuration with nothing left to match has no leaves, and an empty vector's data()
  // may be null, which memcpy must never be given (UBSan; found by the sanitizer run of the fuzz replays).
  if (!leaves.empty()) std::memcpy(key.data() + 1, leaves.data(), leaves.size() * sizeof(uint32_t));
  auto it = config_ids_.find(key);
  if (it != config_ids_.end()) return it->second;
  if (configs_.size() >= kMaxConfigs) {
    overflowed_ = true;
    return kDead;
  }
  Config c;
  c.leaves_begin = static_cast<uint32_t>(leaves_.size());
  c.num_leaves = static_cast<uint32_t>(leaves.size());
  c.complete = complete;
  leaves_.insert(leaves_.end(), leaves.begin(), leaves.end());
  const auto id = static_cast<uint32_t>(configs_.size());
  configs_.push_back(c);
  config_ids_.emplace(std::move(key), id);
  return id;
}

uint32_t CfgRuntime::step(uint32_t config, uint8_t byte) {
  if (config == kDead) return kDead;
  if (dense_of_.size() <= config) dense_of_.resize(configs_.size(), kUnknown);
  uint32_t dense = dense_of_[config];
  if (dense != kUnknown) {
    if (const uint32_t next = dense_[dense][byte]; next != kUnknown) return next;
  } else if (dense_.size() < kMaxDenseTables) {
    dense = dense_of_[config] = static_cast<uint32_t>(dense_.size());
    dense_.emplace_back().fill(kUnknown);
  }
  const uint64_t key = (uint64_t{config} << 8) | byte;
  if (dense == kUnknown) {
    auto it = transitions_.find(key);
    if (it != transitions_.end()) return it->second;
  }
  std::vector<uint32_t> next;
  bool complete = false;
  ++visit_mark_;
  const Config c = configs_[config];
  for (uint32_t i = 0; i < c.num_leaves; ++i) {
    const Stack s = stacks_[leaves_[c.leaves_begin + i]];
    if (!byte_set_has(cfg_->byte_sets[cfg_->elements[s.pos].arg], byte)) continue;
    const uint32_t cont = cfg_->elements[s.pos + 1].kind == CfgElement::Kind::End && s.parent != kNoParent
                              ? s.parent
                              : intern_stack(s.pos + 1, s.parent);
    expand(cont, next, complete);
  }
  const uint32_t result = intern_config(next, complete);
  if (overflowed_) return result;  // not remembered: a later step may find room
  if (dense != kUnknown) dense_[dense][byte] = result;
  else transitions_.emplace(key, result);
  return result;
}

bool CfgRuntime::absorbs_plain_string(uint32_t config) {
  if (configs_[config].plain >= 0) return configs_[config].plain == 1;
  auto verdict = [&](bool yes) {
    configs_[config].plain = yes ? 1 : 0;
    return yes;
  };
  if (config == kDead) return verdict(false);
  for (unsigned b = 0x20; b < 0x80; ++b)
    if (b != '"' && b != '\\' && step(config, static_cast<uint8_t>(b)) != config) return verdict(false);
  // Every valid UTF-8 sequence must lead back to `config`: per lead-byte family, follow the
  // (deduplicated) states through each continuation byte range.
  struct Family {
    uint8_t lead_lo, lead_hi, first_lo, first_hi, continuations;
  };
  static constexpr Family kFamilies[] = {
      {0xC2, 0xDF, 0x80, 0xBF, 1}, {0xE0, 0xE0, 0xA0, 0xBF, 2}, {0xE1, 0xEC, 0x80, 0xBF, 2},
      {0xED, 0xED, 0x80, 0x9F, 2}, {0xEE, 0xEF, 0x80, 0xBF, 2}, {0xF0, 0xF0, 0x90, 0xBF, 3},
      {0xF1, 0xF3, 0x80, 0xBF, 3}, {0xF4, 0xF4, 0x80, 0x8F, 3},
  };
  for (const Family& f : kFamilies) {
    std::vector<uint32_t> states;
    for (unsigned b = f.lead_lo; b <= f.lead_hi; ++b) states.push_back(step(config, static_cast<uint8_t>(b)));
    for (int k = 0; k < f.continuations; ++k) {
      std::sort(states.begin(), states.end());
      states.erase(std::unique(states.begin(), states.end()), states.end());
      std::vector<uint32_t> next;
      const unsigned lo = k == 0 ? f.first_lo : 0x80, hi = k == 0 ? f.first_hi : 0xBF;
      for (uint32_t s : states)
        for (unsigned b = lo; b <= hi; ++b) next.push_back(step(s, static_cast<uint8_t>(b)));
      states = std::move(next);
    }
    for (uint32_t s : states)
      if (s != config) return verdict(false);
  }
  return verdict(true);
}

}  // namespace tachyon::sampling
