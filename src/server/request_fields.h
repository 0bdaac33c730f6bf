// Typed readers over a parsed request body. Each fails with ApiError (400) naming the field
// by its path ("messages[2].content") and saying what was expected. A field that is absent
// or JSON null counts as absent.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/request.h"

namespace tachyon::server {

// Parses the body; malformed JSON, a non-object top level, nesting deeper than kMaxJsonDepth
// or an array of more than kMaxJsonArrayItems items (room for a 256k-token prompt given as
// token ids) is a 400 naming the limit. The body's size is bounded before this (413, --max-body-bytes).
inline constexpr size_t kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonArrayItems = size_t{1} << 18;
OrderedJson parse_body(std::string_view body);
// Deepest [ / { nesting of JSON text (strings skipped); works on malformed text too.
size_t json_nesting_depth(std::string_view text);
// Item count of the longest array in JSON text (strings skipped); works on malformed text too.
size_t json_longest_array(std::string_view text);

// nullptr when `key` is absent or null.
const OrderedJson* find_field(const OrderedJson& obj, std::string_view key);

// Throws for the first key of `obj` not in `known` ("Unrecognized request argument supplied: x").
void reject_unknown_fields(const OrderedJson& obj, std::initializer_list<std::string_view> known,
                           const std::string& path = "");

std::optional<std::string> read_string(const OrderedJson& obj, std::string_view key, const std::string& path = "");
std::string require_string(const OrderedJson& obj, std::string_view key, const std::string& path = "");
std::optional<bool> read_bool(const OrderedJson& obj, std::string_view key, const std::string& path = "");
// Numbers must lie in [lo, hi]; integers must be integral (5 or 5.0, not 5.5).
std::optional<double> read_number(const OrderedJson& obj, std::string_view key, double lo, double hi,
                                  const std::string& path = "");
std::optional<int64_t> read_int(const OrderedJson& obj, std::string_view key, int64_t lo, int64_t hi,
                                const std::string& path = "");
// (path is a string_view: a reference returned from a call with a temporary std::string argument
// reads as dangling to GCC 13's -Wdangling-reference.)
const OrderedJson& require_array(const OrderedJson& obj, std::string_view key, std::string_view path = "");
const OrderedJson* read_object(const OrderedJson& obj, std::string_view key, const std::string& path = "");

// "a" + "b" -> "a.b"; "" + "b" -> "b".
std::string field_path(const std::string& path, std::string_view key);
std::string index_path(const std::string& path, size_t index);

// Sampling fields shared by the OpenAI endpoints (temperature, top_p, top_k, min_p, seed,
// presence/frequency/repetition penalties, logit_bias) of `body` (found at `path`, e.g.
// Ollama's "options") into `out.sampling`, noting in `out.sampling_given` the fields that
// have model defaults.
void read_openai_sampling(const OrderedJson& body, ParsedRequest& out, const std::string& path = "");
// Tool-call arguments as templates read them: a JSON object when the text is one (templates
// write `arguments | tojson`, as vLLM and transformers pass them), else the text itself.
OrderedJson template_arguments(const std::string& arguments);
// The "speculative" extension object (see ParsedRequest).
// tachyon extension: "pflash": "off" | "auto" | "always" (ParsedRequest::pflash).
void read_pflash(const OrderedJson& body, ParsedRequest& out);
void read_speculative(const OrderedJson& body, ParsedRequest& out);
// "stop" / "stop_sequences": a string or a list of non-empty strings.
std::vector<std::string> read_stop(const OrderedJson& body, std::string_view key);
// OpenAI tool definitions ([{"type": "function", "function": {"name", ...}}]), checked.
OrderedJson read_openai_tools(const OrderedJson& body);
// tool_choice required / named: the request must declare tools, and the named one among them.
void check_forced_tool_choice(const ParsedRequest& request);

}  // namespace tachyon::server
