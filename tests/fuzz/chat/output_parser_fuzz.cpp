// Fuzz target for one output parser family (TACHYON_PARSER_FAMILY, set per target in
// CMakeLists.txt). The input is generated text, fed once whole and once in pieces whose
// sizes come from the input itself; the two results must agree exactly (the streaming
// contract), and nothing may crash or throw.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chat/parsers/output_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tachyon::chat;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool starts_in_reasoning : {false, true}) {
    ParserOptions options;
    options.family = parser_family_from_name(TACHYON_PARSER_FAMILY);
    options.reasoning = options.family != ParserFamily::kHarmony;
    options.starts_in_reasoning = starts_in_reasoning;
    ParsedMessage whole = parse_output(options, text);
    auto parser = make_output_parser(options);
    ParseDelta streamed;
    size_t pos = 0, k = 0;
    while (pos < text.size()) {
      size_t n = 1 + static_cast<uint8_t>(text[k++ % text.size()]) % 7;
      n = std::min(n, text.size() - pos);
      streamed.append(parser->feed(text.substr(pos, n)));
      pos += n;
    }
    streamed.append(parser->finish());
    bool same = streamed.content == whole.content && streamed.reasoning_content == whole.reasoning_content &&
                streamed.tool_calls.size() == whole.tool_calls.size();
    for (size_t i = 0; same && i < whole.tool_calls.size(); ++i)
      same = streamed.tool_calls[i].name == whole.tool_calls[i].name &&
             streamed.tool_calls[i].arguments == whole.tool_calls[i].arguments;
    if (!same) std::abort();
  }
  return 0;
}
