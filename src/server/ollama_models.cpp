// Ollama's model routes: /api/tags, /api/show, /api/ps, /api/version, /api/pull (into the
// Hugging Face cache, then served), and the ones this server answers with an error that says
// what to do instead (/api/embed, /api/create, /api/copy, /api/delete, /api/push).
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cctype>

#include "server/api_error.h"
#include "server/ollama.h"
#include "server/ollama_request.h"
#include "server/request_fields.h"
#include "server/sse.h"

namespace tachyon::server {

// The Ollama release whose docs/api.md this wire follows; clients gate features (tools,
// think levels) on the version they read here.
static constexpr const char* kOllamaApiVersion = "0.33.0";

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const time_t seconds = static_cast<time_t>(ns / 1'000'000'000);
  struct tm utc {};
  gmtime_r(&seconds, &utc);
  char date[32];
  strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:09d}Z", date, ns % 1'000'000'000);
}

bool ollama_can_think(const ServedModel& model) {
  const std::string& tpl = model.details.chat_template;
  return model.parser.family == chat::ParserFamily::kHarmony || tpl.find("enable_thinking") != std::string::npos ||
         tpl.find("<think>") != std::string::npos;
}

namespace {

std::string parameter_size(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.1f}B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.1f}M", n / 1e6);
  return fmt::format("{:.1f}K", n / 1e3);
}

// config.json's dtype in the spelling Ollama's quantization_level uses ("BF16").
std::string quantization_level(const std::string& dtype) {
  if (dtype == "bfloat16") return "BF16";
  if (dtype == "float16") return "F16";
  if (dtype == "float32") return "F32";
  std::string upper = dtype;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  return upper;
}

// An identity for clients that compare digests: 64 hex digits from FNV-1a over what
// describes the served weights. Not a content hash (hashing gigabytes at start-up would
// delay every start); it changes when the model, its size or the server's start changes.
std::string digest(const ServedModel& model) {
  const std::string key = fmt::format("{}|{}|{}|{}|{}|{}", model.id, model.details.family, model.details.dtype,
                                      model.details.num_parameters, model.details.size_bytes, model.created);
  std::string out;
  for (uint64_t round = 0; round < 4; ++round) {
    uint64_t h = 1469598103934665603ull ^ round;
    for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
    out += fmt::format("{:016x}", h);
  }
  return out;
}

Json details_json(const ServedModel& model) {
  const ModelDetails& d = model.details;
  return {{"parent_model", ""},
          {"format", d.format},
          {"family", d.family},
          {"families", Json::array({d.family})},
          {"parameter_size", parameter_size(d.num_parameters)},
          {"quantization_level", quantization_level(d.dtype)}};
}

std::string modified_at(const ServedModel& model) {
  return ollama_time(std::chrono::system_clock::time_point(std::chrono::seconds(model.created)));
}

// Ollama's `parameters`: one "name value" line per default, names padded to a column.
std::string parameters_text(const SamplingDefaults& d) {
  std::string out;
  auto line = [&out](const char* name, auto value) {
    if (value) out += fmt::format("{:<30} {}\n", name, *value);
  };
  line("temperature", d.temperature);
  line("top_k", d.top_k);
  line("top_p", d.top_p);
  line("min_p", d.min_p);
  line("repeat_penalty", d.repetition_penalty);
  if (!out.empty()) out.pop_back();
  return out;
}

}  // namespace

void handle_ollama_tags(ModelRegistry& models, int64_t started, httplib::Response& res) {
  Json list = Json::array();
  for (const ModelEntry& e : models.entries()) {
    // A model not loaded yet is described from its files, with the server's start as its time.
    std::shared_ptr<const ServedModel> model = models.loaded(e.name);
    if (!model) {
      auto stub = std::make_shared<ServedModel>();
      stub->id = e.name;
      stub->created = started;
      stub->details = models.details(e);
      model = std::move(stub);
    }
    list.push_back({{"name", model->id + ":latest"},   {"model", model->id + ":latest"},
                    {"modified_at", modified_at(*model)}, {"size", model->details.size_bytes},
                    {"digest", digest(*model)},           {"details", details_json(*model)}});
  }
  res.set_content(dump_json({{"models", std::move(list)}}), "application/json");
}

void handle_ollama_ps(const ModelRegistry& models, httplib::Response& res) {
  // A loaded model stays until another needs its memory: Ollama's "never expires" is a date far ahead.
  Json list = Json::array();
  for (const std::string& name : models.loaded_names()) {
    const std::shared_ptr<const ServedModel> model = models.loaded(name);
    if (!model) continue;  // unloaded since the names were read
    list.push_back({{"name", model->id + ":latest"},
                    {"model", model->id + ":latest"},
                    {"size", model->details.size_bytes},
                    {"digest", digest(*model)},
                    {"details", details_json(*model)},
                    {"expires_at", "2318-01-01T00:00:00Z"},
                    {"size_vram", model->details.on_device ? model->details.size_bytes : 0},
                    {"context_length", model->max_context}});
  }
  res.set_content(dump_json({{"models", std::move(list)}}), "application/json");
}

