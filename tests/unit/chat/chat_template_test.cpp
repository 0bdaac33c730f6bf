// Golden renderings of real chat templates (transformers 5.17 apply_chat_template; see
// tests/fixtures/chat_templates/README.md): every case must render byte for byte, and
// the cases transformers rejects must fail with the same exception class (and, for
// raise_exception, the same message).
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/json.h"

namespace tachyon::chat {
namespace {

const std::string kFixtures = std::string(TACHYON_SOURCE_DIR) + "/tests/fixtures/chat_templates/";

void check_golden(const std::string& name) {
  auto golden = nlohmann::ordered_json::parse(read_file(kFixtures + name + ".golden.json"));
  ChatTemplate tpl = ChatTemplate::from_string(read_file(kFixtures + name + ".jinja"));
  tpl.set_special_tokens(Json::parse(golden["special_tokens"].dump()));
  int checked = 0;
  for (auto& c : golden["cases"]) {
    SCOPED_TRACE(name + "/" + c["name"].get<std::string>());
    auto tools = c["tools"];
    std::string rendered;
    std::string error_type, error_message;
    try {
      rendered = tpl.render(c["messages"], tools, c["add_generation_prompt"].get<bool>(), c["kwargs"]);
    } catch (const TemplateError& e) {
      error_type = jinja::error_kind_name(e.kind());
      error_message = e.message();
    }
    if (c.contains("error")) {
      EXPECT_EQ(error_type, c["error_type"].get<std::string>()) << error_message;
      if (error_type == "TemplateError") {
        EXPECT_EQ(error_message, c["error_message"].get<std::string>());
      }
    } else {
      EXPECT_EQ(error_type, "") << error_message;
      EXPECT_EQ(rendered, c["rendered"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_GE(checked, 17);
}

TEST(chat_template_golden, Qwen3) { check_golden("qwen3"); }
TEST(chat_template_golden, Llama31) { check_golden("llama3_1"); }
TEST(chat_template_golden, Gemma3) { check_golden("gemma3"); }
TEST(chat_template_golden, DeepseekV3) { check_golden("deepseek_v3"); }

TEST(chat_template, LoadsDemoModel) {
  auto tpl = ChatTemplate::from_model_dir(std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo");
  Json messages = Json::parse(R"([{"role": "user", "content": "Hi"}])");
  EXPECT_EQ(tpl.render(messages, nullptr, true, {{"enable_thinking", false}}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(tpl.special_tokens().value("eos_token", ""), "<|im_end|>");
}

TEST(chat_template, LoadsAddedTokenObjectsAndTemplateLists) {
  auto dir = std::filesystem::temp_directory_path() / "tachyon_chat_template_test";
  std::filesystem::create_directories(dir);
  {
    Json config = {{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
                   {"eos_token", "</s>"},
                   {"chat_template", Json::array({{{"name", "default"}, {"template", "{{ bos_token }}plain"}},
                                                  {{"name", "tool_use"}, {"template", "{{ bos_token }}tools"}}})}};
    std::ofstream(dir / "tokenizer_config.json") << config.dump();
  }
  auto tpl = ChatTemplate::from_model_dir(dir.string());
  EXPECT_EQ(tpl.render(Json::array(), nullptr, false), "<s>plain");
  EXPECT_EQ(tpl.render(Json::array(), Json::array(), false), "<s>tools");
  std::filesystem::remove(dir / "tokenizer_config.json");
  {
    std::ofstream(dir / "chat_template.jinja") << "{{ messages | length }}\n";
  }
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.string()).render(Json::array({1, 2}), nullptr, false), "2");
  std::filesystem::remove(dir / "chat_template.jinja");
  {
    std::ofstream(dir / "chat_template.json") << R"({"chat_template": "{{ add_generation_prompt }}"})";
  }
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.string()).render(Json::array(), nullptr, true), "True");
  std::filesystem::remove_all(dir);
  EXPECT_THROW(ChatTemplate::from_model_dir(dir.string()), Error);
}

TEST(chat_template, KeepsClientKeyOrderWithOrderedJson) {
  auto tpl = ChatTemplate::from_string("{{ tools | tojson }}");
  auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  EXPECT_EQ(tpl.render(nlohmann::ordered_json::array(), tools, false),
            R"([{"type": "function", "function": {"name": "f"}}])");
}

// The real tokenizer_config.json files fetched by scripts/fetch_test_assets.sh must
// carry the same templates as the golden fixtures.
TEST(chat_template, CachedTokenizerConfigsMatchFixtures) {
  const std::string cache = std::string(TACHYON_SOURCE_DIR) + "/.cache/npm-assets/tokenizers/";
  if (!std::filesystem::exists(cache)) GTEST_SKIP() << "run scripts/fetch_test_assets.sh";
  for (const char* name : {"qwen3", "llama3_1", "gemma3", "deepseek_v3"}) {
    auto tpl = ChatTemplate::from_model_dir(cache + name);
    EXPECT_EQ(tpl.source(), read_file(kFixtures + name + ".jinja")) << name;
    EXPECT_FALSE(tpl.special_tokens().value("eos_token", "").empty()) << name;
  }
}

}  // namespace
}  // namespace tachyon::chat

namespace tachyon::chat {
namespace {

// gpt-oss has no template in its npm package; tests/fixtures/chat_templates/gpt_oss.jinja
// is written from OpenAI's harmony specification. This is the spec's worked example
// (system, developer instructions with two function tools, a tool call, its result and a
// final answer), rendered by hand from the format rules of the specification.
TEST(chat_template_harmony, MatchesTheSpecificationExample) {
  auto tpl = ChatTemplate::from_string(read_file(kFixtures + "gpt_oss.jinja"), "<|startoftext|>", "<|return|>");
  auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Always respond in riddles"},
    {"role": "user", "content": "What is the weather like in SF?"},
    {"role": "assistant", "reasoning_content": "Need to use function get_current_weather.", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_current_weather",
                                                       "arguments": "{\"location\":\"San Francisco\"}"}}]},
    {"role": "tool", "name": "get_current_weather", "content": "{\"sunny\": true, \"temperature\": 20}"}])");
  auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_location", "description": "Gets the location of the user.",
                                      "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_current_weather",
      "description": "Gets the current weather in the provided location.",
      "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
        "format": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
        "required": ["location"]}}}])");
  std::string expected =
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: high\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
      "Calls to these tools must go to the commentary channel: 'functions'.<|end|>"
      "<|start|>developer<|message|># Instructions\n\nAlways respond in riddles\n\n"
      "# Tools\n\n## functions\n\nnamespace functions {\n\n"
      "// Gets the location of the user.\ntype get_location = () => any;\n\n"
      "// Gets the current weather in the provided location.\ntype get_current_weather = (_: {\n"
      "// The city and state, e.g. San Francisco, CA\nlocation: string,\n"
      "format?: \"celsius\" | \"fahrenheit\", // default: celsius\n}) => any;\n\n"
      "} // namespace functions<|end|>"
      "<|start|>user<|message|>What is the weather like in SF?<|end|>"
      "<|start|>assistant<|channel|>analysis<|message|>Need to use function get_current_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>"
      "{\"location\":\"San Francisco\"}<|call|>"
      "<|start|>functions.get_current_weather to=assistant<|channel|>commentary<|message|>"
      "{\"sunny\": true, \"temperature\": 20}<|end|>"
      "<|start|>assistant";
  EXPECT_EQ(tpl.render(messages, tools, true, {{"reasoning_effort", "high"}, {"current_date", "2025-06-28"}}), expected);

  // A later turn drops the reasoning of turns that ended in a final answer.
  auto history = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "reasoning_content": "Greet back.", "content": "Hello!"},
    {"role": "user", "content": "Bye"}])");
  std::string later = tpl.render(history, nullptr, true, {{"current_date", "2025-06-28"}});
  EXPECT_EQ(later.find("Greet back."), std::string::npos);
  EXPECT_NE(later.find("Reasoning: medium"), std::string::npos);
  EXPECT_NE(later.find("<|start|>assistant<|channel|>final<|message|>Hello!<|end|><|start|>user<|message|>Bye<|end|>"
                       "<|start|>assistant"),
            std::string::npos);
}

}  // namespace
}  // namespace tachyon::chat
