#!/usr/bin/env bash
# Tokenizer benchmark: single-thread encode throughput (MB/s) of tachyon's tokenizer and of
# the official Hugging Face `tokenizers` npm package on the same >= 10 MB mixed corpus
# (prose, code, CJK), measured in the same run, for each real tokenizer; plus the load time
# of each tokenizer.json. Both sides: warm-up discarded, median of three; both wall time and
# process CPU time are recorded (CPU time is the fair figure on a shared machine). The token
# counts of the two sides must agree, else the run fails.
#
# Writes bench/results/tokenizer.md and bench/results/tokenizer.json.
# Environment: BUILD (build dir, default build), TOKENIZER_BENCH (a prebuilt tokenizer_bench
# binary; default: built in $BUILD with -DTACHYON_BENCH=ON), TOKENIZERS (names, default all).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
cache=.cache/npm-assets
node_modules="$cache/node/node_modules"
[[ -d "$node_modules/tokenizers" ]] || { echo "missing $node_modules/tokenizers: run scripts/fetch_test_assets.sh" >&2; exit 1; }

bench_bin="${TOKENIZER_BENCH:-}"
if [[ -z "$bench_bin" ]]; then
  build="${BUILD:-build}"
  cmake -S . -B "$build" -G Ninja -DTACHYON_BENCH=ON >/dev/null
  cmake --build "$build" --target tokenizer_bench >/dev/null
  bench_bin="$build/src/tokenizer/tokenizer_bench"
fi

corpus=.cache/bench/tokenizer_corpus.jsonl
if [[ ! -f "$corpus" ]]; then
  mkdir -p "$(dirname "$corpus")"
  python3 bench/tokenizer/make_corpus.py "$corpus" 12
fi

results=bench/results
mkdir -p "$results"
raw="$(mktemp)"
trap 'rm -f "$raw"' EXIT
for name in ${TOKENIZERS:-qwen3 llama3_1 gemma3 deepseek_v3 gptoss}; do
  file="$cache/tokenizers/$name/tokenizer.json"
  [[ -f "$file" ]] || { echo "missing $file: run scripts/fetch_test_assets.sh" >&2; exit 1; }
  ours="$("$bench_bin" "$file" "$corpus")"
  hf="$(TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 node bench/tokenizer/hf_bench.js "$node_modules" "$file" "$corpus")"
  echo "{\"name\": \"$name\", \"tachyon\": $ours, \"hf\": $hf}" | tee -a "$raw"
done

python3 - "$raw" "$results" <<'PY'
import json, os, platform, subprocess, sys, time
rows = [json.loads(l) for l in open(sys.argv[1])]
out_dir = sys.argv[2]
for r in rows:
    if r["tachyon"]["tokens"] != r["hf"]["tokens"]:
        sys.exit(f"{r['name']}: token counts differ (tachyon {r['tachyon']['tokens']}, HF {r['hf']['tokens']})")
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
load = os.getloadavg()
meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu, "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in load], "corpus_bytes": rows[0]["tachyon"]["bytes"],
        "hf": "tokenizers 0.23.2 (npm), TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1, one encodeBatch call"}
json.dump({"meta": meta, "rows": rows}, open(os.path.join(out_dir, "tokenizer.json"), "w"), indent=1)
lines = [
    "# Tokenizer benchmark", "",
    f"{meta['date']}; {meta['cpu']}, {meta['cores']} cores; load average {meta['load_average']} during the run.",
    f"Corpus: {meta['corpus_bytes'] / 1e6:.1f} MB mixed prose, code and CJK (bench/tokenizer/make_corpus.py),"
    " encoded single-threaded without special tokens. Reference: " + meta["hf"] + ".",
    "Protocol: warm-up discarded, median of three; identical token counts checked. `cpu` columns use process CPU"
    " time, `wall` columns elapsed time.", "",
    "| tokenizer | tachyon MB/s (cpu) | HF MB/s (cpu) | ratio (cpu) | tachyon MB/s (wall) | HF MB/s (wall) | ratio (wall) |"
    " load tachyon s (cpu / wall) | load HF s (cpu / wall) |",
    "|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    t, h = r["tachyon"], r["hf"]
    lines.append(f"| {r['name']} | {t['cpu_mb_per_s']:.2f} | {h['cpu_mb_per_s']:.2f} | {t['cpu_mb_per_s'] / h['cpu_mb_per_s']:.2f}x"
                 f" | {t['mb_per_s']:.2f} | {h['mb_per_s']:.2f} | {t['mb_per_s'] / h['mb_per_s']:.2f}x"
                 f" | {t['load_cpu_seconds']:.2f} / {t['load_seconds']:.2f} | {h['load_cpu_seconds']:.2f} / {h['load_seconds']:.2f} |")
open(os.path.join(out_dir, "tokenizer.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
