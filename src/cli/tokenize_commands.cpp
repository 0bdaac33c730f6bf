// `tachyon tokenize [MODEL|tokenizer.json] [--text T] [--no-special]`: token ids of the
// text (or of each stdin line), comma-separated.
// `tachyon detokenize [MODEL|tokenizer.json] --ids 1,2,3 [--skip-special]`: the text.
#include <iostream>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

Command add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string source, text;
    bool no_special = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  cmd->add_option("tokenizer", opt->source, "Model directory or tokenizer.json (default: the embedded model)");
  cmd->add_option("--text", opt->text, "Text to encode (default: each line of stdin)");
  cmd->add_flag("--no-special", opt->no_special, "Do not add special tokens (BOS, ...)");
  return [opt, cmd] {
    const auto tok = tokenizer::Tokenizer::from_path(opt->source.empty() ? default_model_dir() : opt->source);
    auto print = [&](const std::string& text) {
      const auto ids = tok.encode(text, !opt->no_special);
      for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
      std::cout << "\n";
    };
    if (cmd->count("--text")) {
      print(opt->text);
    } else {
      for (std::string line; std::getline(std::cin, line);) print(line);
    }
    return 0;
  };
}

Command add_detokenize_command(CLI::App& app) {
  struct Options {
    std::string source, ids;
    bool skip_special = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("detokenize", "Print the text of token ids");
  cmd->add_option("tokenizer", opt->source, "Model directory or tokenizer.json (default: the embedded model)");
  cmd->add_option("--ids", opt->ids, "Comma-separated token ids")->required();
  cmd->add_flag("--skip-special", opt->skip_special, "Leave out special tokens");
  return [opt] {
    const auto tok = tokenizer::Tokenizer::from_path(opt->source.empty() ? default_model_dir() : opt->source);
    std::cout << tok.decode(parse_id_list(opt->ids), opt->skip_special) << "\n";
    return 0;
  };
}

}  // namespace tachyon::cli
