// PFlash: time to first token and retrieval with prompt compression against the same prompts
// uncompressed, through the engine. Needle prompts (bench/workloads/haystack.txt filler, one
// needle sentence at a depth, then its question): half repeat the question's words, half
// paraphrase them. Each configuration has its own engine (prefix cache off); on the CPU the items
// run interleaved over the configurations, so a busy machine slows them alike; on a GPU one
// configuration after another, one engine alive at a time (their KV pools at 32k do not fit
// together beside an 8B model on an 80 GB card).
//
//   build/bench/pflash_bench [--model DIR] [--scorer DIR] [--tokenizer DIR] [--device cpu|cuda]
//       [--filler 3300] [--keep 0.2] [--reps 3] [--max-tokens 12] [--scorer-chunk 512] [--machine TEXT] [--out FILE]
//       [--sink N --tail N --block N] (the attention rows; 0: the scorer's) [--recall-only 1] (needle recall only)
//       [--items N] (the first N needle prompts, alternating kinds; 0: all 10) [--query-window N]
//       [--explain 1] (with --recall-only: the rank of the needle's blocks and the best blocks' text)
//       [--held-out 1] (11 more needle prompts: other facts and question forms, written after the scorer's
//       fixes, 5 after the first round and 6 before the second)
//       [--scorer-layers L] [--read-window W] (the scorer's cheap read: its first L layers only, each row
//       attending to its last W keys while reading; a full-read row is added for reference)
//       [--also-read L:W] (repeatable: one more attention row, original positions, reading the first L
//       layers (0: all) with read window W (0: none))
//
// Recall, two ways: needle kept (every needle token survived compression; the scorer's plan)
// and answered (the greedy answer holds the code). The ratio is uncompressed TTFT over
// compressed TTFT (medians). For a long-context target (the H200 32k run: a random checkpoint
// of the Qwen3-8B shape, --filler 32000 --scorer-chunk 0 with a scorer trained that long)
// only the TTFT columns mean anything.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "base/json.h"  // read_file
#include "engine/engine.h"
#include "engine/pflash_attention.h"
#include "engine/pflash_lexical.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model = std::string(TACHYON_SOURCE_DIR) + "/models/tachyon-demo", scorer, tokenizer, device = "cpu";
  std::string machine = "unnamed machine", out;
  int32_t query_window = engine::AttentionScorer::kDefaultQueryWindow;
  int32_t filler = 3300, reps = 3, max_tokens = 12, scorer_chunk = 512, sink = 0, tail = 0, block = 0, items = 0;
  // The attention scorer's read (engine::AttentionScorerOptions); a row with the full read (every
  // layer, full attention) is added when these differ from it.
  int32_t scorer_layers = engine::AttentionScorerOptions{}.layers,
          read_window = engine::AttentionScorerOptions{}.read_window,
          first_layer = engine::AttentionScorerOptions{}.first_layer;
  std::vector<std::pair<int32_t, int32_t>> also_read;  // --also-read L:W
  bool recall_only = false;  // only the scorers' needle recall, no engine runs
  bool explain = false;      // with recall_only: each prompt's 12 best blocks, their text
  bool held_out = false;     // 5 more needle prompts of other facts and question forms
  double keep = 0.2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw Error("{} needs a value", k);
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--scorer") a.scorer = v;
    else if (k == "--tokenizer") a.tokenizer = v;
    else if (k == "--device") a.device = v;
    else if (k == "--filler") a.filler = std::stoi(v);
    else if (k == "--keep") a.keep = std::stod(v);
    else if (k == "--reps") a.reps = std::stoi(v);
    else if (k == "--max-tokens") a.max_tokens = std::stoi(v);
    else if (k == "--scorer-chunk") a.scorer_chunk = std::stoi(v);
    else if (k == "--machine") a.machine = v;
    else if (k == "--sink") a.sink = std::stoi(v);
    else if (k == "--tail") a.tail = std::stoi(v);
    else if (k == "--block") a.block = std::stoi(v);
    else if (k == "--recall-only") a.recall_only = v == "1";
    else if (k == "--explain") a.explain = v == "1";
    else if (k == "--held-out") a.held_out = v == "1";
    else if (k == "--out") a.out = v;
    else if (k == "--items") a.items = std::stoi(v);
    else if (k == "--query-window") a.query_window = std::stoi(v);
    else if (k == "--scorer-layers") a.scorer_layers = std::stoi(v);
    else if (k == "--read-window") a.read_window = std::stoi(v);
    else if (k == "--first-layer") a.first_layer = std::stoi(v);
    else if (k == "--also-read") {
      const size_t colon = v.find(':');
      if (colon == std::string::npos) throw Error("--also-read takes LAYERS:WINDOW, got {}", v);
      a.also_read.emplace_back(std::stoi(v.substr(0, colon)), std::stoi(v.substr(colon + 1)));
    }
    else throw Error("unknown option {}", k);
  }
  if (a.scorer.empty()) a.scorer = a.model + "/drafter";
  if (a.tokenizer.empty()) a.tokenizer = a.model;
  return a;
}

