// The pushdown automaton that runs a Cfg (cfg.h) byte by byte, as a lazily built DFA.
//
// A stack is a chain of grammar positions (the element to match next, then where each
// enclosing rule resumes); stacks are interned in a tree, so one is a uint32. A
// configuration is the set of stacks whose top is a byte element (every way the grammar can
// continue; several when it is ambiguous) plus whether the text so far is a complete match;
// configurations are interned too, so the whole matcher state is one uint32 and a byte step
// is a memoized table lookup after its first computation. A rule reference whose next
// element ends its alternative does not push (tail calls), so repetition loops keep the
// stack flat; nesting grows it up to kMaxStackDepth, beyond which the path is dropped.
//
//   CfgRuntime rt(cfg);
//   uint32_t s = rt.initial();
//   for (uint8_t b : text) if (!(s = rt.step(s, b))) break;   // 0: rejected
//   rt.is_complete(s);
//
// Not thread-safe (the tables grow under const-looking calls). for_this_thread() shares one
// runtime per grammar among the matchers a thread creates (the engine's loop thread: every
// request with the same schema), so its tables and token masks are built once, not per
// request; use such matchers on the thread that created them. Memory is bounded: past
// kMaxConfigs configurations or kMaxStacks stacks, steps that would need a new one fail
// (overflowed() says so) rather than grow further, and for_this_thread() starts a fresh
// runtime once one has grown past kRetireConfigs.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sampling/cfg.h"

namespace tachyon::sampling {

class CfgRuntime {
 public:
  static constexpr uint32_t kDead = 0;
  static constexpr uint32_t kMaxStackDepth = 1024;
  static constexpr size_t kMaxStacks = size_t{1} << 22;
  static constexpr size_t kMaxConfigs = size_t{1} << 21;
  static constexpr size_t kMaxLeaves = 65536;  // stacks alive at once (ambiguity bound)
  // Configurations whose transitions are a dense 256-entry table (1 KiB each; a mask's trie
  // walk looks one up per node); later ones use a hash map.
  static constexpr size_t kMaxDenseTables = 4096;

  static constexpr size_t kRetireConfigs = 200'000;

  explicit CfgRuntime(std::shared_ptr<const Cfg> cfg);
  // The runtime this thread shares for `cfg` (kept for the 32 grammars it used last).
  static std::shared_ptr<CfgRuntime> for_this_thread(const std::shared_ptr<const Cfg>& cfg);

  // Token masks by configuration, for one vocabulary (token_mask.h): null when not cached.
  // At most kMaxMasks; cleared when full.
  static constexpr size_t kMaxMasks = 512;
  // Shared pointers: a mask stays valid for whoever holds it when the cache is cleared.
  using Mask = std::shared_ptr<const std::vector<uint64_t>>;
  Mask cached_mask(uint32_t config, const void* vocabulary) const;
  Mask store_mask(uint32_t config, const void* vocabulary, std::vector<uint64_t> mask);

  uint32_t initial() const { return initial_; }
  uint32_t step(uint32_t config, uint8_t byte);
  bool is_complete(uint32_t config) const { return configs_[config].complete; }
  // Complete, and no byte may follow.
  bool is_terminal(uint32_t config) const { return configs_[config].complete && configs_[config].num_leaves == 0; }
  // Every plain JSON-string byte string (grammar.h is_plain_string_content) is accepted from
  // `config` and leads back to it: token masks copy a precomputed bitset for those tokens.
  bool absorbs_plain_string(uint32_t config);
  bool overflowed() const { return overflowed_; }
  size_t num_configs() const { return configs_.size(); }

 private:
  struct Stack {
    uint32_t pos;     // element index
    uint32_t parent;  // kNoParent: the root
    uint32_t depth;
  };
  struct Config {
    uint32_t leaves_begin = 0, num_leaves = 0;  // into leaves_
    bool complete = false;
    int8_t plain = -1;  // absorbs_plain_string: -1 unknown, 0 no, 1 yes
  };
  static constexpr uint32_t kNoParent = UINT32_MAX;

  uint32_t intern_stack(uint32_t pos, uint32_t parent);
  void expand(uint32_t stack, std::vector<uint32_t>& leaves, bool& complete);
  uint32_t intern_config(std::vector<uint32_t>& leaves, bool complete);

  std::shared_ptr<const Cfg> cfg_;
  std::vector<Stack> stacks_;
  std::unordered_map<uint64_t, uint32_t> stack_ids_;
  std::vector<Config> configs_;
  std::vector<uint32_t> leaves_;
  std::unordered_map<std::string, uint32_t> config_ids_;
  std::unordered_map<uint64_t, uint32_t> transitions_;  // config << 8 | byte -> config (no dense table)
  static constexpr uint32_t kUnknown = UINT32_MAX;
  std::vector<uint32_t> dense_of_;                      // per config: index into dense_, or kUnknown
  std::vector<std::array<uint32_t, 256>> dense_;        // config's transitions; kUnknown: not computed
  uint32_t visit_mark_ = 0;               // stacks expanded in the current step carry this stamp
  std::vector<uint32_t> visit_stamp_;
  uint32_t initial_ = kDead;
  bool overflowed_ = false;
  const void* mask_vocabulary_ = nullptr;
  std::unordered_map<uint32_t, Mask> masks_;
};

}  // namespace tachyon::sampling
