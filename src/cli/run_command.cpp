// `tachyon run [MODEL] [PROMPT] [--prompt TEXT|-] [--ids ...] [--max-tokens N --temperature T
// --top-p P --top-k K --seed S]`: streams a completion to the terminal. With no prompt and no
// --ids it reads prompts from stdin, one per line (interactive completion).
//
// Positionals (kRunFooter): two are MODEL and PROMPT. One is the MODEL when --prompt or --ids
// is given, or when it names a model (an existing path, an alias, an org/name hub id, a .gguf);
// otherwise it is the PROMPT for the embedded model. A model-shaped name that does not resolve
// is an error listing what was searched, never a prompt: `tachyon run Qwen/Qwen3-8B` without
// the model pulled must not complete the text "Qwen/Qwen3-8B" with the demo model.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/generate.h"
#include "cli/spec_options.h"
#include "io/config.h"
#include "io/hf_cache.h"
#include "io/model_resolve.h"
#include "kernels/backend.h"
#include "model/model.h"

namespace tachyon::cli {

namespace {

struct RunOptions {
  std::string model_dir, prompt, ids, prompt_option;
  int max_tokens = 128;
  bool show_ids = false;
  GenerateOptions generate;
};

constexpr const char* kRunFooter =
    "MODEL and PROMPT:\n"
    "  tachyon run MODEL PROMPT          complete PROMPT with MODEL\n"
    "  tachyon run MODEL                 interactive: prompts from stdin, one per line\n"
    "  tachyon run MODEL --prompt TEXT   (--prompt - reads the whole of stdin)\n"
    "  tachyon run PROMPT                the embedded model; a lone argument is the MODEL instead when it\n"
    "                                    is an existing path, an alias (tachyon ls), an org/name hub id or a\n"
    "                                    .gguf, and then must resolve: give --prompt to send such text as a prompt\n"
    "MODEL: a folder, a hub id org/name[@revision] in the Hugging Face cache (tachyon pull), or an alias.\n";

// Whether a lone positional names a model rather than being a prompt.
bool names_a_model(const std::string& text, const std::vector<io::ModelAlias>& aliases) {
  std::error_code ec;
  if (std::filesystem::exists(text, ec)) return true;
  if (io::find_alias(aliases, text.substr(0, text.find('@')))) return true;
  if (io::looks_like_repo_id(text)) return true;
  return text.size() > 5 && text.ends_with(".gguf") && text.find_first_of(" \t\n") == std::string::npos;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto opt = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Complete a prompt in the terminal (default: the embedded demo model)");
  cmd->add_option("model", opt->model_dir, "Model: folder, hub id org/name[@rev], alias (see below)");
  cmd->add_option("prompt", opt->prompt, "Prompt text; omit for interactive mode");
  cmd->add_option("--prompt,-p", opt->prompt_option, "Prompt text (- : read it from stdin); makes a lone positional the MODEL");
  cmd->footer(kRunFooter);
  cmd->add_option("--ids", opt->ids, "Prompt as comma-separated token ids instead of text");
  cmd->add_option("--max-tokens,-n", opt->max_tokens, "Tokens to generate")->check(CLI::PositiveNumber);
  cmd->add_flag("--show-ids", opt->show_ids, "Print token ids instead of text");
  opt->generate.add_to(*cmd);
  return [opt, cmd] {
    const bool prompt_given = cmd->count("--prompt") > 0;
    if (prompt_given && !opt->prompt.empty()) throw Error("run: give the prompt once: as PROMPT or as --prompt, not both");
    if (!opt->model_dir.empty() && opt->prompt.empty() && !prompt_given && opt->ids.empty()) {
      const std::string& lone = opt->model_dir;
      const auto aliases = io::load_aliases("");
      if (!names_a_model(lone, aliases)) {
        // Plain text: the prompt for the embedded model, unless it is one typo away from an alias.
        if (const auto close = io::closest_alias(aliases, lone); close && lone.find(' ') == std::string::npos)
          throw Error("run: '{}' is neither a model nor, most likely, a prompt: did you mean the alias '{}'? "
                      "(give --prompt '{}' to send it as a prompt)", lone, *close, lone);
        opt->prompt = lone;
        opt->model_dir.clear();
      }
    }
    if (prompt_given) {
      if (opt->prompt_option == "-") {
        std::ostringstream all;
        all << std::cin.rdbuf();
        opt->prompt = all.str();
      } else {
        opt->prompt = opt->prompt_option;
      }
      if (opt->prompt.empty()) throw Error("run: --prompt is empty");
    }
    const io::ResolvedModel resolved = [&] {
      try {
        return resolve_model_arg(opt->model_dir);
      } catch (const Error& e) {
        if (opt->model_dir.empty() || !opt->prompt.empty() || prompt_given || !opt->ids.empty()) throw;
        throw Error("{}\n(to complete the text '{}' with the embedded model: tachyon run --prompt '{}')", e.what(),
                    opt->model_dir, opt->model_dir);
      }
    }();
    opt->model_dir = resolved.path;
    if (resolved.alias) opt->generate.spec.alias_method = resolved.alias->defaults.drafter;
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
