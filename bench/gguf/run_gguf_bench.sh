#!/usr/bin/env bash
# tachyon vs llama.cpp on the same GGUF files, ROUNDS rounds each (engines alternating), same machine (issue #45 item 6):
# decode (llama-bench tg128 / cpu_bench 32 tokens at batch 1) and prefill 512 tok/s of a random
# Qwen3-0.6B-shaped checkpoint as BF16 and every type TYPES lists (default: the types of issue #45
# item 2, Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K, and a Q4_K_M file).
# llama-quantize's "Q4_K" and "Q5_K" are aliases of the Q4_K_M / Q5_K_M mixes, so those two are
# written with --pure (every matrix of the type, output and embedding included); the others are
# written as llama-quantize writes them by default (Q4_0, Q4_1, Q5_0, Q5_1: output matrix Q6_K;
# Q4_K_M: Q4_K with Q6_K for half the down/value projections and the output).
#
#   LLAMA_CPP=/work/peers/llama.cpp bench/gguf/run_gguf_bench.sh [WORK_DIR]
#
# LLAMA_CPP: a llama.cpp source tree with llama-bench and llama-quantize built in build/bin
# (/work/shared/peers/README.md: how to build it on this VM) and its gguf-py. WORK_DIR (outside
# the repository; default /work/peers/gguf-bench) holds the checkpoint and the GGUF files; they
# are made once: bench/make_random_checkpoint.py, then the demo tokenizer beside it (padded to
# 151936 entries by the converter), /work/shared/tools/hf_to_gguf_qwen3.py to a BF16 GGUF, then
# llama-quantize. The record goes to bench/results/gguf-cpu-<commit>.md with the CPU named and
# the load average before and after. Run it on an otherwise idle machine: at a load average of
# 21-29 on the 2-core VM (other builds running, 2026-12-06 11:00Z) llama-bench's decode fell to
# 0.13 tok/s on Q8_0 (21.95 idle; its threads wait at barriers by spinning) while tachyon's
# fell to 3.4 (30.8 idle), so ratios taken under load say nothing about either engine.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build}"
llama="${LLAMA_CPP:-/work/peers/llama.cpp}"
work="${1:-/work/peers/gguf-bench}"
types="${TYPES:-Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K Q4_K_M}"
# tachyon runs every type (its CPU backend packs the quantized weight formats they repack into).
tachyon_types="${TACHYON_TYPES:-BF16 $types}"
threads="${THREADS:-$(nproc)}"
gen="${GEN:-128}"              # llama-bench tg tokens (cpu_bench decodes 32)
with_bf16="${WITH_BF16:-1}"    # 0: measure only the quantized files
# Rounds per file, the two engines alternating: a single run of each, one after the other, moved
# the ratio by 20-30% on the 2-core VM as an AMD EPYC, whose bandwidth drifts by the minute
# (bench/results/gguf-cpu-b2113d3.md); the ratios table takes each figure's median.
rounds="${ROUNDS:-3}"
converter="${CONVERTER:-/work/shared/tools/hf_to_gguf_qwen3.py}"

mkdir -p "$work"
/usr/bin/python3 "$root/bench/make_random_checkpoint.py" "$work/qwen3-0.6b" --shape qwen3-0.6b
cp -n "$root/models/tachyon-demo/tokenizer.json" "$root/models/tachyon-demo/tokenizer_config.json" "$work/qwen3-0.6b/"
[ -f "$work/qwen3-0.6b-bf16.gguf" ] ||
  PYTHONPATH="$llama/gguf-py" /usr/bin/python3 "$converter" "$work/qwen3-0.6b" "$work/qwen3-0.6b-bf16.gguf"
files=()
[ "$with_bf16" = 1 ] && files+=("$work/qwen3-0.6b-bf16.gguf")
for t in $types; do
  lower="$(echo "$t" | tr 'A-Z' 'a-z')"
  f="$work/qwen3-0.6b-$lower.gguf"
  pure=()
  [[ "$t" == Q4_K || "$t" == Q5_K ]] && pure=(--pure)
  [ -f "$f" ] ||
    "$llama/build/bin/llama-quantize" "${pure[@]}" "$work/qwen3-0.6b-bf16.gguf" "$f" "$t" > "$work/quantize-$lower.log" 2>&1
  files+=("$f")
done

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/gguf-cpu-$commit.md"
{
  echo "# GGUF on CPU: tachyon vs llama.cpp, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $threads threads for both engines."
  echo "llama.cpp: $(git -C "$llama" rev-parse --short HEAD 2>/dev/null || echo "source d32676d7 (snapshot)"), llama-bench -p 512 -n $gen -r 1."
  echo "tachyon: bench/engine/cpu_bench --runs 1 (decode 32 tokens at batch 1, prefill 512), CPU backend."
  echo "$rounds rounds per file, the engines alternating; the ratios below are of the medians."
  echo
  for f in "${files[@]}"; do
    echo "## $(basename "$f") ($(du -mL "$f" | cut -f1) MB)"
    echo
    echo '```'
    type="$(basename "$f" .gguf | sed 's/^qwen3-0\.6b-//' | tr 'a-z' 'A-Z')"
    for ((round = 1; round <= rounds; ++round)); do  # engine by engine, so both see the same bandwidth drift
      "$llama/build/bin/llama-bench" -m "$f" -p 512 -n "$gen" -t "$threads" -r 1 -o md 2>/dev/null || echo "llama-bench failed"
      if [[ " $tachyon_types " == *" $type "* ]]; then
        "$build/bench/cpu_bench" --runs 1 --prefill-tokens 512 "$f" 2>/dev/null || echo "tachyon cpu_bench failed"
      else
        echo "tachyon: $type not measured (TACHYON_TYPES=\"$tachyon_types\": the CPU backend does not run it yet)"
      fi
    done
    echo '```'
    echo
  done
} | tee "$out"
{
  echo
  echo "## Ratios (load average before / after: $load_before / $(cut -d' ' -f1-3 /proc/loadavg))"
  echo
  /usr/bin/python3 "$root/bench/gguf/summarize_gguf_bench.py" "$out"
} | tee -a "$out"
echo "wrote $out"
