// `tachyon run [MODEL_DIR] ["prompt"] [--ids ...] [--max-tokens N --temperature T --top-p P
// --top-k K --seed S]`: streams a completion to the terminal. With no prompt and no --ids
// it reads prompts from stdin, one per line (interactive completion).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/generate.h"
#include "cli/spec_options.h"
#include "io/config.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::cli {

namespace {

struct RunOptions {
  std::string model_dir, prompt, ids;
  int max_tokens = 128;
  bool show_ids = false;
  GenerateOptions generate;
};

}  // namespace

Command add_run_command(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Complete a prompt in the terminal (default: the embedded demo model)");
  cmd->add_option("model", opt->model_dir, "Model directory (default: the embedded tachyon-demo)");
  cmd->add_option("prompt", opt->prompt, "Prompt text; omit for interactive mode");
  cmd->add_option("--ids", opt->ids, "Prompt as comma-separated token ids instead of text");
  cmd->add_option("--max-tokens,-n", opt->max_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_flag("--show-ids", opt->show_ids, "Print token ids instead of text");
  opt->generate.add_to(*cmd);
  return [opt, cmd] {
    // A single positional that is not a directory is the prompt for the default model.
    if (!opt->model_dir.empty() && !std::filesystem::is_directory(opt->model_dir) && opt->prompt.empty()) {
      opt->prompt = opt->model_dir;
      opt->model_dir.clear();
    }
    if (opt->model_dir.empty()) opt->model_dir = default_model_dir();
    TerminalModel loaded = load_terminal_model(opt->model_dir, opt->generate, *cmd);
    Generator& gen = *loaded.generator;
    const bool text_out = gen.has_tokenizer() && !opt->show_ids;

    auto complete = [&](const std::vector<int32_t>& prompt_ids) {
      using Clock = std::chrono::steady_clock;
      const auto start = Clock::now();
      std::optional<Clock::time_point> first;  // the first generated token: prefill ends, decode starts
      auto result = gen.generate(prompt_ids, opt->generate.sampling, opt->max_tokens, [&](int32_t id, const std::string& text) {
        if (!first) first = Clock::now();
        if (text_out) std::fputs(text.c_str(), stdout);
        else if (id >= 0) std::printf("%d ", id);
        std::fflush(stdout);
      });
      const auto end = Clock::now();
      const double prefill = std::chrono::duration<double>(first.value_or(end) - start).count();
      const double decode = std::chrono::duration<double>(end - first.value_or(end)).count();
      const size_t n = result.tokens.size();
      std::printf("\n");
      // Decode tok/s counts the tokens after the first over the time after the first.
      std::fprintf(stderr, "[%zu prompt tokens, %.3f s to the first token, %zu generated, %.1f tok/s decode, stop: %s",
                   prompt_ids.size(), prefill, n, n > 1 && decode > 0 ? static_cast<double>(n - 1) / decode : 0.0,
                   result.stop_reason.c_str());
      if (!result.spec.method.empty())
        std::fprintf(stderr, ", %s: %d/%d drafts accepted, %.2f tokens/step%s%s", result.spec.method.c_str(),
                     result.spec.num_accepted, result.spec.num_drafted, result.spec.mean_accepted_length(),
                     result.spec.stopped_by.empty() ? "" : ", off by ", result.spec.stopped_by.c_str());
      std::fprintf(stderr, "]\n");
    };

    if (!opt->ids.empty()) {
      complete(parse_id_list(opt->ids));
    } else if (!opt->prompt.empty()) {
      complete(gen.encode(opt->prompt));
    } else {
      if (!gen.has_tokenizer()) throw Error("{}: no tokenizer.json; give --ids", opt->model_dir);
      std::fprintf(stderr, "tachyon: interactive completion with %s (Ctrl-D to quit)\n", opt->model_dir.c_str());
      std::string line;
      while (std::fprintf(stderr, "> "), std::getline(std::cin, line)) {
        if (line.empty()) continue;
        complete(gen.encode(line + "\n"));
      }
    }
    return 0;
  };
}

}  // namespace tachyon::cli
