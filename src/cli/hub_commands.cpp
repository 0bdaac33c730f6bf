// `tachyon pull NAME[@rev] [--include GLOB]... [--exclude GLOB]...`: downloads a model from the
// Hugging Face hub ($HF_ENDPOINT, $HF_TOKEN) into the shared cache (io/hub_download.h).
// `tachyon ls [--json]`: the models in the cache and the aliases.
// `tachyon rm NAME [--yes]`: removes a model's folder from the cache; asks on a terminal, and
// needs --yes otherwise (a script must say so: nothing is asked of a pipe).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "base/error.h"
#include "base/json.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "io/hf_cache.h"
#include "io/hub_download.h"
#include "io/model_resolve.h"

namespace tachyon::cli {

namespace {

std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) bytes /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string human_seconds(double s) {
  if (s < 0 || s > 359999) return "--:--";
  const int t = static_cast<int>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}

// Progress: on a terminal one redrawn bar line (bytes, rate, ETA); otherwise one plain line per
// file event, which logs and CI keep readable.
class PullPrinter {
 public:
  PullPrinter() : tty_(isatty(STDERR_FILENO) != 0), start_(Clock::now()) {}
  void operator()(const io::PullProgress& p) {
    using Event = io::PullProgress::Event;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (p.event == Event::Start) file_start_ = Clock::now();
    if (p.event == Event::Cached) skipped_ += p.file_total;
    const double moved = static_cast<double>(p.done - skipped_);
    const double rate = elapsed > 0 ? moved / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1;
    if (tty_) {
      const int width = 24;
      const int filled = p.total > 0 ? static_cast<int>(width * static_cast<double>(p.done) / static_cast<double>(p.total)) : 0;
      std::string name = p.file.size() > 36 ? "..." + p.file.substr(p.file.size() - 33) : p.file;
      std::fprintf(stderr, "\r\033[K[%d/%d] %-36s [%s%s] %s / %s  %s/s  ETA %s", p.file_index, p.num_files, name.c_str(),
                   std::string(static_cast<size_t>(filled), '#').c_str(), std::string(static_cast<size_t>(width - filled), '.').c_str(),
                   human_bytes(static_cast<double>(p.done)).c_str(), human_bytes(static_cast<double>(p.total)).c_str(),
                   human_bytes(rate).c_str(), human_seconds(eta).c_str());
      if (p.event == Event::Retry) std::fprintf(stderr, "\n  retrying %s: %s\n", p.file.c_str(), p.note.c_str());
      std::fflush(stderr);
      return;
    }
    switch (p.event) {
      case Event::Start:
        std::fprintf(stderr, "[%d/%d] %s: downloading %s\n", p.file_index, p.num_files, p.file.c_str(),
                     human_bytes(static_cast<double>(p.file_total)).c_str());
        break;
      case Event::Cached:
        std::fprintf(stderr, "[%d/%d] %s: already in the cache\n", p.file_index, p.num_files, p.file.c_str());
        break;
      case Event::Retry:
        std::fprintf(stderr, "[%d/%d] %s: interrupted at %s (%s), resuming\n", p.file_index, p.num_files, p.file.c_str(),
                     human_bytes(static_cast<double>(p.file_done)).c_str(), p.note.c_str());
        break;
      case Event::Done: {
        const double secs = std::chrono::duration<double>(Clock::now() - file_start_).count();
        std::fprintf(stderr, "[%d/%d] %s: done, %s in %.1f s (%s/s); %s of %s in all, ETA %s\n", p.file_index, p.num_files,
                     p.file.c_str(), human_bytes(static_cast<double>(p.file_done)).c_str(), secs,
                     human_bytes(secs > 0 ? static_cast<double>(p.file_done) / secs : 0).c_str(),
                     human_bytes(static_cast<double>(p.done)).c_str(), human_bytes(static_cast<double>(p.total)).c_str(),
                     human_seconds(eta).c_str());
        break;
      }
      default:
        break;
    }
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool tty_;
  Clock::time_point start_, file_start_;
  int64_t skipped_ = 0;
};

}  // namespace

io::RepoRef hub_repo_of(const std::string& name, const char* verb) {
  const auto aliases = io::load_aliases("");
  const size_t at = name.find('@');
  if (const io::ModelAlias* a = io::find_alias(aliases, name.substr(0, at))) {
    auto ref = io::parse_repo_ref(a->target);
    if (!ref || !io::looks_like_repo_id(a->target))
      throw Error("{}: alias '{}' names {}, not a hub repository", verb, a->name, a->target);
    if (at != std::string::npos) ref->revision = name.substr(at + 1), ref->revision_given = true;
    return *ref;
  }
  auto ref = io::parse_repo_ref(name);
  if (!ref || !io::looks_like_repo_id(name)) {
    std::string hint;
    if (auto close = io::closest_alias(aliases, name)) hint = fmt::format(" Did you mean the alias '{}'?", *close);
    throw Error("{}: '{}' is neither a hub id (org/name[@revision]) nor an alias (tachyon ls lists them).{}", verb, name,
                hint);
  }
  return *ref;
}


Command add_pull_command(CLI::App& app) {
  struct Options {
    std::string name;
    std::vector<std::string> include, exclude;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("pull", "Download a model from the Hugging Face hub into its shared cache");
  cmd->add_option("name", opt->name, "Hub id org/name[@revision] or an alias (tachyon ls)")->required();
  cmd->add_option("--include", opt->include,
                  "Also fetch files matching this glob ('*' crosses '/'; e.g. '*Q4_K_M.gguf'); repeatable");
  cmd->add_option("--exclude", opt->exclude, "Skip files matching this glob; repeatable");
  cmd->footer("By default: config.json, generation_config.json, tokenizer and chat-template files, *.safetensors\n"
              "and their index (and the same in drafter/). Files go to the Hugging Face cache ($HF_HUB_CACHE, else\n"
              "$HF_HOME/hub, else ~/.cache/huggingface/hub) exactly as huggingface_hub stores them, resumable, each\n"
              "checked against the hub's sha256 / size. $HF_ENDPOINT picks the hub (default https://huggingface.co);\n"
              "$HF_TOKEN (else the token file of `huggingface-cli login`) is sent for private and gated repositories.\n"
              "Then: tachyon serve NAME.\n");
  return [opt] {
    const io::RepoRef ref = hub_repo_of(opt->name, "pull");
    io::PullOptions options;
    options.include = opt->include;
    options.exclude = opt->exclude;
    PullPrinter printer;
    options.on_progress = [&](const io::PullProgress& p) { printer(p); };
    std::fprintf(stderr, "pulling %s@%s into %s\n", ref.repo_id.c_str(), ref.revision.c_str(), io::hf_hub_cache_dir().c_str());
    io::PullResult r;
    try {
      r = io::pull_model(ref, options);
    } catch (...) {
      printer.finish();
      throw;
    }
    printer.finish();
    std::fprintf(stderr, "%s@%s: commit %s, %d files (%d downloaded, %s), %s\n", r.repo_id.c_str(), r.revision.c_str(),
                 r.commit.c_str(), r.num_files, r.num_downloaded, human_bytes(static_cast<double>(r.bytes_downloaded)).c_str(),
                 r.snapshot_dir.c_str());
    std::printf("tachyon serve %s\n", opt->name.c_str());
    return 0;
  };
}

Command add_ls_command(CLI::App& app) {
  struct Options {
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("ls", "List the models in the Hugging Face cache and the model aliases");
  cmd->add_flag("--json", opt->json, "Machine-readable output");
  return [opt] {
    const std::string cache = io::hf_hub_cache_dir();
    const auto repos = io::list_cached_models(cache);
    const auto aliases = io::load_aliases("");
    Json out = {{"cache", cache}, {"alias_file", io::user_alias_file()}, {"models", Json::array()}, {"aliases", Json::array()}};
    for (const auto& r : repos) {
      Json refs = Json::object();
      for (const auto& [name, commit] : r.refs) refs[name] = commit;
      out["models"].push_back({{"name", r.repo_id}, {"refs", refs}, {"snapshots", r.snapshots},
                               {"size_on_disk", r.size_on_disk}, {"path", r.path}});
    }
    for (const auto& a : aliases) {
      bool pulled = a.target == io::kDemoTarget;
      if (auto ref = io::parse_repo_ref(a.target); ref && io::looks_like_repo_id(a.target))
        pulled = io::find_cached_snapshot(cache, ref->repo_id, ref->revision).has_value();
      else if (a.target != io::kDemoTarget)
        pulled = std::filesystem::exists(a.target);
      out["aliases"].push_back({{"name", a.name}, {"model", a.target == io::kDemoTarget ? default_model_dir() : a.target},
                                {"available", pulled}, {"drafter", a.defaults.drafter}, {"kv_format", a.defaults.kv_format},
                                {"description", a.description}, {"origin", a.origin}});
    }
    if (opt->json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::printf("Models in %s\n", cache.c_str());
    if (repos.empty()) std::printf("  (none; tachyon pull NAME downloads one)\n");
    else std::printf("  %-44s %-24s %10s\n", "NAME", "REVISION", "SIZE");
    for (const auto& r : repos) {
      std::string revs;
      for (const auto& [name, commit] : r.refs) revs += fmt::format("{}{} {}", revs.empty() ? "" : ", ", name, commit.substr(0, 8));
      for (const auto& s : r.snapshots) {
        bool named = false;
        for (const auto& [name, commit] : r.refs) named |= commit == s;
        if (!named) revs += fmt::format("{}{}", revs.empty() ? "" : ", ", s.substr(0, 8));
      }
      std::printf("  %-44s %-24s %10s\n", r.repo_id.c_str(), revs.empty() ? "-" : revs.c_str(),
                  human_bytes(static_cast<double>(r.size_on_disk)).c_str());
    }
    std::printf("\nAliases (built-in; yours in %s)\n  %-20s %-36s %-9s %-8s %-6s\n", io::user_alias_file().c_str(), "NAME",
                "MODEL", "HERE", "DRAFTER", "KV");
    for (const auto& a : out["aliases"])
      std::printf("  %-20s %-36s %-9s %-8s %-6s%s\n", a["name"].get<std::string>().c_str(),
                  (a["origin"] == "built-in" && a["model"] == default_model_dir() ? std::string("(embedded)")
                                                                                   : a["model"].get<std::string>())
                      .c_str(),
                  a["available"].get<bool>() ? "yes" : "no", a["drafter"].get<std::string>().c_str(),
                  a["kv_format"].get<std::string>().c_str(),
                  a["origin"] == "built-in" ? "" : ("  (" + a["origin"].get<std::string>() + ")").c_str());
    return 0;
  };
}

Command add_rm_command(CLI::App& app) {
  struct Options {
    std::string name;
    bool yes = false;
  };
  auto opt = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("rm", "Remove a model from the Hugging Face cache");
  cmd->add_option("name", opt->name, "Hub id org/name or an alias")->required();
  cmd->add_flag("--yes,-y", opt->yes, "Do not ask (required when stdin is not a terminal)");
  return [opt] {
    const io::RepoRef ref = hub_repo_of(opt->name, "rm");
    if (ref.revision_given)
      throw Error("rm: removes a whole repository; give {} without @{} (other revisions share its files)", ref.repo_id,
                  ref.revision);
    const std::string cache = io::hf_hub_cache_dir();
    const auto repos = io::list_cached_models(cache);
    auto it = std::find_if(repos.begin(), repos.end(), [&](const io::CachedRepo& r) { return r.repo_id == ref.repo_id; });
    if (it == repos.end()) throw Error("rm: {} is not in the Hugging Face cache {}", ref.repo_id, cache);
    if (!opt->yes) {
      if (!isatty(STDIN_FILENO))
        throw Error("rm: stdin is not a terminal, so nothing can be asked: give --yes to remove {} ({}, {})", ref.repo_id,
                    human_bytes(static_cast<double>(it->size_on_disk)), it->path);
      std::fprintf(stderr, "Remove %s (%s, %s)? [y/N] ", ref.repo_id.c_str(),
                   human_bytes(static_cast<double>(it->size_on_disk)).c_str(), it->path.c_str());
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::fprintf(stderr, "not removed\n");
        return 1;
      }
    }
    const int64_t freed = io::remove_cached_model(cache, ref.repo_id);
    std::fprintf(stderr, "removed %s (%s freed)\n", ref.repo_id.c_str(), human_bytes(static_cast<double>(freed)).c_str());
    return 0;
  };
}

}  // namespace tachyon::cli
