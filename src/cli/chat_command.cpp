// `tachyon chat [MODEL]`: an interactive chat in the terminal, in-process. Each turn renders the
// whole conversation with the model's own chat template and streams the answer through the same
// engine `run` and the server use (prefix caching makes the repeated history cheap); reasoning is
// split off by the model family's output parser and shown dimmed.
//
// Ctrl-C while an answer streams is SIGINT (the terminal is in its normal mode then): it cancels
// that request and the prompt comes back. At the prompt, libedit (BSD-licensed; when the build
// found it, stdin is a terminal and TERM is not "dumb") gives line editing and history and reads
// Ctrl-C as a key: it clears a typed line, and quits on an empty one. Otherwise the terminal's
// own line discipline edits the line, read with read(2) so that Ctrl-C arrives as EINTR and quits.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#ifdef TACHYON_HAVE_LIBEDIT
#include <histedit.h>
#endif

#include "base/error.h"
#include "chat/chat_template.h"
#include "chat/parsers/output_parser.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/generate.h"
#include "cli/model_text.h"

namespace tachyon::cli {

namespace {

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

// SIGINT goes to one thread that does not block it; the engine and kernel threads inherit a
// blocked mask (block_sigint before they start), so it always lands on the main thread, whose
// read(2) then returns EINTR.
void block_sigint(bool block) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

enum class Input { Line, End, Interrupted };

constexpr const char* kPrompt = ">>> ";

// One line from stdin without its newline. Bytes after the newline stay buffered for the next call.
Input read_stdin_line(std::string& line) {
  static std::string pending;
  line.clear();
  for (;;) {
    if (const size_t nl = pending.find('\n'); nl != std::string::npos) {
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return Input::Line;
    }
    char buf[4096];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      if (!g_interrupted) continue;
      pending.clear();
      return Input::Interrupted;
    }
    if (n <= 0) {  // end of input: a last line without a newline still counts
      line = std::move(pending);
      pending.clear();
      return line.empty() ? Input::End : Input::Line;
    }
    pending.append(buf, static_cast<size_t>(n));
  }
}

// Prompts and reads one line: through libedit on a terminal where the build has it, else stdin.
class LineReader {
 public:
  LineReader() {
#ifdef TACHYON_HAVE_LIBEDIT
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return;
    if (const char* term = std::getenv("TERM"); term && std::string_view(term) == "dumb") return;  // no cursor moves
    el_ = el_init("tachyon", stdin, stdout, stderr);
    history_ = history_init();
    HistEvent event;
    history(history_, &event, H_SETSIZE, 1000);
    el_set(el_, EL_EDITOR, "emacs");
    el_set(el_, EL_SIGNAL, 1);  // follows window resizes
    el_set(el_, EL_PROMPT, +[](EditLine*) { return const_cast<char*>(kPrompt); });
    el_set(el_, EL_HIST, history, history_);
    el_set(el_, EL_SETTY, "-d", "-isig", nullptr);  // while editing, Ctrl-C is a key, not SIGINT
    el_set(el_, EL_ADDFN, "tachyon-ctrl-c", "Clear the line, or quit on an empty one", on_ctrl_c);
    el_set(el_, EL_BIND, "^C", "tachyon-ctrl-c", nullptr);
#endif
  }
  ~LineReader() {
#ifdef TACHYON_HAVE_LIBEDIT
    if (el_) el_end(el_);
    if (history_) history_end(history_);
#endif
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  Input read(std::string& line, const char* prompt_style, const char* reset_style) {
    // A Ctrl-C pressed as the last answer ended found nothing left to stop: it does not count here.
    g_interrupted = 0;
#ifdef TACHYON_HAVE_LIBEDIT
    while (el_) {
      ctrl_c_ = CtrlC::None;
      int count = 0;
      const char* text = el_gets(el_, &count);
      if (ctrl_c_ == CtrlC::Clear) continue;
      if (ctrl_c_ == CtrlC::Quit) return Input::Interrupted;
      if (!text || count <= 0) return Input::End;
      line.assign(text, static_cast<size_t>(count));
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      HistEvent event;
      if (line.find_first_not_of(" \t") != std::string::npos) history(history_, &event, H_ENTER, line.c_str());
      return Input::Line;
    }
#endif
    std::printf("%s%s%s", prompt_style, kPrompt, reset_style);
    std::fflush(stdout);
    return read_stdin_line(line);
  }

 private:
#ifdef TACHYON_HAVE_LIBEDIT
  enum class CtrlC { None, Clear, Quit };
  static inline CtrlC ctrl_c_ = CtrlC::None;
  static unsigned char on_ctrl_c(EditLine* el, int) {
    const LineInfo* typed = el_line(el);
    ctrl_c_ = typed->lastchar == typed->buffer ? CtrlC::Quit : CtrlC::Clear;
    return ctrl_c_ == CtrlC::Quit ? CC_EOF : CC_NEWLINE;
  }
  EditLine* el_ = nullptr;
  History* history_ = nullptr;
#endif
};

struct ChatOptions {
  std::string model_dir, system;
  int max_tokens = 0;  // 0: the rest of the context
  bool no_think = false;
  GenerateOptions generate;
};

constexpr const char* kHelp =
    "  /system TEXT   set the system prompt (empty: none); the conversation is kept\n"
    "  /reset         forget the conversation (the system prompt stays)\n"
    "  /help          this list\n"
    "  /exit          quit (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "  Ctrl-C while an answer streams stops it.\n";

// Escape codes only on a terminal, so piped output stays plain text.
struct Style {
  bool on;
  const char* dim() const { return on ? "\x1b[2m" : ""; }
  const char* bold() const { return on ? "\x1b[1m" : ""; }
  const char* reset() const { return on ? "\x1b[0m" : ""; }
};

// The model's chat template (a folder's tokenizer_config.json, a GGUF file's metadata).
chat::ChatTemplate chat_template_of(const std::string& model) {
  ModelText text = load_model_text(model, /*need_tokenizer=*/false);
  if (!text.chat_template) throw Error("{}", text.chat_template_error);
  return *text.chat_template;
}

class ChatLoop {
 public:
  ChatLoop(const ChatOptions& opt, Generator& gen, const io::ModelConfig& config)
      : opt_(opt), gen_(gen), template_(chat_template_of(opt.model_dir)),
        parser_(chat::detect_parser(template_.source(), config.model_type)), style_{isatty(STDOUT_FILENO) != 0} {
    // Without tools there are no tool calls to find; reasoning is still split off.
    if (parser_.family != chat::ParserFamily::kHarmony) parser_.family = chat::ParserFamily::kPlain;
    if (opt.no_think) extra_["enable_thinking"] = false;
    system_ = opt.system;
  }

