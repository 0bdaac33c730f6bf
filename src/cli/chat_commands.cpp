// `tachyon template MODEL --request FILE.json`: the prompt the model's chat template renders
// for an OpenAI-style request (exactly; no newline added).
// `tachyon parse MODEL --text FILE [--parser NAME] [--request FILE.json]`: generated text
// split into content, reasoning_content and tool_calls as the server would return them.
#include <iostream>

#include "base/json.h"
#include "chat/commands.h"
#include "cli/commands.h"
#include "cli/default_model.h"

namespace tachyon::cli {

Command add_template_command(CLI::App& app) {
  struct Options {
    std::string model, request;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("template", "Render a chat request with the model's chat template");
  cmd->add_option("model", opt->model, "Model (folder, hub id org/name[@rev], alias) or tokenizer_config.json "
                                       "(default: the embedded model)");
  cmd->add_option("--request", opt->request, "Request JSON file: {messages, tools, add_generation_prompt, ...}")
      ->required();
  return [opt] {
    std::cout << chat::render_request(resolve_model_arg(opt->model).path, read_file(opt->request));
    return 0;
  };
}

Command add_parse_command(CLI::App& app) {
  struct Options {
    std::string model, text, parser, request;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("parse", "Split generated text into content, reasoning and tool calls");
  cmd->add_option("model", opt->model, "Model: a folder, a hub id org/name[@rev] in the HF cache, or an alias (default: the embedded tachyon-demo)");
  cmd->add_option("--text", opt->text, "File with the generated text")->required();
  cmd->add_option("--parser", opt->parser, "Override: hermes, qwen, llama3, deepseek_v3, gemma, harmony, plain");
  cmd->add_option("--request", opt->request, "The request JSON the text answers (decides reasoning state)");
  return [opt] {
    opt->model = resolve_model_arg(opt->model).path;
    const std::string request = opt->request.empty() ? "" : read_file(opt->request);
    std::cout << chat::parse_model_output(opt->model, read_file(opt->text), opt->parser, request).dump(2) << "\n";
    return 0;
  };
}

}  // namespace tachyon::cli
