// Speculative decoding through the engine, per method against plain decoding, on the same
// workloads as bench/spec/run_spec_bench.sh (the prompts pre-tokenized in bench/spec/prompts/*.ids)
// but without the CLI, so it also runs where only the core modules build (the GPU machine).
// Greedy, so every method must produce plain decoding's tokens (the "= plain" column: "yes", or
// the first differing position; the exit code is 1 if any run differs). Decode tok/s = tokens
// after the first over the time after the first; 2 s of plain
// decoding warm the process up before anything is timed, then per method one warm-up
// run discarded, median of --runs; every run of a method is served by one engine (as in a
// server), except the suffix drafter's: a fresh drafter and engine per run (its trie would
// otherwise learn the answer). tachyon serve's defaults otherwise (k = 4; prompt lookup and suffix
// trees k = 6; auto-k, gates on). Plain method names draft chains; a "-tree" suffix (ngram-tree,
// ...) drafts trees of --tree-nodes nodes (default -1: the engine's automatic choice, the default
// of tachyon run/serve).
// "dflash": the DFlash block drafter in MODEL/dflash (k = its block - 1 unless --k). "choice":
// one engine for the whole invocation holding the ngram, draft, mtp and dflash drafters, each
// request drafting with the one the engine chooses for its kind of text (spec/drafter_choice.h),
// as `tachyon serve` does by default; it serves --choice-warmup untimed requests of each workload
// first (a server that has seen the kind before: the choice tries each drafter on a kind before it
// judges), and its rows name the drafter the median run used. The suffix drafter is left out of
// it: over the repeated identical requests of a bench its trie would learn the answer.
// "merged": one tree from several drafters (spec/merged_drafter.h; --merged names them, default
// ngram,draft: prompt lookup always, the draft model where its measured gain pays for its
// drafting), pruned by the drafter from the measured verify cost; "choice" holds it too.
// --grammar json_object | tool_call=NAME,NAME...: every request (plain ones too) is constrained
// as the server constrains response_format json_object or a forced tool call (Hermes syntax, the
// name one of NAMEs); the table then also counts the drafts the grammar cut before verification.
// A PROMPT.txt is tokenized with the model's tokenizer (special tokens as written).
// TACHYON_BENCH_CPU_TIME=1 (with TACHYON_THREADS=1) times decoding in process CPU time instead of
// wall time: the work per token, on a shared machine (see decode_clock).
// Usage: spec_bench [--device cpu|cuda] [--tokens 384] [--runs 5] [--tree-nodes 16] [--k 4] [--fixed-k]
//                   [--no-gates] [--draft-vocabulary N] [--exact-draft-weights] [--paired]
//                   [--grammar json_object|tool_call=a,b] [--methods none,ngram,ngram-tree,...]
//                   [--choice-warmup 12] [--merged ngram,draft,mtp] [--merged-k N]
//                   MODEL_DIR PROMPT.ids|PROMPT.txt...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/backend.h"
#ifdef TACHYON_HAS_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include "model/model.h"
#include "model/dflash_head.h"
#include "model/mtp_head.h"
#include "spec/dflash.h"
#include "spec/draft_model.h"
#include "spec/merged_drafter.h"
#include "spec/mtp.h"
#include "spec/ngram.h"
#include "spec/suffix.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

using namespace tachyon;
using Clock = std::chrono::steady_clock;

