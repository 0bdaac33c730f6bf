// The command-line entry points (tachyon template / tachyon parse) on the demo model.
#include "chat/commands.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace tachyon::chat {
namespace {

const std::string kDemo = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo";

TEST(chat_commands, RenderRequestPassesExtraKwargsAndKeepsKeyOrder) {
  std::string request = R"({"messages": [{"role": "user", "content": "Hi"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d"}}],
    "add_generation_prompt": true, "enable_thinking": false})";
  std::string prompt = render_request(kDemo, request);
  EXPECT_NE(prompt.find(R"({"type": "function", "function": {"name": "f", "description": "d"}})"), std::string::npos);
  EXPECT_EQ(prompt.substr(prompt.size() - 41), "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(render_request(kDemo + "/tokenizer_config.json", request), prompt);
}

TEST(chat_commands, RejectsBadRequests) {
  EXPECT_THROW(render_request(kDemo, "[]"), Error);
  EXPECT_THROW(render_request(kDemo, R"({"messages": {}})"), Error);
  EXPECT_THROW(render_request(kDemo, R"({"messages": [], "add_generation_prompt": "yes"})"), Error);
  EXPECT_THROW(render_request(kDemo, "{not json"), Error);
}

TEST(chat_commands, ParseDetectsTheDemoModelsFamily) {
  Json parsed = parse_model_output(kDemo, "<think>\nhm\n</think>\n\nok<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(parsed["content"], "ok");
  EXPECT_EQ(parsed["reasoning_content"], "hm");
  EXPECT_EQ(parsed["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(parser_options_for_model(kDemo).family, ParserFamily::kHermes);
  EXPECT_EQ(parser_options_for_model(kDemo, "harmony").family, ParserFamily::kHarmony);
  Json plain = parse_model_output(kDemo, "<tool_call>{}</tool_call>", "plain");
  EXPECT_EQ(plain["content"], "<tool_call>{}</tool_call>");
}

}  // namespace
}  // namespace tachyon::chat