struct Item {
  std::string name, kind, answer;
  double depth = 0;
  std::vector<int32_t> tokens;
  int32_t needle_begin = 0, needle_end = 0;
};

std::vector<Item> make_items(const tokenizer::Tokenizer& tok, int32_t filler, bool held_out) {
  const std::string text = read_file(std::string(TACHYON_SOURCE_DIR) + "/bench/workloads/haystack.txt");
  std::vector<std::vector<int32_t>> sentences;
  size_t begin = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '.') {
      sentences.push_back(tok.encode(text.substr(begin, i + 1 - begin), false));
      begin = i + 1;
    }
  // A needle sentence at `depth` of the filler (which long prompts cycle), then `question`.
  auto make = [&](Item it, const std::string& needle, const std::string& question) {
    const int32_t at = static_cast<int32_t>(it.depth * filler);
    for (size_t s = 0; static_cast<int32_t>(it.tokens.size()) < filler; ++s) {
      if (it.needle_end == 0 && static_cast<int32_t>(it.tokens.size()) >= at) {
        const auto n = tok.encode(" " + needle, false);
        it.needle_begin = static_cast<int32_t>(it.tokens.size());
        it.tokens.insert(it.tokens.end(), n.begin(), n.end());
        it.needle_end = static_cast<int32_t>(it.tokens.size());
      }
      const auto& sentence = sentences[s % sentences.size()];
      it.tokens.insert(it.tokens.end(), sentence.begin(), sentence.end());
    }
    const auto q = tok.encode("\n\nQuestion: " + question + "\nAnswer:", false);
    it.tokens.insert(it.tokens.end(), q.begin(), q.end());
    return it;
  };
  const char* names[] = {"Zephyr", "Obsidian", "Marigold", "Cobalt", "Juniper"};
  const char* codes[] = {"4158-GLACIER", "3891-MARKET", "8248-LANTERN", "5560-LIBRARY", "6639-PRINTER"};
  const double depths[] = {0.05, 0.25, 0.5, 0.75, 0.95};
  std::vector<Item> items;
  for (int kind = 0; kind < 2; ++kind)
    for (int i = 0; i < 5; ++i) {
      const std::string name = names[(i + kind * 2) % 5], code = codes[(i + kind * 2) % 5];
      const std::string needle = kind == 0 ? "The access code for the " + name + " vault is " + code + "."
                                           : "To open the " + name + " strongroom, type the combination " + code + ".";
      items.push_back(make({name, kind == 0 ? "lexical" : "paraphrased", code, depths[i], {}, 0, 0}, needle,
                           "What is the access code for the " + name + " vault? Answer with the code only."));
    }
  if (held_out) {
    // "held-out": written after the scorer's fixes, never used to develop them: other facts, other
    // question forms, paraphrased, at other depths. "held-out-2": written before the scorer's second
    // round of fixes was run on it (induction-bigram rarity, the cheap read), all paraphrased.
    struct Fact {
      const char *set, *name, *needle, *question, *answer;
      double depth;
    };
    const Fact facts[] = {
        {"held-out", "Halvorsen", "Dr. Halvorsen's lecture was moved to the east auditorium on the fourth floor.",
         "Where will Dr. Halvorsen give the talk? Answer briefly.", "east auditorium", 0.15},
        {"held-out", "Quillan", "The ferry to Quillan Island now leaves from pier 17 at dawn.",
         "From which pier does the boat to Quillan Island depart? Answer briefly.", "17", 0.35},
        {"held-out", "Teodora", "Agent Teodora keeps the spare key under the blue ceramic frog.",
         "Where is Teodora's extra key hidden? Answer briefly.", "frog", 0.55},
        {"held-out", "Wexley", "For the Wexley account, the password was changed to heron-mosaic-42.",
         "What is the new login secret of the Wexley account? Answer briefly.", "heron-mosaic-42", 0.7},
        {"held-out", "Brightwater", "The Brightwater festival was postponed until the ninth of October.",
         "When will the Brightwater celebration take place? Answer briefly.", "ninth of October", 0.85},
        {"held-out-2", "Ostrander", "The Ostrander shipment was rerouted through the harbor at Port Nessa.",
         "Through which port will the Ostrander cargo travel? Answer briefly.", "Port Nessa", 0.1},
        {"held-out-2", "Lindqvist", "Professor Lindqvist keeps her archive in a locked cabinet behind the organ.",
         "Where does Lindqvist store her records? Answer briefly.", "organ", 0.3},
        {"held-out-2", "Kestrel", "The Kestrel project's budget was cut to forty thousand crowns.",
         "How much money does the Kestrel initiative have now? Answer briefly.", "forty thousand", 0.45},
        {"held-out-2", "Moravec", "Captain Moravec ordered the crew to anchor beside the red lighthouse.",
         "Where did Moravec tell the sailors to stop the ship? Answer briefly.", "red lighthouse", 0.6},
        {"held-out-2", "Thornbury", "The Thornbury choir will rehearse in the old granary every Thursday.",
         "On which day does the Thornbury singing group practise? Answer briefly.", "Thursday", 0.8},
        {"held-out-2", "Abernathy", "Nurse Abernathy swapped her night shifts with the surgeon from Ward 9.",
         "Who took over Abernathy's evening duty? Answer briefly.", "surgeon", 0.92},
    };
    for (const Fact& f : facts) items.push_back(make({f.name, f.set, f.answer, f.depth, {}, 0, 0}, f.needle, f.question));
  }
  return items;
}

