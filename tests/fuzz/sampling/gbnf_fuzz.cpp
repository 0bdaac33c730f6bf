// Fuzz target for the GBNF parser and the pushdown matcher (sampling/cfg.h, cfg_runtime.h).
// The input is a grammar, then optionally "\n%%\n" and a text to match:
//   - parsing either succeeds or throws tachyon::Error (never another exception or a crash);
//   - matching the text byte by byte never crashes; the same text fed to a second runtime of
//     the same grammar reaches the same verdicts (configurations are deterministic);
//   - a terminal state accepts no byte; a state that absorbs plain string bytes returns to
//     itself on each printable ASCII byte but '"' and '\'.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/cfg_runtime.h"

namespace {

using namespace tachyon::sampling;

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "gbnf_fuzz: %s; input: %.*s\n", what, static_cast<int>(std::min<size_t>(input.size(), 400)),
               input.data());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find("\n%%\n");
  const std::string_view grammar = input.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? input : input.substr(split + 4);
  std::shared_ptr<const Cfg> cfg;
  try {
    cfg = Cfg::parse_gbnf(grammar);
  } catch (const tachyon::Error&) {
    return 0;
  } catch (const std::exception&) {
    fail("an exception other than tachyon::Error", input);
  }
  CfgRuntime a(cfg), b(cfg);
  uint32_t sa = a.initial(), sb = b.initial();
  for (char c : text.substr(0, 2000)) {
    const auto byte = static_cast<uint8_t>(c);
    if (a.is_terminal(sa) && a.step(sa, byte) != CfgRuntime::kDead) fail("a terminal state accepted a byte", input);
    if (a.absorbs_plain_string(sa))
      for (unsigned x = 0x20; x < 0x7F; ++x)
        if (x != '"' && x != '\\' && a.step(sa, static_cast<uint8_t>(x)) != sa) fail("a plain-string state moved", input);
    sa = a.step(sa, byte);
    sb = b.step(sb, byte);
    if ((sa == CfgRuntime::kDead) != (sb == CfgRuntime::kDead) || a.is_complete(sa) != b.is_complete(sb))
      fail("two runtimes of one grammar disagree", input);
    if (sa == CfgRuntime::kDead) break;
  }
  return 0;
}
