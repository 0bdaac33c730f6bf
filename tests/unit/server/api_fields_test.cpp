// The OpenAI fields that need the model's tokenizer or template: fill-in-the-middle prompts,
// reasoning effort mapped onto template switches, and the bounded store behind
// previous_response_id.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/api_error.h"
#include "server/fill_in_middle.h"
#include "server/reasoning_effort.h"
#include "server/response_conversation.h"
#include "server/response_store.h"

namespace tachyon::server {
namespace {

const std::string kRoot = TACHYON_SOURCE_DIR;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(FillInMiddle, QwenOrderWithTheDemoModelsTokens) {
  const auto tok = tokenizer::Tokenizer::from_file(kRoot + "/models/tachyon-demo/tokenizer.json");
  ParsedRequest r;
  r.prompt_text = "def add(a, b):\n";
  r.suffix = "\nprint(add(1, 2))\n";
  const Prompt p = fill_in_middle_prompt(tok, r, "demo", static_cast<int64_t>(tok.vocab_size()));
  EXPECT_EQ(p.text, "<|fim_prefix|>def add(a, b):\n<|fim_suffix|>\nprint(add(1, 2))\n<|fim_middle|>");
  EXPECT_EQ(p.ids, tok.encode(p.text, false));
  EXPECT_EQ(p.ids.front(), *tok.token_to_id("<|fim_prefix|>"));
  EXPECT_EQ(p.ids.back(), *tok.token_to_id("<|fim_middle|>"));
  // Token-id prompts are the prefix's tokens.
  ParsedRequest ids;
  ids.prompt_ids = tok.encode("x = ", false);
  ids.suffix = "";
  EXPECT_EQ(fill_in_middle_prompt(tok, ids, "demo", 8192).text, "<|fim_prefix|>x = <|fim_suffix|><|fim_middle|>");
  ids.prompt_ids = std::vector<int32_t>{9000};
  EXPECT_THROW(fill_in_middle_prompt(tok, ids, "demo", 8192), ApiError);
}

TEST(FillInMiddle, RefusedForAVocabularyWithoutFimTokens) {
  const auto tok = tokenizer::Tokenizer::from_file(kRoot + "/tests/fixtures/tokenizers/mini_bytelevel.json");
  ParsedRequest r;
  r.prompt_text = "a";
  r.suffix = "b";
  try {
    fill_in_middle_prompt(tok, r, "mini", 100000);
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param, "suffix");
    EXPECT_NE(std::string(e.what()).find("mini"), std::string::npos);
  }
}

TEST(ReasoningEffort, MappedOntoTheTemplatesSwitch) {
  const std::string gpt_oss = read_text(kRoot + "/tests/fixtures/chat_templates/gpt_oss.jinja");
  const std::string qwen3 = read_text(kRoot + "/tests/fixtures/chat_templates/qwen3.jinja");
  ASSERT_FALSE(gpt_oss.empty());
  ASSERT_FALSE(qwen3.empty());

  OrderedJson kw = OrderedJson::object();
  apply_reasoning_effort(gpt_oss, "high", kw);
  EXPECT_EQ(kw, OrderedJson({{"reasoning_effort", "high"}}));
  kw = OrderedJson::object();
  apply_reasoning_effort(gpt_oss, "none", kw);  // gpt-oss always reasons: the least it has
  EXPECT_EQ(kw["reasoning_effort"], "low");
  // Rendered: the system message carries the level.
  const auto tpl = chat::ChatTemplate::from_string(gpt_oss);
  kw = OrderedJson::object();
  apply_reasoning_effort(gpt_oss, "low", kw);
  const OrderedJson messages = OrderedJson::array({{{"role", "user"}, {"content", "hi"}}});
  EXPECT_NE(tpl.render(messages, nullptr, true, kw).find("Reasoning: low"), std::string::npos);

  kw = OrderedJson::object();
  apply_reasoning_effort(qwen3, "minimal", kw);
  EXPECT_EQ(kw, OrderedJson({{"enable_thinking", false}}));
  kw = OrderedJson::object();
  apply_reasoning_effort(qwen3, "medium", kw);
  EXPECT_EQ(kw, OrderedJson({{"enable_thinking", true}}));
  // The request's own chat_template_kwargs win.
  kw = OrderedJson({{"enable_thinking", true}});
  apply_reasoning_effort(qwen3, "none", kw);
  EXPECT_EQ(kw["enable_thinking"], true);
  // No switch: nothing.
  kw = OrderedJson::object();
  apply_reasoning_effort("{{ messages[0].content }}", "high", kw);
  EXPECT_TRUE(kw.empty());

  EXPECT_EQ(validate_reasoning_effort("minimal", "reasoning_effort"), "minimal");
  try {
    validate_reasoning_effort("extreme", "reasoning.effort");
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "reasoning.effort");
  }
}

