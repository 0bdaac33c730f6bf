// Server-sent events over an httplib chunked response: "data: <json>\n\n" (OpenAI) or
// "event: <name>\ndata: <json>\n\n" (Anthropic, Responses). Once a write fails (the client
// went away) every later call returns false and writes nothing.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

#include "base/json.h"

namespace tachyon::server {

class SseWriter {
 public:
  explicit SseWriter(httplib::DataSink& sink) : sink_(sink) {}

  bool data(const Json& json) { return write("data: " + json.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n"); }
  bool event(std::string_view name, const Json& json) {
    return write(std::string("event: ").append(name).append("\ndata: ") +
                 json.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n");
  }
  bool done() { return write("data: [DONE]\n\n"); }
  bool ok() const { return ok_; }

 private:
  bool write(const std::string& text) {
    if (ok_) ok_ = sink_.write(text.data(), text.size());
    return ok_;
  }
  httplib::DataSink& sink_;
  bool ok_ = true;
};

// The JSON text of a response body (invalid UTF-8 from a model replaced, never thrown).
inline std::string dump_json(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace tachyon::server
