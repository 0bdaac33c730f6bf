#!/usr/bin/env bash
# Prefill 512 in the int8-activation mode (AMX-INT8 where present) against bf16 on the CPU, Qwen3-0.6B
# shape (random weights, bench/make_random_checkpoint.py): bf16, --quantize int8 and --quantize int4
# with --int8-activations on, in one run of quantize_decode_bench (decode tok/s beside them: not
# slower), then the GGUF Q8_0/Q4_0 files of bench/gguf/run_gguf_bench.sh if present (as stored against
# --int8-activations on). BASE_BENCH=path/to/quantize_decode_bench of another commit adds its bf16 and
# int8 rows, measured in the same run ("today's bf16"). Records bench/results/quantize-prefill-cpu-<commit>.md
# with the load average at start and end (a loaded machine: compare the prefill CPU-s column).
# Usage: [BUILD=build] [BASE_BENCH=...] [GGUF_DIR=/work/peers/gguf-bench] bench/run_quantize_prefill_bench.sh [--runs N]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
gguf="${GGUF_DIR:-/work/peers/gguf-bench}"
/usr/bin/python3 "$root/bench/make_random_checkpoint.py" "$root/bench/checkpoints/qwen3-0.6b" --shape qwen3-0.6b
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/quantize-prefill-cpu-$commit.md"
args=(--runs 3 --decode-tokens 8 "$@")
modes=(--mode bf16 --mode "--quantize int8 --int8-activations on" --mode "--quantize int4 --int8-activations on")
{
  echo "# Prefill 512 with int8 activations (AMX-INT8) against bf16 on the CPU, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "${BASE_BENCH:-}" ]; then
    echo
    echo "## Base binary ($BASE_BENCH)"
    "$BASE_BENCH" "${args[@]}" --mode bf16 --mode "--quantize int8 --int8-activations on" "$root/bench/checkpoints/qwen3-0.6b"
  fi
  echo
  echo "## This commit"
  "$build/bench/quantize_decode_bench" "${args[@]}" "${modes[@]}" "$root/bench/checkpoints/qwen3-0.6b"
  for t in q8_0 q4_0; do
    f="$gguf/qwen3-0.6b-$t.gguf"
    [ -f "$f" ] && "$build/bench/quantize_decode_bench" "${args[@]}" --mode bf16 --mode "--int8-activations on" "$f"
  done
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