TEST(ResponseStore, EvictsTheLeastRecentlyUsedByCountAndBytes) {
  ResponseStore store(/*max_entries=*/2, /*max_bytes=*/1000);
  store.put("a", OrderedJson::array({"first"}));
  store.put("b", OrderedJson::array({"second"}));
  ASSERT_TRUE(store.get("a"));  // a is now the most recently used
  store.put("c", OrderedJson::array({"third"}));
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("a"));
  EXPECT_TRUE(store.get("c"));
  EXPECT_EQ(store.size(), 2u);

  ResponseStore small(/*max_entries=*/100, /*max_bytes=*/64);
  small.put("x", OrderedJson::array({std::string(30, 'x')}));
  small.put("y", OrderedJson::array({std::string(30, 'y')}));  // together over 64 bytes: x goes
  EXPECT_FALSE(small.get("x"));
  EXPECT_TRUE(small.get("y"));
  EXPECT_LE(small.bytes(), 64u);
  small.put("huge", OrderedJson::array({std::string(100, 'h')}));  // alone over the bound: not kept
  EXPECT_FALSE(small.get("huge"));
}

TEST(ResponseStore, KeepsTheConversationAsItsTextAndGivesItBackWhole) {
  ResponseStore store;
  const OrderedJson conversation = OrderedJson::array(
      {{{"role", "user"}, {"content", "Caf\u00e9? \U0001F600"}},
       {{"role", "assistant"}, {"content", "Yes."}, {"tool_calls", OrderedJson::array({{{"id", "c1"}, {"n", 2}}})}}});
  store.put("resp_1", conversation);
  const std::optional<OrderedJson> back = store.get("resp_1");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, conversation);
  EXPECT_EQ(back->dump(), conversation.dump());  // key order kept
  EXPECT_EQ(store.bytes(), conversation.dump().size() + std::string("resp_1").size());
  store.put("resp_1", OrderedJson::array());  // replaced: its bytes are counted once
  EXPECT_EQ(store.bytes(), 2u + 6u);
}

TEST(ResponseConversation, ContinuesAfterTheNewInstructionsAndSkipsUnstored) {
  ResponseStore store;
  ParsedRequest first;
  first.instructions = "old rules";
  first.messages = OrderedJson::array({{{"role", "system"}, {"content", "old rules"}},
                                       {{"role", "user"}, {"content", "My name is Ada."}}});
  chat::ParsedMessage answer;
  answer.content = "Hello Ada.";
  store_conversation(store, "resp_1", first, answer);

  ParsedRequest next;
  next.instructions = "new rules";
  next.previous_response_id = "resp_1";
  next.messages = OrderedJson::array({{{"role", "system"}, {"content", "new rules"}},
                                      {{"role", "user"}, {"content", "What is my name?"}}});
  continue_stored_conversation(store, next);
  ASSERT_EQ(next.messages.size(), 4u);
  EXPECT_EQ(next.messages[0]["content"], "new rules");
  EXPECT_EQ(next.messages[1]["content"], "My name is Ada.");
  EXPECT_EQ(next.messages[2], OrderedJson({{"role", "assistant"}, {"content", "Hello Ada."}}));
  EXPECT_EQ(next.messages[3]["content"], "What is my name?");

  ParsedRequest unstored = first;
  unstored.store = false;
  store_conversation(store, "resp_2", unstored, answer);
  ParsedRequest missing;
  missing.previous_response_id = "resp_2";
  missing.messages = OrderedJson::array({{{"role", "user"}, {"content", "x"}}});
  try {
    continue_stored_conversation(store, missing);
    FAIL() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.param, "previous_response_id");
  }
}

}  // namespace
}  // namespace tachyon::server
