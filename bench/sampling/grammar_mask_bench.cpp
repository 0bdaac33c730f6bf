// Structured-output cost, two measurements:
//
// 1. Token masks on a real vocabulary (Qwen3's 151,669 tokens by default): for each schema of a
//    small corpus, valid documents are tokenized as a model would emit them and replayed through
//    a fresh TokenConstraint per document, three times over (requests of one thread share a
//    grammar's automaton and masks, as in the server; the first replay is reported apart as
//    "cold"): mask (+ apply to the logits), then accept the document's next token. Prints the
//    per-token distribution (median, p90, p99, max; thread CPU time) and the ratio of the
//    median to the 50 us target, plus the schema compile time (first and cached).
// 2. The engine on the demo model: 64 concurrent requests, each constrained by a JSON Schema,
//    against the same 64 unconstrained (run to max_tokens), measured in the same run: process
//    CPU time per generated token, per-request gaps between deliveries (one decode step each)
//    and total tokens/s. A stall would show as a long tail.
//
// Usage: grammar_mask_bench [--tokenizer tokenizer.json] [--model models/tachyon-demo] [--requests 64]
//                           [--max-tokens 48]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "sampling/cfg.h"
#include "sampling/grammar_cache.h"
#include "sampling/json_schema_grammar.h"
#include "sampling/token_mask.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

using namespace tachyon;
using SchemaJson = nlohmann::ordered_json;

namespace {

// This thread's CPU time: what a mask costs, whatever else the machine runs (the
// measurement VM is shared; wall time there includes waiting for a core).
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Case {
  const char* name;
  const char* schema;
  std::vector<const char*> documents;
};

// Schemas like the ones structured-output clients send, with documents a model would write.
const std::vector<Case>& corpus() {
  static const std::vector<Case> cases = {
      {"weather call args",
       R"({"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},
          "required":["location","unit"],"additionalProperties":false})",
       {R"({"location": "Paris, France", "unit": "celsius"})", R"({"location":"San Francisco, CA","unit":"fahrenheit"})"}},
      {"person with nested address",
       R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
          "email":{"type":"string","format":"email"},"address":{"type":"object","properties":{"street":{"type":"string"},
          "city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city","zip"],
          "additionalProperties":false}},"required":["name","age","email","address"],"additionalProperties":false})",
       {"{\n  \"name\": \"Ada Lovelace\",\n  \"age\": 36,\n  \"email\": \"ada@example.org\",\n  \"address\": {\n    "
        "\"street\": \"12 St James's Square\",\n    \"city\": \"London\",\n    \"zip\": \"12345\"\n  }\n}"}},
      {"event list with dates",
       R"({"type":"object","properties":{"events":{"type":"array","items":{"type":"object","properties":{
          "title":{"type":"string"},"when":{"type":"string","format":"date-time"},"tags":{"type":"array",
          "items":{"type":"string"},"maxItems":4}},"required":["title","when","tags"],"additionalProperties":false},
          "minItems":1,"maxItems":10}},"required":["events"],"additionalProperties":false})",
       {R"({"events": [{"title": "Standup", "when": "2025-03-04T09:30:00Z", "tags": ["team", "daily"]}, {"title": "Release review of v2.1", "when": "2025-03-06T15:00:00+01:00", "tags": []}]})"}},
      {"recursive tree",
       R"({"$defs":{"node":{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array",
          "items":{"$ref":"#/$defs/node"}}},"required":["label","children"],"additionalProperties":false}},
          "$ref":"#/$defs/node"})",
       {R"({"label": "root", "children": [{"label": "left", "children": []}, {"label": "right", "children": [{"label": "leaf", "children": []}]}]})"}},
      {"anyOf of objects",
       R"({"type":"object","properties":{"shape":{"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},
          "radius":{"type":"number"}},"required":["kind","radius"],"additionalProperties":false},{"type":"object",
          "properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},"required":["kind","w","h"],
          "additionalProperties":false}]}},"required":["shape"],"additionalProperties":false})",
       {R"({"shape": {"kind": "rect", "w": 3.5, "h": 2}})", R"({"shape": {"kind": "circle", "radius": 10.25}})"}},
      {"free text answer with reasoning",
       R"({"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"string"},
          "confidence":{"type":"number","minimum":0,"maximum":1}},"required":["reasoning","answer","confidence"],
          "additionalProperties":false})",
       {R"({"reasoning": "The question asks for the capital of Australia. Many people think it is Sydney, the largest city, but the capital is Canberra, chosen as a compromise between Sydney and Melbourne in 1908.", "answer": "Canberra", "confidence": 0.97})"}},
  };
  return cases;
}