  int run() {
    std::fprintf(stderr, "tachyon chat: %s (/help for commands; Ctrl-C stops an answer, Ctrl-D quits)\n",
                 opt_.model_dir.c_str());
    std::string line;
    for (;;) {
      const Input input = reader_.read(line, style_.bold(), style_.reset());
      if (input != Input::Line) {
        std::printf("\n");
        return 0;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (line[0] == '/') {
        if (!command(line)) return 0;
        continue;
      }
      answer(line);
    }
  }

 private:
  // False: quit.
  bool command(const std::string& line) {
    const size_t space = line.find(' ');
    const std::string name = line.substr(0, space);
    const size_t arg_start = line.find_first_not_of(' ', space);
    const std::string arg = arg_start == std::string::npos ? "" : line.substr(arg_start);
    if (name == "/exit" || name == "/quit" || name == "/bye") return false;
    if (name == "/reset") {
      history_ = chat::OrderedJson::array();
      std::printf("(conversation cleared)\n");
    } else if (name == "/system") {
      system_ = arg;
      std::printf(system_.empty() ? "(no system prompt)\n" : "(system prompt set)\n");
    } else if (name == "/help") {
      std::printf("%s", kHelp);
    } else {
      std::printf("unknown command %s; /help lists them\n", name.c_str());
    }
    return true;
  }

  void answer(const std::string& user_text) {
    history_.push_back({{"role", "user"}, {"content", user_text}});
    chat::OrderedJson messages = chat::OrderedJson::array();
    if (!system_.empty()) messages.push_back({{"role", "system"}, {"content", system_}});
    for (const auto& m : history_) messages.push_back(m);
    std::string content;
    std::string stop_reason;
    try {
      const std::string prompt = template_.render(messages, chat::OrderedJson(), true, extra_);
      const std::vector<int32_t> ids = gen_.encode(prompt, /*add_special_tokens=*/false);
      const int room = gen_.max_context() - static_cast<int>(ids.size());
      if (room < 2) throw Error("the conversation fills the model's context of {} tokens; /reset", gen_.max_context());
      chat::ParserOptions parser = parser_;
      parser.starts_in_reasoning = chat::prompt_opens_reasoning(prompt);
      auto output = chat::make_output_parser(parser);
      bool dimmed = false;
      auto show = [&](const chat::ParseDelta& d) {
        if (!d.reasoning_content.empty()) {
          if (!dimmed) std::fputs(style_.dim(), stdout);
          dimmed = true;
          std::fputs(d.reasoning_content.c_str(), stdout);
        }
        if (!d.content.empty()) {
          if (dimmed) std::fputs(style_.reset(), stdout);
          dimmed = false;
          std::fputs(d.content.c_str(), stdout);
          content += d.content;
        }
        std::fflush(stdout);
      };
      using Clock = std::chrono::steady_clock;
      std::optional<Clock::time_point> first;
      g_interrupted = 0;
      const int max_tokens = opt_.max_tokens > 0 ? std::min(opt_.max_tokens, room) : room;
      GenerateResult result = gen_.generate(
          ids, opt_.generate.sampling, max_tokens,
          [&](int32_t, const std::string& text) {
            if (!first) first = Clock::now();
            show(output->feed(text));
          },
          [] { return g_interrupted != 0; });
      stop_reason = result.stop_reason;
      if (stop_reason != "cancelled") show(output->finish());
      if (dimmed) std::fputs(style_.reset(), stdout);
      const double decode = std::chrono::duration<double>(Clock::now() - first.value_or(Clock::now())).count();
      const size_t n = result.tokens.size();
      std::printf("\n%s[%s%zu prompt + %zu tokens, %.1f tok/s", style_.dim(),
                  stop_reason == "cancelled" ? "stopped; " : "", ids.size(), n,
                  n > 1 && decode > 0 ? static_cast<double>(n - 1) / decode : 0.0);
      if (!result.spec.method.empty())
        std::printf(", %s: %d/%d drafts accepted, %.2f tokens/step", result.spec.method.c_str(),
                    result.spec.num_accepted, result.spec.num_drafted, result.spec.mean_accepted_length());
      std::printf("]%s\n", style_.reset());
    } catch (const Error& e) {
      std::printf("%s\nerror: %s\n", style_.reset(), e.what());
      history_.erase(history_.end() - 1);
      return;
    }
    g_interrupted = 0;
    // A stopped answer stays in the conversation as far as it got, as it stays on the screen;
    // one stopped before any text leaves no turn at all.
    if (stop_reason == "cancelled" && content.empty()) history_.erase(history_.end() - 1);
    else history_.push_back({{"role", "assistant"}, {"content", content}});
  }

  const ChatOptions& opt_;
  Generator& gen_;
  chat::ChatTemplate template_;
  chat::ParserOptions parser_;
  Style style_;
  LineReader reader_;
  std::string system_;
  chat::OrderedJson extra_ = chat::OrderedJson::object();
  chat::OrderedJson history_ = chat::OrderedJson::array();
};

}  // namespace

Command add_chat_command(CLI::App& app) {
  auto opt = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model in the terminal (default: the embedded demo model)");
  cmd->add_option("model", opt->model_dir, "Model: a folder, a hub id org/name[@rev] in the HF cache (tachyon pull), "
                                           "or an alias (tachyon ls) (default: the embedded tachyon-demo)");
  cmd->add_option("--system", opt->system, "System prompt");
  cmd->add_flag("--no-think", opt->no_think, "Ask the template to skip reasoning (enable_thinking=false)");
  cmd->add_option("--max-tokens,-n", opt->max_tokens, "Tokens per answer at most (default: the rest of the context)")
      ->check(CLI::PositiveNumber);
  opt->generate.add_to(*cmd);
  return [opt, cmd] {
    const io::ResolvedModel resolved = resolve_model_arg(opt->model_dir);
    opt->model_dir = resolved.path;
    if (resolved.alias) opt->generate.spec.alias_method = resolved.alias->defaults.drafter;
    block_sigint(true);  // before any thread starts (see block_sigint)
    TerminalModel loaded = load_terminal_model(opt->model_dir, opt->generate, *cmd);
    if (!loaded.generator->has_tokenizer()) throw Error("{}: no tokenizer.json; chat needs one", opt->model_dir);
    ChatLoop chat(*opt, *loaded.generator, loaded.model->config());

    struct sigaction action = {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a blocked read(2) returns EINTR
    sigaction(SIGINT, &action, nullptr);
    block_sigint(false);
    if (g_interrupted) return 130;  // Ctrl-C while the model loaded
    return chat.run();
  };
}

}  // namespace tachyon::cli
