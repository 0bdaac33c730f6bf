// tachyon: the command-line entry point. Subcommands live in one file each.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/error.h"
#include "base/logging.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  tachyon::log::init_from_env();
  CLI::App app{"tachyon: a fast, exact LLM inference server"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, tachyon::cli::Command>> commands;
  auto add = [&](auto adder) {
    const size_t before = app.get_subcommands([](CLI::App*) { return true; }).size();
    auto cmd = adder(app);
    auto subs = app.get_subcommands([](CLI::App*) { return true; });
    commands.emplace_back(subs.size() > before ? subs.back() : nullptr, std::move(cmd));
  };
  add(tachyon::cli::add_run_command);
  add(tachyon::cli::add_chat_command);
  add(tachyon::cli::add_logits_command);
  add(tachyon::cli::add_info_command);
  add(tachyon::cli::add_template_command);
  add(tachyon::cli::add_parse_command);
  add(tachyon::cli::add_tokenize_command);
  add(tachyon::cli::add_detokenize_command);
  add(tachyon::cli::add_pull_command);
  add(tachyon::cli::add_ls_command);
  add(tachyon::cli::add_rm_command);
#ifdef TACHYON_HAVE_SERVER
  add(tachyon::cli::add_serve_command);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, cmd] : commands)
      if (sub && sub->parsed()) return cmd();
  } catch (const tachyon::Error& e) {
    std::fprintf(stderr, "tachyon: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
