// `tachyon tokenize TOKENIZER [--special]`: TOKENIZER is a tokenizer.json, a model dir or a
// .gguf file (default: the embedded model). Reads lines from stdin, each a JSON string, and writes for
// each a JSON array of ids on its own line.
// `tachyon detokenize TOKENIZER [--skip-special]`: lines of JSON id arrays in, JSON strings out.
// A bad line gets an error on stderr naming its number; the other lines are still answered.
#include <iostream>

#include "base/error.h"
#include "base/json.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/gguf_tokenizer.h"
#include "io/gguf_config.h"
#include "tokenizer/tokenizer.h"

namespace tachyon::cli {

namespace {

// A .gguf file (or a folder holding one) carries its tokenizer in its metadata; anything else
// is tokenizer.json or a model folder.
tokenizer::Tokenizer load_tokenizer(const std::string& source) {
  const std::string path = resolve_model_arg(source).path;
  if (const auto gguf = io::gguf_model_file(path)) return *load_gguf_tokenizer(*gguf).tokenizer;
  return tokenizer::Tokenizer::from_path(path);
}

// Runs `answer` on every stdin line; returns 1 if any line was bad.
int for_each_line(const std::function<std::string(const Json&)>& answer) {
  int status = 0, number = 0;
  for (std::string line; std::getline(std::cin, line);) {
    ++number;
    try {
      std::cout << answer(parse_json(line, fmt::format("line {}", number))) << "\n" << std::flush;
    } catch (const std::exception& e) {
      std::cerr << "tachyon: line " << number << ": " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string source;
    bool special = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tokenize", "JSON strings on stdin -> JSON arrays of token ids on stdout");
  cmd->add_option("tokenizer", opt->source, "tokenizer.json, or a model: folder, .gguf, hub id, alias (default: the embedded model)");
  cmd->add_flag("--special", opt->special, "Add the tokenizer's special tokens (BOS, ...)");
  return [opt] {
    const auto tok = load_tokenizer(opt->source);
    return for_each_line([&](const Json& line) {
      if (!line.is_string()) throw Error("expected a JSON string");
      return Json(tok.encode(line.get<std::string>(), opt->special)).dump();
    });
  };
}

Command add_detokenize_command(CLI::App& app) {
  struct Options {
    std::string source;
    bool skip_special = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("detokenize", "JSON arrays of token ids on stdin -> JSON strings on stdout");
  cmd->add_option("tokenizer", opt->source, "tokenizer.json, or a model: folder, .gguf, hub id, alias (default: the embedded model)");
  cmd->add_flag("--skip-special", opt->skip_special, "Leave out special tokens");
  return [opt] {
    const auto tok = load_tokenizer(opt->source);
    return for_each_line([&](const Json& line) {
      if (!line.is_array()) throw Error("expected a JSON array of token ids");
      std::vector<int32_t> ids;
      for (const Json& id : line) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(tok.vocab_size()))
          throw Error("{} is not a token id of this tokenizer", id.dump());
        ids.push_back(id.get<int32_t>());
      }
      return Json(tok.decode(ids, opt->skip_special)).dump();
    });
  };
}

}  // namespace tachyon::cli