void handle_ollama_version(httplib::Response& res) {
  res.set_content(dump_json({{"version", kOllamaApiVersion}}), "application/json");
}

void handle_ollama_show(ModelRegistry& models, const std::string& body, httplib::Response& res) {
  const OrderedJson request = parse_body(body);
  reject_unknown_fields(request, {"model", "name", "verbose", "system", "template", "options"});
  const ModelRegistry::Lease lease = models.acquire(read_ollama_model_name(request));
  const ServedModel& model = *lease;
  const ModelDetails& d = model.details;
  const std::string parameters = parameters_text(model.sampling_defaults);
  std::string modelfile = fmt::format("# tachyon serves {} from a Hugging Face checkpoint; it has no Modelfile.\n"
                                      "FROM {}\n",
                                      model.id, model.id);
  for (size_t start = 0; start < parameters.size();) {
    const size_t end = std::min(parameters.find('\n', start), parameters.size());
    modelfile += "PARAMETER " + parameters.substr(start, end - start) + "\n";
    start = end + 1;
  }
  const std::string& arch = d.family;
  Json info = {{"general.architecture", arch},
               {"general.parameter_count", d.num_parameters},
               {arch + ".context_length", model.max_context},
               {arch + ".embedding_length", d.hidden_size},
               {arch + ".block_count", d.num_layers},
               {arch + ".attention.head_count", d.num_heads},
               {arch + ".attention.head_count_kv", d.num_kv_heads},
               {arch + ".vocab_size", model.vocab_size}};
  Json capabilities = Json::array({model.embedder ? "embedding" : "completion"});
  if (model.chat_template && model.parser.family != chat::ParserFamily::kPlain) capabilities.push_back("tools");
  if (model.chat_template && ollama_can_think(model)) capabilities.push_back("thinking");
  const Json out = {{"modelfile", modelfile},
                    {"parameters", parameters},
                    {"template", d.chat_template},
                    {"details", details_json(model)},
                    {"model_info", std::move(info)},
                    {"capabilities", std::move(capabilities)},
                    {"modified_at", modified_at(model)}};
  res.set_content(dump_json(out), "application/json");
}

namespace {

Json pull_event_json(const PullEvent& e) {
  Json j = {{"status", e.status}};
  if (!e.digest.empty()) j.update({{"digest", e.digest}, {"total", e.total}, {"completed", e.completed}});
  return j;
}

}  // namespace

void handle_ollama_pull(ModelRegistry& models, const ModelPuller& puller, const std::string& body,
                        httplib::Response& res) {
  const OrderedJson request = parse_body(body);
  reject_unknown_fields(request, {"model", "name", "insecure", "stream", "username", "password"});
  const std::string name = read_ollama_model_name(request);
  const bool stream = read_bool(request, "stream").value_or(true);
  const Json success = {{"status", "success"}};
  bool served = true;
  try {
    models.find(name);
  } catch (const ApiError&) {
    served = false;
  }
  if (!served && !puller)
    throw ApiError(ErrorKind::NotImplemented,
                   fmt::format("pulling models through the API is not supported: run `tachyon pull {}` on the server "
                               "and start `tachyon serve` with it",
                               name));
  // A served model is here already: Ollama's answer to pulling a model one has is success.
  if (served) {
    res.set_content(stream ? dump_json(success) + "\n" : dump_json(success),
                    stream ? "application/x-ndjson" : "application/json");
    return;
  }
  PullJob job = puller(name);  // a name that is no hub repository is a 400 here, before any output
  if (!stream) {
    try {
      models.add(job([](const PullEvent&) {}));
    } catch (const std::exception& e) {
      throw ApiError(ErrorKind::Internal, fmt::format("pulling '{}' failed: {}", name, e.what()));
    }
    res.set_content(dump_json(success), "application/json");
    return;
  }
  res.set_chunked_content_provider("application/x-ndjson", [&models, job = std::move(job), success, name](
                                                               size_t, httplib::DataSink& sink) {
    NdjsonWriter ndjson(sink);
    try {
      // A client gone mid-pull only stops the lines: the download finishes into the cache.
      models.add(job([&](const PullEvent& e) { ndjson.line(pull_event_json(e)); }));
      ndjson.line(success);
    } catch (const std::exception& e) {
      ndjson.line(Json{{"error", fmt::format("pulling '{}' failed: {}", name, e.what())}});
    }
    sink.done();
    return true;
  });
}

void refuse_ollama_model_management(const std::string& path) {
  throw ApiError(ErrorKind::NotImplemented,
                 fmt::format("{} is not supported: this server serves the model it was started with; models are "
                             "managed with the tachyon command (tachyon pull, tachyon serve MODEL)",
                             path));
}

}  // namespace tachyon::server
