// Streams over an httplib chunked response: server-sent events, "data: <json>\n\n" (OpenAI)
// or "event: <name>\ndata: <json>\n\n" (Anthropic, Responses), and NDJSON, one JSON object
// per line (Ollama). Once a write fails (the client went away) every later call returns false
// and writes nothing.
#pragma once

#include <httplib.h>

#include <string>
#include <string_view>

#include "base/json.h"

namespace tachyon::server {

// The JSON text of a response body (invalid UTF-8 from a model replaced, never thrown).
inline std::string dump_json(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

class StreamWriter {
 public:
  explicit StreamWriter(httplib::DataSink& sink) : sink_(sink) {}
  bool ok() const { return ok_; }

 protected:
  bool write(const std::string& text) {
    if (ok_) ok_ = sink_.write(text.data(), text.size());
    return ok_;
  }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

class SseWriter : public StreamWriter {
 public:
  using StreamWriter::StreamWriter;
  bool data(const Json& json) { return write("data: " + dump_json(json) + "\n\n"); }
  bool event(std::string_view name, const Json& json) {
    return write(std::string("event: ").append(name).append("\ndata: ") + dump_json(json) + "\n\n");
  }
  bool done() { return write("data: [DONE]\n\n"); }
};

class NdjsonWriter : public StreamWriter {
 public:
  using StreamWriter::StreamWriter;
  bool line(const Json& json) { return write(dump_json(json) + "\n"); }
};

}  // namespace tachyon::server
