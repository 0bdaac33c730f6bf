// Differential test: random conversations rendered by Jinja2 (set up like transformers,
// jinja2_reference.py, one Python process per template) and by tachyon's interpreter must
// give identical text, or both fail with the same exception class (and the same message
// for raise_exception's TemplateError). The seed is fixed so a failure reproduces; set
// TACHYON_DIFF_SEED to explore others and TACHYON_DIFF_COUNT for a longer run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "base/json.h"
#include "chat/jinja/template.h"

namespace tachyon::chat::jinja {
namespace {

const std::string kRoot = TACHYON_SOURCE_DIR;
const std::string kFixtures = kRoot + "/tests/fixtures/chat_templates/";

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Renders `count` generated conversations through Jinja2 and through our interpreter.
void run_diff(const std::string& name, const std::string& template_path, const Json& special_tokens, int count) {
  const int seed = env_int("TACHYON_DIFF_SEED", 20261130);
  count = env_int("TACHYON_DIFF_COUNT", count);
  auto out = std::filesystem::temp_directory_path() / ("tachyon_jinja2_diff_" + name + "_" + std::to_string(::getpid()) + ".json");
  std::string cmd = "python3 " + shell_quote(kRoot + "/tests/diff/chat/jinja2_reference.py") + " --seed " +
                    std::to_string(seed) + " --count " + std::to_string(count) + " --out " + shell_quote(out.string()) +
                    " " + shell_quote(name + "=" + template_path + ":" + special_tokens.dump());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto doc = nlohmann::ordered_json::parse(read_file(out.string()));
  std::filesystem::remove(out);
  Template tpl(read_file(template_path));
  int num_cases = 0, num_mismatches = 0, num_errors = 0;
  for (auto& c : doc["cases"]) {
    ++num_cases;
    std::string rendered, error_type, error_message;
    try {
      rendered = tpl.render(c["context"]);
    } catch (const TemplateError& e) {
      error_type = error_kind_name(e.kind());
      error_message = e.what();
    }
    bool same;
    if (c.contains("error_type")) {
      ++num_errors;
      same = error_type == c["error_type"].get<std::string>();
      if (same && error_type == "TemplateError")
        same = error_message.find(c["error_message"].get<std::string>()) != std::string::npos;
    } else {
      same = error_type.empty() && rendered == c["rendered"].get<std::string>();
    }
    if (!same && ++num_mismatches <= 3) {
      ADD_FAILURE() << name << " case " << num_cases - 1 << "\ncontext: " << c["context"].dump()
                    << "\njinja2: " << (c.contains("error_type") ? c["error_type"].get<std::string>() + ": " +
                                                                        c["error_message"].get<std::string>()
                                                                  : c["rendered"].dump())
                    << "\ntachyon: " << (error_type.empty() ? Json(rendered).dump() : error_message);
    }
  }
  EXPECT_EQ(num_mismatches, 0) << "of " << num_cases << " cases";
  EXPECT_EQ(num_cases, count);
  // The generator must exercise both outcomes, or the comparison proves little.
  EXPECT_LT(num_errors, num_cases * 9 / 10) << name;
  std::printf("%s: %d cases, %d rendered, %d errors, %d mismatches\n", name.c_str(), num_cases,
              num_cases - num_errors, num_errors, num_mismatches);
}

Json golden_tokens(const std::string& name) {
  return Json::parse(read_file(kFixtures + name + ".golden.json"))["special_tokens"];
}

TEST(chat_jinja2_diff, Qwen3) { run_diff("qwen3", kFixtures + "qwen3.jinja", golden_tokens("qwen3"), 1500); }
TEST(chat_jinja2_diff, Llama31) { run_diff("llama3_1", kFixtures + "llama3_1.jinja", golden_tokens("llama3_1"), 1500); }
TEST(chat_jinja2_diff, Gemma3) { run_diff("gemma3", kFixtures + "gemma3.jinja", golden_tokens("gemma3"), 1500); }
TEST(chat_jinja2_diff, DeepseekV3) {
  run_diff("deepseek_v3", kFixtures + "deepseek_v3.jinja", golden_tokens("deepseek_v3"), 1500);
}
TEST(chat_jinja2_diff, TachyonDemo) {
  // The embedded model's template, extracted from its tokenizer_config.json.
  Json config = Json::parse(read_file(kRoot + "/models/tachyon-demo/tokenizer_config.json"));
  auto path = std::filesystem::temp_directory_path() / ("tachyon_demo_template_" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(path, std::ios::binary) << config["chat_template"].get<std::string>();
  run_diff("tachyon_demo", path.string(), {{"eos_token", config["eos_token"]}}, 1500);
  std::filesystem::remove(path);
}
TEST(chat_jinja2_diff, GptOssHarmony) {
  run_diff("gpt_oss", kFixtures + "gpt_oss.jinja",
           {{"bos_token", "<|startoftext|>"}, {"eos_token", "<|return|>"}}, 1500);
}
TEST(chat_jinja2_diff, LanguageFeatures) {
  run_diff("features", kFixtures + "features.jinja", {{"bos_token", "<s>"}, {"eos_token", "</s>"}}, 1500);
}

}  // namespace
}  // namespace tachyon::chat::jinja
