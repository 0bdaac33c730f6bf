#!/usr/bin/env bash
# On a GPU machine, one build for three records (the H200 figures issues 44, 46 and 48 ask for):
# spec_bench's drafter choice on the demo model (bench/cuda/run_spec_choice.sh's run), cuda_kv_bench
# (run_kv_bench.sh's) and cuda_quant_bench (run_cuda_quant.sh's bench), each under a time limit so
# that the call ends within LIMIT seconds (default 560) of its start: the three scripts build a
# tree each, which leaves little of a 10-minute call for running. Records go to $OUT (default
# /tmp/figures): spec-choice.md, kv-bench.md, quant-bench.md, named by the GPU in their headers.
# BUILD_ONLY=1 stops after the build.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
OUT="${OUT:-/tmp/figures}"
mkdir -p "$OUT"
use_device_deps
t0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - t0)) s] $*"; }
left() { echo $((${LIMIT:-560} - ($(date +%s) - t0))); }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > "$OUT/cmake.log" 2>&1 ||
  { tail -30 "$OUT/cmake.log"; exit 1; }
ninja -C /tmp/b -j"$(nproc)" spec_bench cuda_kv_bench cuda_quant_bench > "$OUT/build.log" 2>&1 ||
  { grep -B2 -A10 error "$OUT/build.log" | head -60; exit 1; }
elapsed built
# BUILD_ONLY=1: build now (beside other work on a warm machine), run the records in a later call
[ -n "${BUILD_ONLY:-}" ] && exit 0
p=bench/spec/prompts
if [ "$(left)" -gt 120 ]; then
  timeout 100 /tmp/b/bench/spec_bench --device cuda --tokens 384 --runs 3 --paired --choice-warmup 24 \
    --methods none,ngram,merged,choice models/tachyon-demo $p/code_completion.txt $p/prose.txt $p/json_object.txt \
    $p/code_edit.txt > "$OUT/spec-choice.md" 2> "$OUT/spec_bench.err"
  elapsed "spec choice rc $?"
  grep -E "^\| " "$OUT/spec-choice.md" | head -20
fi
if [ "$(left)" -gt 80 ]; then
  timeout $(($(left) - 60)) /tmp/b/bench/cuda_kv_bench > "$OUT/kv-bench.md" 2>&1
  elapsed "kv bench rc $?"
  grep -E "^#|^\| [a-z0-9]+ \|" "$OUT/kv-bench.md" | head -30
fi
if [ "$(left)" -gt 30 ]; then
  timeout $(($(left) - 5)) /tmp/b/bench/cuda_quant_bench --runs 5 --layers 6 > "$OUT/quant-bench.md" 2>&1
  elapsed "quant bench rc $?"
  tail -25 "$OUT/quant-bench.md"
fi
