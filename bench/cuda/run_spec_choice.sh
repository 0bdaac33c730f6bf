#!/usr/bin/env bash
# On a GPU machine (issue 48's H200 figure): the drafter choice on the demo model through the
# CUDA engine, as bench/spec/run_choice_bench.sh runs it on the CPU: per workload (code completion,
# prose, JSON, code edit) plain decoding, prompt lookup alone, the merged tree alone and the choice
# (one engine holding every drafter for the whole invocation, as `tachyon serve` does), each run's
# ratio to a plain run just before it (--paired), every method's tokens checked equal to plain
# decoding's. Builds spec_bench (sm_90a alone, no server); the record goes to $OUT (default
# /tmp/spec-choice) as spec-choice-cuda-<commit>.md. Env: RUNS (3), WARMUP (24 untimed choice
# requests per workload), METHODS, SPEC_ARGS (more spec_bench arguments, e.g. "--k 4"), TAG (a suffix of
# the record's name).
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
out="${OUT:-/tmp/spec-choice}"
mkdir -p "$out"
use_device_deps
t0=$(date +%s)
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > "$out/cmake.log" 2>&1 ||
  { tail -30 "$out/cmake.log"; exit 1; }
ninja -C /tmp/b -j"$(nproc)" spec_bench > "$out/build.log" 2>&1 || { grep -B2 -A10 error "$out/build.log" | head -60; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
p=bench/spec/prompts
{
  echo "# Drafter choice, demo model, $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Command: \`bench/cuda/run_spec_choice.sh\` (spec_bench --device cuda --tokens 384 --runs ${RUNS:-3} --paired"
  echo "--choice-warmup ${WARMUP:-24} ${SPEC_ARGS:-}); ratios are each run's speed over a plain run just before it."
  echo
  /tmp/b/bench/spec_bench --device cuda --tokens 384 --runs "${RUNS:-3}" --paired \
    --choice-warmup "${WARMUP:-24}" ${SPEC_ARGS:-} --methods "${METHODS:-none,ngram,merged,choice}" models/tachyon-demo \
    $p/code_completion.txt $p/prose.txt $p/json_object.txt $p/code_edit.txt 2> "$out/spec_bench.err"
} | tee "$out/spec-choice-cuda-$commit${TAG:-}.md"
echo "done in $(( $(date +%s) - t0 )) s"
