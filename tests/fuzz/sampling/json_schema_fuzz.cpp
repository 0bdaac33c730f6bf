// Fuzz target for the JSON Schema compiler (sampling/json_schema_grammar.h) and the grammar
// engine behind it. For any input that parses as JSON:
//   - compiling either succeeds or throws tachyon::Error whose message names a JSON Schema
//     keyword or the schema's location (never another exception, never a crash);
//   - what compiles is valid GBNF (the compiler never emits a grammar the parser refuses,
//     except one that is left-recursive through a $ref cycle, which is refused by name);
//   - the matcher runs over the input's own bytes and over the schema's "examples" without
//     crashing, a terminal state accepts no byte, and a state that absorbs plain string
//     bytes returns to itself on one.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "sampling/cfg.h"
#include "sampling/cfg_runtime.h"
#include "sampling/json_schema_grammar.h"

namespace {

using namespace tachyon::sampling;

[[noreturn]] void fail(const char* what, std::string_view input, std::string_view detail) {
  std::fprintf(stderr, "json_schema_fuzz: %s (%.*s); input: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data(), static_cast<int>(std::min<size_t>(input.size(), 400)), input.data());
  std::abort();
}

void run_text(CfgRuntime& rt, std::string_view text, std::string_view input) {
  uint32_t s = rt.initial();
  for (char c : text) {
    if (rt.is_terminal(s) && rt.step(s, static_cast<uint8_t>(c)) != CfgRuntime::kDead)
      fail("a terminal state accepted a byte", input, text);
    if (rt.absorbs_plain_string(s) && rt.step(s, 'a') != s) fail("a plain-string state moved on 'a'", input, text);
    s = rt.step(s, static_cast<uint8_t>(c));
    if (s == CfgRuntime::kDead) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(input);
  } catch (const std::exception&) {
    return 0;
  }
  std::string gbnf;
  try {
    gbnf = json_schema_to_gbnf(schema);
  } catch (const tachyon::Error& e) {
    const std::string_view msg = e.what();
    if (msg.find("JSON Schema") == std::string_view::npos && msg.find("integer range") == std::string_view::npos)
      fail("a refusal that names no keyword", input, msg);
    return 0;
  } catch (const std::exception& e) {
    fail("an exception other than tachyon::Error", input, e.what());
  }
  std::shared_ptr<const Cfg> cfg;
  try {
    cfg = Cfg::parse_gbnf(gbnf);
  } catch (const tachyon::Error& e) {
    if (std::string_view(e.what()).find("left-recursive") == std::string_view::npos)
      fail("the compiler emitted GBNF the parser refuses", input, std::string(e.what()) + "\n" + gbnf);
    return 0;
  }
  CfgRuntime rt(cfg);
  run_text(rt, input, input);
  if (schema.is_object() && schema.contains("examples") && schema["examples"].is_array())
    for (const auto& example : schema["examples"]) run_text(rt, example.dump(), input);
  return 0;
}