struct Config {
  std::string name;
  engine::PflashConfig pflash;
  engine::PromptScorer* scorer = nullptr;
  std::unique_ptr<engine::Engine> engine;
  std::vector<double> ttft, scoring;  // per measured run: TTFT, and the scorer's share of it
  int32_t kept = 0, answered = 0, runs = 0, dropped = 0, prompt = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string git_commit() {
  std::string out;
  if (FILE* p = popen("git -C " TACHYON_SOURCE_DIR " rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[64];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.empty() ? "unknown" : out;
}

int run(int argc, char** argv) {
  const Args args = parse(argc, argv);
  auto backend = kernels::make_backend(args.device);
  auto model = model::load_model(args.model, *backend);
  const auto tok = tokenizer::Tokenizer::from_model_dir(args.tokenizer);
  std::unique_ptr<model::Model> scorer_model;
  {
    const kernels::DraftWeights scope(*backend);  // as `tachyon serve` loads it
    scorer_model = model::load_model(args.scorer, *backend);
  }
  engine::AttentionScorer attention(std::move(scorer_model), {.query_window = args.query_window,
                                                               .chunk = args.scorer_chunk,
                                                               .layers = args.scorer_layers,
                                                               .read_window = args.read_window,
                                                               .first_layer = args.first_layer});
  // The same scorer model reading every layer with full attention (the cheap read's reference).
  const bool cheap = args.scorer_layers > 0 || args.read_window > 0;
  auto read_name = [](int32_t layers, int32_t window) {
    if (layers == 0 && window == 0) return std::string("full read");
    return fmt::format("first {} layers{}", layers > 0 ? std::to_string(layers) : "all",
                       window > 0 ? fmt::format(", read window {}", window) : "");
  };
  std::vector<std::pair<std::string, std::unique_ptr<engine::AttentionScorer>>> other_reads;
  if (!args.recall_only) {
    std::vector<std::pair<int32_t, int32_t>> reads = args.also_read;
    if (cheap) reads.insert(reads.begin(), {0, 0});  // the full read, for reference
    for (const auto& [layers, window] : reads) {
      const kernels::DraftWeights scope(*backend);
      other_reads.emplace_back(read_name(layers, window),
                               std::make_unique<engine::AttentionScorer>(
                                   model::load_model(args.scorer, *backend),
                                   engine::AttentionScorerOptions{.query_window = args.query_window,
                                                                  .chunk = args.scorer_chunk,
                                                                  .layers = layers,
                                                                  .read_window = window,
                                                                  .first_layer = args.first_layer}));
    }
  }
  engine::LexicalScorer lexical;
  std::vector<Item> items = make_items(tok, args.filler, args.held_out);
  if (args.items > 0 && args.items < static_cast<int32_t>(items.size())) {
    // Alternating kinds and depths: lexical 0.05, paraphrased 0.25, lexical 0.50, ... (5 + 5 items).
    std::vector<Item> some;
    for (int32_t i = 0; i < args.items; ++i) some.push_back(items[static_cast<size_t>((i % 2) * 5 + i % 5)]);
    items = std::move(some);
  }

  const engine::PflashConfig attention_cfg{.mode = engine::PflashMode::Always, .keep_ratio = args.keep,
                                           .sink = args.sink, .tail = args.tail, .block = args.block};
  if (args.recall_only) {
    for (const Item& item : items) {
      const auto t0 = Clock::now();
      const engine::PflashPlan plan = engine::plan_compression(item.tokens, attention_cfg, attention);
      const double scored_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      bool kept = true;
      for (int32_t i = item.needle_begin; i < item.needle_end && kept; ++i)
        kept = std::binary_search(plan.kept.begin(), plan.kept.end(), i);
      // Where the needle's blocks ranked among the middle's (the scorer's last scores): 1 is best.
      std::vector<std::pair<int32_t, int32_t>> blocks;
      const int32_t n = static_cast<int32_t>(item.tokens.size());
      for (int32_t b = plan.shape.sink; b < n - plan.shape.tail; b += plan.shape.block)
        blocks.emplace_back(b, std::min(b + plan.shape.block, n - plan.shape.tail));
      const std::vector<double> scores = attention.score_blocks(item.tokens, blocks);
      std::string ranks;
      for (size_t b = 0; b < blocks.size(); ++b)
        if (blocks[b].second > item.needle_begin && blocks[b].first < item.needle_end) {
          const auto better = std::count_if(scores.begin(), scores.end(), [&](double s) { return s > scores[b]; });
          ranks += fmt::format(" {}:{:.3f}(#{})", b, scores[b], better + 1);
        }
      std::printf("%-12s %-10s depth %.2f needle [%d, %d): %s; its blocks of %zu, score (rank):%s; scored %zu tokens "
                  "in %.1f ms\n",
                  item.kind.c_str(), item.name.c_str(), item.depth, item.needle_begin, item.needle_end,
                  kept ? "kept" : "DROPPED", blocks.size(), ranks.c_str(), item.tokens.size(), scored_ms);
      if (args.explain) {
        std::vector<size_t> order(blocks.size());
        for (size_t b = 0; b < order.size(); ++b) order[b] = b;
        std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return scores[x] > scores[y]; });
        for (size_t r = 0; r < 12 && r < order.size(); ++r) {
          const auto [b0, b1] = blocks[order[r]];
          std::vector<int32_t> t(item.tokens.begin() + b0, item.tokens.begin() + b1);
          std::string text = tok.decode(t);
          for (char& c : text) if (c == '\n') c = ' ';
          // The block's most attended token (the rarity-weighted peak) and its text.
          int32_t best = b0;
          for (int32_t i = b0; i < b1; ++i)
            if (attention.last_token_peak()[static_cast<size_t>(i)] > attention.last_token_peak()[static_cast<size_t>(best)])
              best = i;
          std::string top = tok.decode(std::span<const int32_t>(&item.tokens[static_cast<size_t>(best)], 1));
          std::printf("   #%zu block %zu %.3f |%s| peak %.3f at '%s'\n", r + 1, order[r], scores[order[r]], text.c_str(),
                      attention.last_token_peak()[static_cast<size_t>(best)], top.c_str());
        }
      }
    }
    return 0;
  }
  engine::PflashConfig compacted_cfg = attention_cfg;
  compacted_cfg.positions = engine::PflashPositions::Compacted;
  // Rapid-MLX's sizes (tail 2048) leave no middle at these lengths: the lexical row uses the
  // attention scorer's sink and tail so that it compresses the same share.
  const engine::PflashConfig lexical_cfg{.mode = engine::PflashMode::Always, .keep_ratio = args.keep, .sink = 64,
                                         .tail = 128};
  std::vector<Config> configs;
  configs.push_back({"uncompressed", {}, nullptr});
  const std::string read = read_name(args.scorer_layers, args.read_window);
  for (auto& [name, scorer] : other_reads)
    configs.push_back({"attention (" + name + "), original positions", attention_cfg, scorer.get()});
  configs.push_back({"attention (" + read + "), original positions", attention_cfg, &attention});
  configs.push_back({"attention (" + read + "), compacted positions", compacted_cfg, &attention});
  configs.push_back({"lexical (sink 64, tail 128), original positions", lexical_cfg, &lexical});
  const int32_t longest = static_cast<int32_t>(
      std::max_element(items.begin(), items.end(), [](auto& a, auto& b) { return a.tokens.size() < b.tokens.size(); })
          ->tokens.size());
  auto start_engine = [&](Config& c) {
    engine::EngineConfig ec;
    ec.max_concurrent = 1;
    ec.prefix_cache = false;
    ec.num_blocks = (longest + args.max_tokens) / 16 + 8;
    ec.max_context = longest + args.max_tokens + 16;
    ec.pflash = c.pflash;
    ec.pflash_scorer = c.scorer;
    c.engine = std::make_unique<engine::Engine>(*model, ec);
  };
  auto generate = [&](Config& c, const Item& item, bool measured) {
    engine::GenerationRequest r;
    r.prompt = item.tokens;
    r.max_tokens = args.max_tokens;
    r.sampling.temperature = 0.f;
    r.speculate = false;
    const double scored_before = c.engine->stats().pflash_scoring_seconds;
    const auto t0 = Clock::now();
    auto stream = c.engine->submit(r);
    std::vector<int32_t> out;
    double ttft = -1;
    int32_t dropped = 0;
    for (;;) {
      auto o = stream->next(std::chrono::seconds(600));
      if (!o) throw Error("{}: timed out", c.name);
      if (ttft < 0 && !o->tokens.empty()) ttft = std::chrono::duration<double>(Clock::now() - t0).count();
      out.insert(out.end(), o->tokens.begin(), o->tokens.end());
      dropped = std::max(dropped, o->num_dropped_prompt_tokens);
      if (o->finish != engine::FinishReason::None) break;
    }
    if (!measured) return;
    c.ttft.push_back(ttft);
    c.scoring.push_back(c.engine->stats().pflash_scoring_seconds - scored_before);
    ++c.runs;
    c.prompt += static_cast<int32_t>(item.tokens.size());
    c.dropped += dropped;
    if (tok.decode(out).find(item.answer) != std::string::npos) ++c.answered;
  };
  // On a device, one engine at a time: each holds a KV pool for the longest prompt (4.8 GB of
  // bf16 KV for an 8B model at 32k) and its own graphs and workspaces; six of them beside the
  // model (with its wgmma copy) and the scorers ran an 80 GB H100 out of memory.
  const bool one_at_a_time = model->backend().device_memory().has_value();
  if (one_at_a_time) {
    for (Config& c : configs) {
      start_engine(c);
      generate(c, items[0], false);  // warm-up
      for (int32_t rep = 0; rep < args.reps; ++rep)
        for (const Item& item : items) generate(c, item, true);
      c.engine.reset();
    }
  } else {
    for (Config& c : configs) start_engine(c);
    for (Config& c : configs) generate(c, items[0], false);  // warm-up
    for (int32_t rep = 0; rep < args.reps; ++rep)
      for (const Item& item : items)
        for (Config& c : configs) generate(c, item, true);
  }
  // Needle kept: the plan the engine ran (deterministic), once per item.
  for (Config& c : configs) {
    for (const Item& item : items) {
      if (!c.scorer) {
        ++c.kept;
        continue;
      }
      const engine::PflashPlan plan = engine::plan_compression(item.tokens, c.pflash, *c.scorer);
      bool kept = true;
      for (int32_t i = item.needle_begin; i < item.needle_end && kept; ++i)
        kept = std::binary_search(plan.kept.begin(), plan.kept.end(), i);
      c.kept += kept;
    }
  }
  const double base = median(configs[0].ttft);
  std::string md = fmt::format("# PFlash: TTFT and retrieval, {} ({} commit {})\n\n", args.model, args.device,
                               git_commit());
  const auto lexical_items = std::count_if(items.begin(), items.end(), [](const Item& i) { return i.kind == "lexical"; });
  md += fmt::format("Machine: {}. {} needle prompts of about {} tokens ({} repeat the question's words, {} "
                    "paraphrase it; depths 0.05 to 0.95), keep {}, greedy answers of {} tokens, {} runs of each, "
                    "{}; scorer {} (chunk {}, query window {}).\n\n",
                    args.machine, items.size(), args.filler + 25, lexical_items, items.size() - static_cast<size_t>(lexical_items),
                    args.keep, args.max_tokens, args.reps,
                    one_at_a_time ? "one configuration after another (one engine on the device at a time)"
                                  : "configurations interleaved",
                    args.scorer, args.scorer_chunk, args.query_window);
  md += "| configuration | prompt tok | computed tok | TTFT ms (median) | scorer ms (median) | TTFT ratio | needle kept | "
        "answered |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Config& c : configs) {
    const double t = median(c.ttft);
    md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.2f}x | {}/{} | {}/{} |\n", c.name, c.prompt / c.runs,
                      (c.prompt - c.dropped) / c.runs, t * 1e3, median(c.scoring) * 1e3, base / t, c.kept, items.size(),
                      c.answered, c.runs);
  }
  std::map<std::string, std::pair<int, int>> by_kind;  // attention scorer, needle kept, per kind
  for (const Item& item : items) {
    const engine::PflashPlan plan = engine::plan_compression(item.tokens, attention_cfg, attention);
    bool kept = true;
    for (int32_t i = item.needle_begin; i < item.needle_end && kept; ++i)
      kept = std::binary_search(plan.kept.begin(), plan.kept.end(), i);
    by_kind[item.kind].first += kept;
    ++by_kind[item.kind].second;
  }
  md += "\nAttention scorer, needle kept by kind:";
  for (const auto& [kind, n] : by_kind) md += fmt::format(" {} {}/{};", kind, n.first, n.second);
  md += "\n";
  std::fputs(md.c_str(), stdout);
  if (!args.out.empty()) {
    FILE* f = std::fopen(args.out.c_str(), "w");
    if (!f) throw Error("cannot write {}", args.out);
    std::fputs(md.c_str(), f);
    std::fclose(f);
  }
  return 0;
}

}  // namespace
}  // namespace tachyon

int main(int argc, char** argv) {
  try {
    return tachyon::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pflash_bench: %s\n", e.what());
    return 1;
  }
}
