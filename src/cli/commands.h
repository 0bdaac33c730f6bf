// Subcommands of the `tachyon` binary. Each registers its options on the CLI11 app and
// returns the function that runs it (exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tachyon::cli {

using Command = std::function<int()>;

Command add_logits_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_chat_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_template_command(CLI::App& app);
Command add_parse_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
Command add_detokenize_command(CLI::App& app);
Command add_pull_command(CLI::App& app);
Command add_ls_command(CLI::App& app);
Command add_rm_command(CLI::App& app);
#ifdef TACHYON_HAVE_SERVER
Command add_serve_command(CLI::App& app);
#endif

// "1,2,3" -> {1, 2, 3}; throws tachyon::Error naming the bad entry.
std::vector<int32_t> parse_id_list(const std::string& text);

}  // namespace tachyon::cli
