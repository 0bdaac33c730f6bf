// Constrained decoding inside the engine, on the demo model: every output stays inside the
// grammar (greedy and sampled, alone and batched, with a drafter configured), a request ends
// with "stop" exactly when the grammar is complete, and EOS never comes early. Speculation
// under constraints is constrained_spec_test.cpp's.
#include <gtest/gtest.h>

#include "base/error.h"
#include "demo_engine_fixture.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "sampling/cfg.h"
#include "sampling/json_schema_grammar.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "spec/ngram.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::engine {
namespace {

using demo_fixture::demo;
using demo_fixture::kDemo;
using demo_fixture::Result;

std::vector<Result> run(Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : requests) streams.push_back(engine.submit(r));
  std::vector<Result> out(requests.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    while (out[i].finish == FinishReason::None) {
      auto o = streams[i]->next(std::chrono::seconds(60));
      if (!o) throw Error("timeout");
      out[i].tokens.insert(out[i].tokens.end(), o->tokens.begin(), o->tokens.end());
      out[i].finish = o->finish;
      out[i].spec = o->spec;
    }
  }
  return out;
}

void expect_in_grammar(const Grammar& grammar, const Result& r) {
  sampling::GrammarMatcher m(grammar);
  std::string text;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const int32_t t = r.tokens[i];
    const bool eos = std::find(demo().eos.begin(), demo().eos.end(), t) != demo().eos.end();
    if (eos) {  // only as the very last token, once the grammar is complete
      EXPECT_EQ(i + 1, r.tokens.size());
      EXPECT_TRUE(m.is_complete());
      continue;
    }
    text += demo().vocab->bytes(t);
    ASSERT_TRUE(m.advance(demo().vocab->bytes(t))) << "token " << i << " leaves the grammar: " << text;
  }
  if (r.finish == FinishReason::Stop) EXPECT_TRUE(m.is_complete()) << text;
  else EXPECT_EQ(r.finish, FinishReason::Length) << text;
}

// The requests run as one batch: every output stays inside its request's grammar, some finish
// (complete), and each of the first `greedy` requests (temperature 0) gives alone what it gave
// in the batch.
void expect_batch_in_grammars(Engine& engine, const std::vector<GenerationRequest>& requests, size_t greedy) {
  const auto results = run(engine, requests);
  int completed = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE(i);
    expect_in_grammar(*requests[i].grammar, results[i]);
    completed += results[i].finish == FinishReason::Stop;
  }
  EXPECT_GT(completed, 0);
  for (size_t i = 0; i < greedy; ++i) EXPECT_EQ(run(engine, {requests[i]})[0].tokens, results[i].tokens) << i;
}

TEST(ConstrainedEngine, OutputsStayInTheGrammarGreedySampledAndBatched) {
  auto json = std::make_shared<const Grammar>(Grammar::json_object());
  Grammar call;
  call.then_literal("<tool_call>\n{\"name\": \"").then_choice({"get_time\", \"arguments\": ",
                                                              "get_weather\", \"arguments\": "});
  call.then_json_object().then_literal("}\n</tool_call>");
  auto tool = std::make_shared<const Grammar>(call);

  auto drafter = spec::make_ngram_drafter({});
  EngineConfig config;
  config.num_blocks = 512;
  config.vocabulary = demo().vocab;
  config.drafter = drafter.get();
  Engine engine(*demo().model, config);
  const std::vector<std::string> prompts = {"def f():\n    return {\"a\": 1}", "<|im_start|>user\nWeather?<|im_end|>\n",
                                            "import json\n\nconfig = ", "Hello"};
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < 12; ++i) {
    GenerationRequest r;
    r.prompt = demo().tok.encode(prompts[i % prompts.size()], false);
    r.max_tokens = 96;
    r.stop_token_ids = demo().eos;
    r.sampling.temperature = i < 4 ? 0.f : 1.f;
    r.sampling.seed = i;
    r.grammar = i % 3 == 2 ? tool : json;
    requests.push_back(r);
  }
  expect_batch_in_grammars(engine, requests, 4);
}

// JSON Schema grammars (the pushdown automaton, shared by the requests of the engine's thread):
// a batch of requests with two schemas, greedy and sampled, stays inside each one, those that
// finish are complete, and greedy batched equals greedy alone.
TEST(ConstrainedEngine, SchemaGrammarsInABatch) {
  auto schema_grammar = [](const char* schema) {
    auto g = std::make_shared<Grammar>();
    g->then_rules(sampling::Cfg::parse_gbnf(sampling::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema))));
    return std::shared_ptr<const Grammar>(g);
  };
  const auto person = schema_grammar(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["a", "b"]},
      "maxItems": 2}}, "required": ["name", "age", "tags"], "additionalProperties": false})");
  const auto choice = schema_grammar(R"({"anyOf": [{"type": "boolean"}, {"enum": ["x\"y", 3]}]})");
  EngineConfig config;
  config.num_blocks = 512;
  config.vocabulary = demo().vocab;
  Engine engine(*demo().model, config);
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < 10; ++i) {
    GenerationRequest r;
    r.prompt = demo().tok.encode(i % 2 ? "config = " : "def f():\n    return {\"a\": 1}", false);
    r.max_tokens = 64;
    r.stop_token_ids = demo().eos;
    r.sampling.temperature = i < 4 ? 0.f : 1.f;
    r.sampling.seed = i;
    r.grammar = i % 5 == 4 ? choice : person;
    requests.push_back(r);
  }
  expect_batch_in_grammars(engine, requests, 4);
}

TEST(ConstrainedEngine, RefusesAGrammarWithoutVocabulary) {
  EngineConfig config;
  config.num_blocks = 64;
  Engine engine(*demo().model, config);
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.grammar = std::make_shared<const Grammar>(Grammar::json_object());
  EXPECT_THROW(engine.submit(r), Error);
}

}  // namespace
}  // namespace tachyon::engine