void mask_cost(const std::string& tokenizer_path) {
  const auto tok = tokenizer::Tokenizer::from_file(tokenizer_path);
  const std::vector<std::string> bytes = tokenizer::token_byte_strings(tok);
  const double t0 = now_us();
  auto vocab = std::make_shared<const sampling::TokenVocabulary>(bytes);
  std::printf("## Token masks: %s\n\n%d tokens, %zu trie nodes, built in %.0f ms\n\n", tokenizer_path.c_str(),
              vocab->size(), vocab->num_nodes(), (now_us() - t0) / 1000);
  std::printf("| schema | tokens | compile ms (cached) | median us | p90 us | p99 us | max us | cold median us | cache hits | nodes/miss |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<float> logits(static_cast<size_t>(vocab->size()));
  std::vector<double> all, all_cold;
  sampling::GrammarCache cache(16);
  for (const Case& c : corpus()) {
    const SchemaJson schema = SchemaJson::parse(c.schema);
    const double c0 = cpu_us();
    auto cfg = cache.get(schema.dump(), [&] { return sampling::json_schema_to_gbnf(schema); });
    const double compile_ms = (cpu_us() - c0) / 1000;
    const double c1 = cpu_us();
    cache.get(schema.dump(), [&] { return sampling::json_schema_to_gbnf(schema); });
    const double cached_ms = (cpu_us() - c1) / 1000;
    auto grammar = std::make_shared<sampling::Grammar>();
    grammar->then_rules(cfg);
    std::vector<double> times, cold;  // cold: the first replay, before any mask of this grammar is cached
    uint64_t masks = 0, hits = 0, nodes = 0;
    for (int rep = 0; rep < 3; ++rep) {
      for (const char* doc : c.documents) {
        sampling::TokenConstraint constraint(grammar, vocab, {});
        const std::vector<int32_t> ids = tok.encode(doc, false);
        for (int32_t id : ids) {
          const double s = cpu_us();
          const size_t allowed = constraint.mask_logits(logits);
          times.push_back(cpu_us() - s);
          if (rep == 0) cold.push_back(times.back());
          if (allowed == 0 || !constraint.accept(id)) {
            std::fprintf(stderr, "grammar_mask_bench: '%s' rejects its own document at token '%s'\n", c.name,
                         bytes[static_cast<size_t>(id)].c_str());
            std::exit(1);
          }
        }
        if (!constraint.is_complete()) {
          std::fprintf(stderr, "grammar_mask_bench: '%s' document incomplete\n", c.name);
          std::exit(1);
        }
        masks += constraint.stats().masks, hits += constraint.stats().cache_hits;
        nodes += constraint.stats().nodes_visited;
      }
    }
    all.insert(all.end(), times.begin(), times.end());
    all_cold.insert(all_cold.end(), cold.begin(), cold.end());
    std::printf("| %s | %zu | %.2f (%.3f) | %.1f | %.1f | %.0f | %.0f | %.1f | %.0f%% | %.0f |\n", c.name,
                times.size() / 3, compile_ms, cached_ms, percentile(times, 0.5), percentile(times, 0.9),
                percentile(times, 0.99), percentile(times, 1.0), percentile(cold, 0.5), 100.0 * static_cast<double>(hits) / static_cast<double>(masks),
                static_cast<double>(nodes) / static_cast<double>(std::max<uint64_t>(1, masks - hits)));
  }
  const double median = percentile(all, 0.5);
  std::printf("| **all** | %zu | | **%.1f** | %.1f | %.0f | %.0f | **%.1f** | | |\n\n", all.size(), median,
              percentile(all, 0.9), percentile(all, 0.99), percentile(all, 1.0), percentile(all_cold, 0.5));
  std::printf("Median mask cost / 50 us target: %.2f (cold, first request of each schema: %.2f)\n\n", median / 50.0,
              percentile(all_cold, 0.5) / 50.0);
}

// CPU time of the whole process (every thread: the engine's loop, its workers, the clients).
double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct RunStats {
  std::vector<double> gaps_ms;
  double seconds = 0, cpu_seconds = 0;
  size_t tokens = 0;
  int stopped = 0;
};

RunStats engine_run(engine::Engine& eng, const std::vector<engine::GenerationRequest>& requests) {
  RunStats st;
  std::vector<std::vector<double>> gaps(requests.size());
  std::vector<size_t> tokens(requests.size());
  std::vector<int> stops(requests.size());
  const double t0 = now_us(), c0 = process_cpu_s();
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stream = eng.submit(requests[i]);
      double last = -1;
      while (true) {
        auto out = stream->next(std::chrono::seconds(120));
        if (!out) break;
        const double t = now_us();
        if (last >= 0 && !out->tokens.empty()) gaps[i].push_back((t - last) / 1000);
        if (!out->tokens.empty()) last = t;
        tokens[i] += out->tokens.size();
        if (out->finish != engine::FinishReason::None) {
          stops[i] = out->finish == engine::FinishReason::Stop;
          break;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  st.seconds = (now_us() - t0) / 1e6;
  st.cpu_seconds = process_cpu_s() - c0;
  for (size_t i = 0; i < requests.size(); ++i) {
    st.gaps_ms.insert(st.gaps_ms.end(), gaps[i].begin(), gaps[i].end());
    st.tokens += tokens[i];
    st.stopped += stops[i];
  }
  return st;
}

void engine_steps(const std::string& model_dir, int num_requests, int max_tokens) {
  auto backend = kernels::make_backend("cpu");
  auto model = model::load_model(model_dir, *backend);
  const auto tok = tokenizer::Tokenizer::from_model_dir(model_dir);
  engine::EngineConfig config;
  config.max_concurrent = num_requests;
  config.num_blocks = 2048;
  config.vocabulary = std::make_shared<const sampling::TokenVocabulary>(tokenizer::token_byte_strings(tok));
  engine::Engine eng(*model, config);
  const std::vector<int32_t> eos = {*tok.token_to_id("<|endoftext|>"), *tok.token_to_id("<|im_end|>")};
  std::vector<std::shared_ptr<const sampling::Grammar>> grammars;
  for (const Case& c : corpus()) {
    auto g = std::make_shared<sampling::Grammar>();
    g->then_rules(sampling::Cfg::parse_gbnf(sampling::json_schema_to_gbnf(SchemaJson::parse(c.schema))));
    grammars.push_back(g);
  }
  auto make = [&](bool constrained) {
    std::vector<engine::GenerationRequest> reqs;
    for (int i = 0; i < num_requests; ++i) {
      engine::GenerationRequest r;
      r.prompt = tok.encode(fmt::format("# request {}\ndef config():\n    return ", i), false);
      r.max_tokens = max_tokens;
      r.sampling.temperature = 0.8f;
      r.sampling.seed = static_cast<uint64_t>(i + 1);
      // Unconstrained requests run to max_tokens (no EOS), so both runs decode about as many
      // tokens after the same prefill; constrained ones end where their grammar does.
      if (constrained) r.stop_token_ids = eos, r.grammar = grammars[static_cast<size_t>(i) % grammars.size()];
      reqs.push_back(std::move(r));
    }
    return reqs;
  };
  engine_run(eng, make(false));  // warm-up
  const RunStats plain = engine_run(eng, make(false));
  const RunStats constrained = engine_run(eng, make(true));
  std::printf("## Engine: %s, %d concurrent requests, up to %d tokens, temperature 0.8\n\n", model_dir.c_str(),
              num_requests, max_tokens);
  std::printf("| run | tokens | tok/s | CPU ms/token | gap p50 ms | p90 | p99 | max | finished with stop |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [name, s] : {std::pair{"unconstrained", &plain}, std::pair{"JSON Schema", &constrained}})
    std::printf("| %s | %zu | %.0f | %.2f | %.1f | %.1f | %.1f | %.1f | %d |\n", name, s->tokens,
                static_cast<double>(s->tokens) / s->seconds, 1000 * s->cpu_seconds / static_cast<double>(s->tokens),
                percentile(s->gaps_ms, 0.5), percentile(s->gaps_ms, 0.9), percentile(s->gaps_ms, 0.99),
                percentile(s->gaps_ms, 1.0), s->stopped);
  std::printf("\nConstrained / unconstrained: CPU per token %.2fx; gap p50 %.2fx, p99 %.2fx, max %.2fx, throughput %.2fx\n",
              (constrained.cpu_seconds / static_cast<double>(constrained.tokens)) /
                  (plain.cpu_seconds / static_cast<double>(plain.tokens)),
              percentile(constrained.gaps_ms, 0.5) / percentile(plain.gaps_ms, 0.5),
              percentile(constrained.gaps_ms, 0.99) / percentile(plain.gaps_ms, 0.99),
              percentile(constrained.gaps_ms, 1.0) / percentile(plain.gaps_ms, 1.0),
              (static_cast<double>(constrained.tokens) / constrained.seconds) /
                  (static_cast<double>(plain.tokens) / plain.seconds));
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path = ".cache/npm-assets/tokenizers/qwen3/tokenizer.json";
  std::string model_dir = "models/tachyon-demo";
  int requests = 64, max_tokens = 48;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tokenizer_path = argv[i + 1];
    else if (!std::strcmp(argv[i], "--model")) model_dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max-tokens")) max_tokens = std::atoi(argv[i + 1]);
  }
  mask_cost(tokenizer_path);
  if (requests > 0) engine_steps(model_dir, requests, max_tokens);
  return 0;
}