namespace {

struct RunResult {
  double decode_tok_s = 0;
  std::vector<int32_t> tokens;
  engine::SpecUsage spec;
  engine::EngineStats stats;
};

// "a / b" in ms, or "-" when b is 0.
std::string per_step_ms(double seconds, uint64_t steps) {
  if (steps == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds / static_cast<double>(steps) * 1e3);
  return buf;
}

// --k N: num_speculative_tokens (default: the engine's); --fixed-k: auto-k off;
// --draft-vocabulary N: the model drafters score ids [0, N) (-1: their default, 0: all);
// --no-gates: speculation is never switched off (acceptance measured over every step).
struct SpecOptions {
  int32_t k = 0;
  bool fixed_k = false;
  bool gates = true;
  int64_t draft_vocabulary = -1;
  bool exact_draft_weights = false;  // model drafters as stored (default: draft precision, int8 on the CPU)
  // --paired: each timed run of a method follows a plain run, and the ratio is the median of
  // the runs' ratios to the plain run just before: on a noisy host (the 2-core CI VM's plain
  // step drifted 0.84-1.76 ms within one invocation) ratios of medians taken minutes apart
  // measure the host as much as the method.
  bool paired = false;
  // --grammar: the requests' constraint, and what the engine needs for it.
  std::shared_ptr<const sampling::Grammar> grammar;
  std::shared_ptr<const sampling::TokenVocabulary> vocabulary;
  std::vector<int32_t> stop_token_ids;
};

// --grammar's value: json_object, or tool_call=NAME,NAME... (a forced call in Hermes syntax,
// as src/server/generation.cpp builds it).
sampling::Grammar parse_grammar(const std::string& spec) {
  sampling::Grammar g;
  if (spec == "json_object") return g.then_json_object();
  if (spec.starts_with("tool_call=")) {
    std::vector<std::string> alternatives;
    const std::string names = spec.substr(10);
    for (size_t a = 0, b; a < names.size(); a = b + 1) {
      b = names.find(',', a);
      if (b == std::string::npos) b = names.size();
      alternatives.push_back(names.substr(a, b - a) + "\", \"arguments\": ");
    }
    g.then_literal("<tool_call>\n{\"name\": \"").then_choice(std::move(alternatives));
    return g.then_json_object().then_literal("}\n</tool_call>");
  }
  throw std::runtime_error("--grammar: expected json_object or tool_call=NAME,..., got '" + spec + "'");
}

engine::EngineConfig engine_config(spec::Drafter* drafter, bool model_free, int32_t tree_nodes,
                                   const SpecOptions& options) {
  // A fixed pool: the plain and the speculative engine live side by side, and a pool sized from
  // the GPU (0.90 of it) would leave the second none.
  engine::EngineConfig config{.max_concurrent = 1, .kv_memory_bytes = int64_t{1} << 30};
  config.drafter = drafter;
  if (options.k > 0) config.num_speculative_tokens = options.k;
  else if (model_free) config.num_speculative_tokens = spec::kModelFreeMaxDrafts;  // as tachyon serve's default
  config.auto_k = !options.fixed_k;
  config.gates = options.gates;
  config.max_tree_nodes = tree_nodes;
  config.model_free_drafter = model_free;
  config.vocabulary = options.vocabulary;
  return config;
}

// One request through `engine`; the step statistics are this request's (the engine's grow).
// Seconds of the clock decode tok/s are timed with: wall time, or with TACHYON_BENCH_CPU_TIME=1
// the process's CPU time (with TACHYON_THREADS=1: the engine thread's work, on a machine shared
// with other jobs; the engine's own step timings, which its gates, auto-k and choice act on,
// stay wall time).
double decode_clock() {
  static const bool cpu_time = std::getenv("TACHYON_BENCH_CPU_TIME") != nullptr;
  if (cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

RunResult generate(engine::Engine& engine, const std::vector<int32_t>& prompt, int32_t tokens,
                   const SpecOptions& options) {
  const engine::EngineStats before = engine.stats();
  engine::GenerationRequest request;
  request.prompt = prompt;
  request.sampling.temperature = 0;
  request.max_tokens = tokens;
  request.grammar = options.grammar;
  if (options.grammar) request.stop_token_ids = options.stop_token_ids;
  auto stream = engine.submit(request);
  double first = 0;
  size_t n = 0;
  RunResult r;
  for (;;) {
    auto out = stream->next(std::chrono::seconds(600));
    if (!out) throw std::runtime_error("the engine stalled");
    if (n == 0 && !out->tokens.empty()) first = decode_clock();
    n += out->tokens.size();
    r.tokens.insert(r.tokens.end(), out->tokens.begin(), out->tokens.end());
    if (out->finish != engine::FinishReason::None) {
      r.spec = out->spec;
      r.stats = engine.stats();
      break;
    }
  }
  const double decode = decode_clock() - first;
  r.decode_tok_s = n > 1 && decode > 0 ? static_cast<double>(n - 1) / decode : 0;
  r.stats.spec_step_seconds -= before.spec_step_seconds;
  r.stats.spec_draft_seconds -= before.spec_draft_seconds;
  r.stats.plain_step_seconds -= before.plain_step_seconds;
  r.stats.spec_decode_steps -= before.spec_decode_steps;
  r.stats.plain_decode_steps -= before.plain_decode_steps;
  r.stats.spec_grammar_pruned_drafts -= before.spec_grammar_pruned_drafts;
  return r;
}

RunResult generate(model::Model& model, spec::Drafter* drafter, bool model_free, int32_t tree_nodes,
                   const std::vector<int32_t>& prompt, int32_t tokens, const SpecOptions& options = {}) {
  engine::Engine engine(model, engine_config(drafter, model_free, tree_nodes, options));
  return generate(engine, prompt, tokens, options);
}

std::vector<int32_t> read_ids(const std::string& path, const std::optional<tokenizer::Tokenizer>& tok) {
  std::ifstream in(path);
  if (path.ends_with(".txt")) {
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return tok->encode(text, /*add_special_tokens=*/false);
  }
  std::vector<int32_t> ids;
  for (int32_t id; in >> id;) ids.push_back(id);
  if (ids.empty()) throw std::runtime_error("no token ids in " + path);
  return ids;
}

// The CUDA backend's graph counters (replays, captures, direct issues) and host seconds at
// host reads (issuing, waiting), or "" elsewhere.
std::string graph_counters(kernels::Backend& backend) {
#ifdef TACHYON_HAS_CUDA
  if (backend.name().starts_with("cuda")) {
    const auto c = kernels::cuda_graph_counters(backend);
    char buf[160];
    std::snprintf(buf, sizeof buf, ", issue %.3f s, wait %.3f s (flushes: replay %.3f s, capture %.3f s, direct %.3f s)",
                  c.flush_seconds, c.wait_seconds, c.replay_seconds, c.capture_seconds, c.direct_seconds);
    return "replays " + std::to_string(c.replays) + ", captures " + std::to_string(c.captures) + ", direct " +
           std::to_string(c.direct) + buf;
  }
#endif
  (void)backend;
  return "";
}

// Graph captures and direct issues so far (CUDA), for the per-run counts: a run that still
// captures or issues directly pays for shapes the earlier runs did not settle.
std::pair<uint64_t, uint64_t> captures_and_direct(kernels::Backend& backend) {
#ifdef TACHYON_HAS_CUDA
  if (backend.name().starts_with("cuda")) {
    const auto c = kernels::cuda_graph_counters(backend);
    return {c.captures, c.direct};
  }
#endif
  (void)backend;
  return {0, 0};
}

}  // namespace

int main(int argc, char** argv) {
  std::string device = kernels::default_device(), dir;
  int32_t tokens = 384;
  int runs = 5;
  std::vector<std::string> prompt_files;
  int32_t tree_nodes = -1;  // auto (the engine default)
  SpecOptions options;
  std::string grammar;
  std::vector<std::string> methods = {"none",  "ngram",      "ngram-tree", "suffix", "suffix-tree",
                                      "draft", "draft-tree", "mtp",        "mtp-tree", "dflash", "choice"};
  int choice_warmup = 12;
  std::vector<std::string> merged_members = {"ngram", "draft"};
  int32_t merged_k = 0;  // the merged tree's depth (0: --k's); its model drafters keep --k
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--tree-nodes") && i + 1 < argc) tree_nodes = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--k") && i + 1 < argc) options.k = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--fixed-k")) options.fixed_k = true;
    else if (!std::strcmp(argv[i], "--no-gates")) options.gates = false;
    else if (!std::strcmp(argv[i], "--paired")) options.paired = true;
    else if (!std::strcmp(argv[i], "--exact-draft-weights")) options.exact_draft_weights = true;
    else if (!std::strcmp(argv[i], "--draft-vocabulary") && i + 1 < argc) options.draft_vocabulary = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--grammar") && i + 1 < argc) grammar = argv[++i];
    else if (!std::strcmp(argv[i], "--choice-warmup") && i + 1 < argc) choice_warmup = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--merged-k") && i + 1 < argc) merged_k = std::atoi(argv[++i]);
    else if ((!std::strcmp(argv[i], "--methods") || !std::strcmp(argv[i], "--merged")) && i + 1 < argc) {
      std::vector<std::string>& out = !std::strcmp(argv[i], "--methods") ? methods : merged_members;
      out.clear();
      std::string list = argv[++i];
      for (size_t a = 0, b; a <= list.size(); a = b + 1) {
        b = list.find(',', a);
        if (b == std::string::npos) b = list.size();
        if (b > a) out.push_back(list.substr(a, b - a));
      }
    }
    else if (dir.empty()) dir = argv[i];
    else prompt_files.push_back(argv[i]);
  }
  if (dir.empty() || prompt_files.empty()) {
    std::fprintf(stderr, "usage: spec_bench [--device cpu|cuda] [--tokens N] [--runs N] [--tree-nodes N] [--k N] [--fixed-k] [--no-gates] [--draft-vocabulary N] [--exact-draft-weights] [--paired] [--grammar json_object|tool_call=a,b] [--methods a,b] MODEL_DIR PROMPT.ids|PROMPT.txt...\n");
    return 2;
  }
  auto backend = kernels::make_backend(device);
  auto model = model::load_model(dir, *backend);
  std::optional<tokenizer::Tokenizer> tok;  // for --grammar and .txt prompts
  const bool choice = std::find(methods.begin(), methods.end(), "choice") != methods.end();
  if (!grammar.empty() || choice || std::any_of(prompt_files.begin(), prompt_files.end(),
                                                [](const std::string& f) { return f.ends_with(".txt"); }))
    tok = tokenizer::Tokenizer::from_model_dir(dir);
  if (!grammar.empty()) {
    options.grammar = std::make_shared<const sampling::Grammar>(parse_grammar(grammar));
    options.vocabulary = std::make_shared<const sampling::TokenVocabulary>(tokenizer::token_byte_strings(*tok));
    for (const char* end : {"<|endoftext|>", "<|im_end|>"})
      if (const auto id = tok->token_to_id(end)) options.stop_token_ids.push_back(*id);
  }
  bool mismatches = false;
  const bool has_drafter = std::filesystem::exists(dir + "/drafter/config.json");
  const bool has_dflash = std::filesystem::exists(dir + "/dflash/config.json");
  auto load_dflash = [&] {
    const kernels::DraftWeights scope(*backend, !options.exact_draft_weights);  // as tachyon run/serve load it
    return spec::make_dflash_drafter(model::DFlashHead::load(dir + "/dflash", dir, model->config(), *backend), *backend,
                                     {.draft_vocabulary = options.draft_vocabulary});
  };
  auto load_draft_model = [&] {
    return spec::make_draft_model_drafter(dir + "/drafter", dir, *model, *backend,
                                          {.draft_vocabulary = options.draft_vocabulary,
                                           .exact_weights = options.exact_draft_weights});
  };
  auto load_mtp = [&]() -> std::unique_ptr<spec::Drafter> {
    const kernels::DraftWeights scope(*backend, !options.exact_draft_weights);  // as tachyon run/serve load it
    if (auto head = model::MtpHead::load(dir, model->config(), *backend))
      return spec::make_mtp_drafter(std::move(head), *backend, 1024, 16, options.draft_vocabulary);
    return nullptr;
  };
  // "merged" over `drafters` (name -> drafter): the members --merged names, in its order.
  auto make_merged = [&](const std::vector<spec::Drafter*>& drafters) {
    std::vector<spec::MergedMember> members;
    for (const std::string& name : merged_members)
      for (spec::Drafter* d : drafters)
        if (d && d->name() == name) {
          const bool model_free = name == "ngram" || name == "suffix";
          const int32_t depth = options.k > 0 ? options.k : model_free ? spec::kModelFreeMaxDrafts : 4;
          members.push_back({d, !model_free, depth});
        }
    return std::make_unique<spec::MergedDrafter>(std::move(members));
  };
  // "choice": its drafters and engine live for the whole invocation, as in a server.
  std::vector<std::unique_ptr<spec::Drafter>> choice_drafters;
  std::unique_ptr<engine::Engine> choice_engine;
  if (choice) {
    engine::EngineConfig config = engine_config(nullptr, false, tree_nodes, options);
    if (!config.vocabulary)  // the request kinds tell code from prose by the prompt's bytes
      config.vocabulary = std::make_shared<const sampling::TokenVocabulary>(tokenizer::token_byte_strings(*tok));
    const int32_t k = options.k > 0 ? options.k : config.num_speculative_tokens;
    auto add = [&](std::unique_ptr<spec::Drafter> d, bool model_free, int32_t lane_k) {
      if (!d) return;
      config.drafters.push_back({d.get(), model_free, lane_k});
      choice_drafters.push_back(std::move(d));
    };
    add(spec::make_ngram_drafter({}), true, options.k > 0 ? options.k : spec::kModelFreeMaxDrafts);
    if (has_drafter) add(load_draft_model(), false, k);
    add(load_mtp(), false, k);
    if (has_dflash) add(load_dflash(), false, options.k > 0 ? options.k : 7);
    std::vector<spec::Drafter*> held;
    for (const auto& d : choice_drafters) held.push_back(d.get());
    add(make_merged(held), false, merged_k > 0 ? merged_k : k);
    choice_engine = std::make_unique<engine::Engine>(*model, config);
  }
  std::printf("Speculative decoding through the engine, %s, %s, %d new tokens, median of %d after a warm-up%s%s\n\n",
              backend->name().c_str(), dir.c_str(), tokens, runs,
              options.paired ? "; ratio: median of each run's ratio to a plain run just before it" : "",
              grammar.empty() ? "" : ("; constrained: " + grammar).c_str());
  std::printf(
      "| workload | method | decode tok/s | ratio | tokens per verify step | drafts per verify step | gate | ms per spec step "
      "| of which drafting | ms per plain step | = plain |%s\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|%s\n",
      grammar.empty() ? "" : " tokens generated | drafts cut by the grammar |", grammar.empty() ? "" : "---:|---:|");
  // Process warm-up before anything is timed: the first method measured otherwise runs on a
  // cold device (clocks, lazily loaded kernels, allocator), which on the H200 made the first
  // workload's baseline up to 20% slower than the others' and inflated its ratios.
  {
    const auto prompt = read_ids(prompt_files.front(), tok);
    const auto t0 = Clock::now();
    while (std::chrono::duration<double>(Clock::now() - t0).count() < 2.0)
      generate(*model, nullptr, false, 0, prompt, tokens, options);
  }
  for (const auto& file : prompt_files) {
    const auto prompt = read_ids(file, tok);
    const std::string workload = std::filesystem::path(file).stem().string();
    double base = 0;
    engine::Engine plain_engine(*model, engine_config(nullptr, false, 0, options));  // --paired's plain runs
    std::vector<int32_t> plain_tokens = generate(plain_engine, prompt, tokens, options).tokens;
    for (const std::string& method : methods) {
      if (method.starts_with("draft") && !has_drafter) continue;
      if (method.starts_with("dflash") && !has_dflash) continue;
      std::vector<RunResult> results;
      const std::string graphs_before = graph_counters(*backend);
      // Model drafters live as long as a server does: one per method, its per-request state
      // dropped at each request's end (a fresh one per run would re-upload its weights and make
      // a GPU re-capture every graph of its forwards in every run). The suffix trie is fresh
      // per run: it would otherwise learn the answer.
      std::unique_ptr<spec::Drafter> model_drafter;
      std::vector<std::unique_ptr<spec::Drafter>> merged_parts;  // "merged": its members
      if (method.starts_with("draft"))
        model_drafter = load_draft_model();
      else if (method.starts_with("mtp"))
        model_drafter = load_mtp();
      else if (method.starts_with("dflash"))
        model_drafter = load_dflash();
      else if (method == "merged") {
        merged_parts.push_back(spec::make_ngram_drafter({}));
        if (has_drafter) merged_parts.push_back(load_draft_model());
        merged_parts.push_back(load_mtp());
        std::vector<spec::Drafter*> held;
        for (const auto& d : merged_parts) held.push_back(d.get());
        model_drafter = make_merged(held);
      }
      if (method.starts_with("mtp") && !model_drafter) continue;
      std::string per_run;         // "captures+direct" per run, warm-up first
      std::vector<double> ratios;  // --paired: each run's tok/s over the plain run before it
      const bool model_free = method.starts_with("ngram") || method.starts_with("suffix");
      const int32_t nodes = method.ends_with("-tree") || method == "merged" ? tree_nodes : 0;
      // Every request of a method goes through one engine, as in a server (a fresh engine per
      // run put its KV cache at new addresses, which made a GPU capture new graphs in every run:
      // up to 20% of a run's time), except the suffix drafter's: it gets a fresh drafter and
      // engine per run, since its trie would otherwise learn the answer.
      std::unique_ptr<spec::Drafter> stateless;  // prompt lookup keeps nothing between requests
      if (method.starts_with("ngram")) stateless = spec::make_ngram_drafter({});
      std::unique_ptr<engine::Engine> owned;
      engine::Engine* shared = nullptr;
      if (method == "choice") {
        shared = choice_engine.get();
        for (int i = 0; i < choice_warmup; ++i) generate(*shared, prompt, tokens, options);
      } else if (!method.starts_with("suffix")) {
        engine::EngineConfig config =
            engine_config(model_drafter ? model_drafter.get() : stateless.get(), model_free, nodes, options);
        if (method.starts_with("dflash") && options.k == 0) config.num_speculative_tokens = 7;  // its block of 8
        if (method == "merged" && merged_k > 0) config.num_speculative_tokens = merged_k;
        owned = std::make_unique<engine::Engine>(*model, config);
        shared = owned.get();
      }
      for (int r = 0; r <= runs; ++r) {
        const auto before = captures_and_direct(*backend);
        if (std::getenv("TACHYON_GRAPH_TRACE")) std::fprintf(stderr, "graph-trace: %s run %d\n", method.c_str(), r);
        const bool pair = options.paired && method != "none" && r > 0;
        const double plain_tok_s = pair ? generate(plain_engine, prompt, tokens, options).decode_tok_s : 0;
        RunResult result;
        if (shared) {
          result = generate(*shared, prompt, tokens, options);
        } else {
          auto fresh = spec::make_suffix_drafter({});
          result = generate(*model, fresh.get(), true, nodes, prompt, tokens, options);
        }
        if (r > 0) results.push_back(result);  // run 0 is the warm-up
        if (pair && plain_tok_s > 0) ratios.push_back(result.decode_tok_s / plain_tok_s);
        const auto after = captures_and_direct(*backend);
        per_run += " " + std::to_string(after.first - before.first) + "+" + std::to_string(after.second - before.second);
      }
      if (results.empty()) continue;
      // The first position where any run's tokens leave plain decoding's, or -1.
      int64_t differs = -1;
      for (const RunResult& result : results) {
        const auto [a, b] = std::mismatch(result.tokens.begin(), result.tokens.end(), plain_tokens.begin(),
                                          plain_tokens.end());
        if (a != result.tokens.end() || b != plain_tokens.end())
          differs = std::max<int64_t>(differs, a - result.tokens.begin());
      }
      if (differs >= 0) mismatches = true;
      std::sort(results.begin(), results.end(),
                [](const RunResult& a, const RunResult& b) { return a.decode_tok_s < b.decode_tok_s; });
      const RunResult& median = results[results.size() / 2];
      if (method == "none") base = median.decode_tok_s;
      double ratio = base > 0 ? median.decode_tok_s / base : 0.0;
      if (!ratios.empty()) {
        std::sort(ratios.begin(), ratios.end());
        ratio = ratios[ratios.size() / 2];
      }
      const engine::EngineStats& st = median.stats;
      const std::string name = method == "choice" ? "choice: " + (median.spec.method.empty() ? std::string("plain")
                                                                                              : median.spec.method) +
                                                        " (" + median.spec.kind + ", " + median.spec.choice + ")"
                                                  : method;
      std::printf("| %s | %s | %.1f | %.2f | %s | %s | %s | %s | %s | %s | %s |", workload.c_str(), name.c_str(),
                  median.decode_tok_s, ratio,
                  median.spec.num_steps ? std::to_string(median.spec.mean_accepted_length()).substr(0, 4).c_str() : "-",
                  median.spec.num_steps
                      ? std::to_string(static_cast<double>(median.spec.num_drafted) / median.spec.num_steps).substr(0, 4).c_str()
                      : "-",
                  median.spec.stopped_by.c_str(), per_step_ms(st.spec_step_seconds, st.spec_decode_steps).c_str(),
                  per_step_ms(st.spec_draft_seconds, st.spec_decode_steps).c_str(),
                  per_step_ms(st.plain_step_seconds, st.plain_decode_steps).c_str(),
                  differs < 0 ? "yes" : ("NO: from token " + std::to_string(differs)).c_str());
      if (options.grammar)
        std::printf(" %zu | %llu |", median.tokens.size(),
                    static_cast<unsigned long long>(median.stats.spec_grammar_pruned_drafts));
      std::printf("\n");
      if (const auto* merged = dynamic_cast<const spec::MergedDrafter*>(model_drafter.get())) {
        const spec::MergedCounters& m = merged->counters();
        std::string members;
        for (size_t i = 0; i < merged->members().size(); ++i)
          members += " " + merged->members()[i].drafter->name() + ": " + std::to_string(m.nodes[i]) + " nodes" +
                     (merged->members()[i].costly
                          ? " (drafted " + std::to_string(m.runs[i]) + " steps, skipped " + std::to_string(m.skips[i]) + ")"
                          : "") + ";";
        std::fprintf(stderr, "%s merged: %llu trees, %llu of several drafters;%s\n", workload.c_str(),
                     static_cast<unsigned long long>(m.trees), static_cast<unsigned long long>(m.multi_source_trees),
                     members.c_str());
      }
      const auto last = std::max_element(results.begin(), results.end(), [](const RunResult& a, const RunResult& b) {
        return a.stats.requests_finished < b.stats.requests_finished;
      });
      if (method == "choice")  // what the choice ranked by, for this workload's kind, after its runs
        for (const engine::DrafterKindFigures& f : last->stats.drafter_figures)
          if (f.kind == median.spec.kind)
            std::fprintf(stderr, "%s choice figures: %s on %s: %llu chosen, %llu measured, %.2f tokens/step, "
                         "cost %.2f plain steps, speed-up %.2f (log spread %.2f)\n", workload.c_str(),
                         f.drafter.c_str(), f.kind.c_str(), static_cast<unsigned long long>(f.figures.chosen),
                         static_cast<unsigned long long>(f.figures.measured), f.figures.tokens_per_step,
                         f.figures.cost_ratio, f.figures.speedup, f.figures.speedups.spread());
      if (const std::string after = graph_counters(*backend); after != graphs_before)
        std::fprintf(stderr, "%s %s: CUDA graphs (cumulative) %s; per run captures+direct:%s\n", workload.c_str(),
                     method.c_str(), after.c_str(), per_run.c_str());
    }
  }
  return mismatches ? 1 : 0;
}
