#!/usr/bin/env bash
# On a GPU machine, one call for issue #48's CUDA side: builds spec_bench and the CUDA golden tests,
# runs the CUDA DFlash and speculation tests (the 3-layer demo drafter, sized DDTrees), then
# spec_bench's DFlash chains (auto-k) against DDTrees sized by node probability and measured verify
# cost ("dflash-tree" at --tree-nodes -1), then, time left, the drafter-choice record of
# run_figure_benches.sh. Each part under a limit so that the call ends within END seconds (default
# 575) of its start. Records to $OUT (default /tmp/dflash-gpu): spec-tests.log, dflash-tree.md,
# spec-choice.md, logs.tgz (cmake, build, the benches' stderr).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
OUT="${OUT:-/tmp/dflash-gpu}"
logs=/tmp/dflash-gpu-logs
mkdir -p "$OUT" "$logs"
use_device_deps
t0=$(date +%s)
end=${END:-575}
elapsed() { echo "[$(($(date +%s) - t0)) s] $*"; }
left() { echo $((end - ($(date +%s) - t0))); }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv,noheader
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" \
  > "$logs/cmake.log" 2>&1 || { tail -30 "$logs/cmake.log"; exit 1; }
ninja -C /tmp/b -j"$(nproc)" spec_bench hf_cuda_golden_tests > "$logs/build.log" 2>&1 ||
  { grep -B2 -A10 error "$logs/build.log" | head -40; exit 1; }
elapsed built
timeout 150 /tmp/b/tests/diff/hf/hf_cuda_golden_tests --gtest_filter='CudaDFlash*:CudaSpeculation*' \
  > "$OUT/spec-tests.log" 2>&1
elapsed "spec tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED" "$OUT/spec-tests.log" | head -12
p=bench/spec/prompts
if [ "$(left)" -gt 55 ]; then
  timeout $(( $(left) - 15 < 130 ? $(left) - 15 : 130 )) /tmp/b/bench/spec_bench --device cuda --tokens 256 --runs 3 \
    --paired --methods none,dflash,dflash-tree models/tachyon-demo $p/code_completion.txt $p/prose.txt \
    $p/code_edit.txt > "$OUT/dflash-tree.md" 2> "$logs/dflash-tree.err"
  elapsed "dflash rc $?"
  grep -E "^\| " "$OUT/dflash-tree.md" | head -14
fi
if [ "$(left)" -gt 60 ]; then
  timeout "$(left)" /tmp/b/bench/spec_bench --device cuda --tokens 384 --runs 3 --paired --choice-warmup 24 \
    --methods none,ngram,merged,choice models/tachyon-demo $p/code_completion.txt $p/prose.txt $p/json_object.txt \
    $p/code_edit.txt > "$OUT/spec-choice.md" 2> "$logs/spec_choice.err"
  elapsed "choice rc $?"
  grep -E "^\| " "$OUT/spec-choice.md" | head -20
fi
tar -C "$logs" -czf "$OUT/logs.tgz" . 2>/dev/null
