#!/usr/bin/env bash
# On a GPU machine: builds cuda_kv_bench (sm_90a alone, no server) and runs it: decode tok/s per
# KV storage format at batch 1 / 32k and batch 32 / 8k (Qwen3-8B shape, ratios to bf16 KV in the
# same run) and the capacity per format from the pool sizing. The markdown goes to stdout and to
# $OUT/kv-bench.md (default /tmp/kv-bench); record it as bench/results/cuda-kv-<gpu>-<commit>.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
OUT="${OUT:-/tmp/kv-bench}"
mkdir -p "$OUT"
t0=$(date +%s)
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C /tmp/b -j16 cuda_kv_bench > $OUT/build.log 2>&1 || { grep -B2 -A10 "error" $OUT/build.log | head -60; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
/tmp/b/bench/cuda_kv_bench "$@" | tee "$OUT/kv-bench.md"
