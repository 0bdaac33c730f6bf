// What speculation has to beat: the cost of one target forward over R rows of one sequence
// (the verify step of R−1 drafts) relative to a plain one-row decode step, at a given context,
// with the KV cache format the engine chooses by default (bf16 on the CPU).
// Speculation with k drafts pays only when the tokens it emits per step exceed cost(k+1)/cost(1).
// Also times the drafter's own forward (a `drafter/` folder) at 1 row, and a DFlash drafter's
// block forward (a `dflash/` folder) after 1..4 new context rows, to give the full step budget. Protocol: warm-up discarded, median of --reps forwards per row count.
// Usage: verify_cost [--device cpu|cuda] [--context 256] [--max-rows 9 | --rows R] [--reps 200] [--dflash-only]
//                    MODEL_DIR
// (--rows R: only R rows against 1, e.g. to profile one shape; --dflash-only: the 1-row decode and
// the DFlash block forward only, e.g. to profile it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "model/dflash_head.h"
#include "model/kv_format_choice.h"
#include "model/model.h"
#include "spec/level_drafter.h"

using namespace tachyon;

namespace {

// TACHYON_BENCH_CPU_TIME=1 times this thread's CPU time instead of wall time: with
// TACHYON_THREADS=1 it measures the work on a machine shared with other jobs.
double now() {
  static const bool cpu_time = std::getenv("TACHYON_BENCH_CPU_TIME") != nullptr;
  if (cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of one forward over `rows` rows appended at position `context` (then rolled back).
double forward_seconds(model::Model& m, int32_t context, int32_t rows, int reps) {
  kv::KvLayout layout = m.kv_layout((context + rows + 15) / 16 + 2);
  layout.format = model::resolve_kv_format(std::nullopt, m.config(), m.backend());  // the engine's default
  kv::KvCache kv(m.backend(), layout);
  const auto seq = kv.add_sequence();
  kv.reserve(seq, context + rows);
  std::vector<int32_t> prompt(static_cast<size_t>(context));
  for (int32_t i = 0; i < context; ++i) prompt[static_cast<size_t>(i)] = 100 + (i * 37) % 5000;
  model::Batch batch;
  batch.add(seq, prompt, 0, model::LogitRows::None);
  m.forward(batch, kv);
  std::vector<int32_t> ids(static_cast<size_t>(rows), 42);
  std::vector<double> t;
  for (int r = 0; r < reps + 5; ++r) {
    kv.reserve(seq, context + rows);
    batch.clear();
    batch.add(seq, ids, context, rows > 1 ? model::LogitRows::All : model::LogitRows::Last);
    const double t0 = now();
    m.forward(batch, kv);
    if (r >= 5) t.push_back(now() - t0);
    kv.truncate(seq, context);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median seconds of one DFlash block draft (DFlashHead::draft_block) that first appends
// `new_rows` context rows after `context` cached ones, as a speculative step does after it
// accepted new_rows - 1 drafts. The features are synthetic: the cost does not depend on values.
double dflash_seconds(model::DFlashHead& head, kernels::Backend& backend, int32_t context, int32_t new_rows,
                      int reps) {
  const int32_t B = head.block_size();
  kv::KvCache kv(backend, head.kv_layout((context + new_rows + B + 15) / 16 + 2));
  const auto seq = kv.add_sequence();
  const int64_t f = head.feature_size();
  std::vector<float> features(static_cast<size_t>((context + new_rows) * f));
  for (size_t i = 0; i < features.size(); ++i) features[i] = 0.01f * static_cast<float>(static_cast<int>(i * 7919 % 201) - 100);
  if (head.draft_block(kv, seq, {features.data(), static_cast<size_t>(context * f)}, 0, context, 42).empty())
    throw Error("dflash_seconds: the drafter's cache has no room");
  const std::span<const float> fresh{features.data() + context * f, static_cast<size_t>(new_rows * f)};
  std::vector<double> t;
  for (int r = 0; r < reps + 5; ++r) {
    const double t0 = now();
    head.draft_block(kv, seq, fresh, context, new_rows, 42);
    if (r >= 5) t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int32_t context = 256, max_rows = 9, only_rows = 0;
  bool dflash_only = false;
  int reps = 200;
  std::string dir, device = "cpu";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--context") && i + 1 < argc) context = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-rows") && i + 1 < argc) max_rows = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc) only_rows = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!std::strcmp(argv[i], "--dflash-only")) dflash_only = true;
    else dir = argv[i];
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: verify_cost [--context N] [--max-rows R | --rows R] [--reps N] MODEL_DIR\n");
    return 2;
  }
  auto backend = kernels::make_backend(device);
  auto target = model::load_model(dir, *backend);
  std::printf("| rows | forward ms | cost / 1-row decode |\n|---:|---:|---:|\n");
  const double one = forward_seconds(*target, context, 1, dflash_only ? 20 : reps);
  if (dflash_only) max_rows = only_rows = 1;
  for (int32_t rows = only_rows > 0 ? only_rows : 1; rows <= (only_rows > 0 ? only_rows : max_rows); ++rows) {
    const double s = rows == 1 ? one : forward_seconds(*target, context, rows, reps);
    std::printf("| %d | %.3f | %.2f |\n", rows, s * 1e3, s / one);
  }
  if (!dflash_only && std::filesystem::exists(dir + "/drafter/config.json")) {
    // As the spec layer runs it (its default draft vocabulary), with the weights as stored and in
    // draft precision (kernels::DraftWeights: int8 on the CPU).
    for (const bool exact : {true, false}) {
      std::unique_ptr<model::Model> drafter;
      {
        const kernels::DraftWeights scope(*backend, !exact);
        drafter = model::load_model(dir + "/drafter", *backend);
      }
      drafter->set_draft_vocabulary(spec::default_draft_vocabulary(drafter->config().vocab_size));
      const double d = forward_seconds(*drafter, context, 1, reps);
      std::printf("%sdrafter 1-row forward, %s weights: %.3f ms = %.2f of a target decode step\n", exact ? "\n" : "",
                  exact ? "stored" : "draft-precision", d * 1e3, d / one);
    }
  }
  if (std::filesystem::exists(dir + "/dflash/config.json")) {
    // As the spec layer runs it: all of the vocabulary, stored and draft-precision weights.
    std::printf("\n| DFlash weights | new context rows | block forward ms | of a target decode step |\n|---|---:|---:|---:|\n");
    for (const bool exact : {true, false}) {
      std::unique_ptr<model::DFlashHead> head;
      {
        const kernels::DraftWeights scope(*backend, !exact);
        head = model::DFlashHead::load(dir + "/dflash", dir, target->config(), *backend);
      }
      head->set_draft_vocabulary(0);
      for (int32_t fresh = 1; fresh <= 4; ++fresh) {
        const double d = dflash_seconds(*head, *backend, context, fresh, reps);
        std::printf("| %s | %d | %.3f | %.2f |\n", exact ? "stored" : "draft-precision", fresh, d * 1e3, d / one);
      }
    }
  }
}
