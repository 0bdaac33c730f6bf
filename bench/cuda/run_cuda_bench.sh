#!/usr/bin/env bash
# On a GPU machine: build (Release, CUDA on), run the CUDA op tests and the HF golden /
# invariance tests on the GPU, generate the Qwen3-8B-shaped random checkpoint with torch
# (bench/cuda/make_checkpoint.py, 16 GB under $CKPT), and run the CUDA benchmark. Results:
# bench/results/cuda-<commit>.{json,md} and cuda-tests-<commit>.log (under $OUT when set).
# Usage: bench/cuda/run_cuda_bench.sh [--skip-tests] [--skip-bench]
# Env: BUILD (build dir), CKPT (checkpoint dir), BENCH_ARGS (e.g. --profile), EXTRA_CMAKE_ARGS (e.g.
# -DTACHYON_ONLY_MODULES="base;io;kernels;kv;sampling;model" where the server's dependencies
# are missing; see bench/NOTES-cuda.md "Reproducing on the H200 image").
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build-cuda-release}"
ckpt="${CKPT:-/tmp/tachyon-qwen3-8b-random}"
results="${OUT:-$root/bench/results}"
skip_tests=0 skip_bench=0
for a in "$@"; do
  case "$a" in --skip-tests) skip_tests=1 ;; --skip-bench) skip_bench=1 ;; esac
done
mkdir -p "$results"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)"
python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape qwen3-8b > "$results/checkpoint.log" 2>&1 &
gen=$!
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACHYON_SERVER=OFF -DTACHYON_TESTS=ON \
  -DTACHYON_CUDA=ON ${EXTRA_CMAKE_ARGS:-} > "$results/cmake.log" 2>&1 || { tail -30 "$results/cmake.log"; exit 1; }
ninja -C "$build" -j"$(nproc)" cuda_kernel_tests hf_cuda_golden_tests cuda_bench > "$results/build.log" 2>&1 ||
  { tail -50 "$results/build.log"; exit 1; }
tests_rc=0
if [ "$skip_tests" = 0 ]; then
  (cd "$root" && "$build/tests/kernels/cuda/cuda_kernel_tests" && "$build/tests/diff/hf/hf_cuda_golden_tests") \
    > "$results/cuda-tests-$commit.log" 2>&1 || tests_rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|Failure|divergence|demo greedy|Expected|Which is|max diff" \
    "$results/cuda-tests-$commit.log" || true
fi
wait $gen || { cat "$results/checkpoint.log"; exit 1; }
if [ "$skip_bench" = 0 ]; then
  {
    echo "# CUDA benchmark, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader)"
    "$build/bench/cuda_bench" ${BENCH_ARGS:-} --json "$results/cuda-$commit.json" "$ckpt"
  } 2>&1 | tee "$results/cuda-$commit.md"
fi
exit "$tests_rc"
