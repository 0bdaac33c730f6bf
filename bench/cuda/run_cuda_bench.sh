#!/usr/bin/env bash
# On a GPU machine: build (Release, CUDA on), run the CUDA op tests, the HF golden /
# invariance tests and the hybrid-state tests on the GPU, generate a random checkpoint with
# torch (bench/cuda/make_checkpoint.py) and run the CUDA benchmark. Results:
# bench/results/<name>-<commit>.{json,md} and cuda-tests-<commit>.log (under $OUT when set).
# Usage: bench/cuda/run_cuda_bench.sh [--skip-tests] [--skip-bench]
# Env: SHAPE (qwen3-8b, the default: 16 GB; qwen3-30b-a3b: 61 GB, results named cuda-moe-*),
# BUILD (build dir), CKPT (checkpoint dir; default: /dev/shm or /tmp, whichever has more
# room), MAX_GB (checkpoint cap: layers are dropped to fit; default: the room left on CKPT's
# file system), BENCH_ARGS (e.g. --profile), EXTRA_CMAKE_ARGS (e.g.
# -DTACHYON_ONLY_MODULES="base;io;kernels;kv;sampling;model" where the server's dependencies
# are missing; see docs/perf/cuda.md "Reproducing"), COMMIT (the name the results
# carry; default: the checkout's short HEAD, -dirty when it has changes), SANITIZE=1 (also run the
# kernel tests under compute-sanitizer memcheck: cuda-sanitizer-<commit>.log).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/cuda/device_cmake.sh"
build="${BUILD:-$root/build-cuda-release}"
shape="${SHAPE:-qwen3-8b}"
name=cuda
[ "$shape" = qwen3-8b ] || name=cuda-moe
room() { df -B1G --output=avail "$1" 2>/dev/null | tail -1 | tr -d ' ' || echo 0; }
if [ -z "${CKPT:-}" ]; then
  base=/tmp
  [ "$(room /dev/shm)" -gt "$(room /tmp)" ] && base=/dev/shm
  ckpt="$base/tachyon-$shape-random"
else
  ckpt="$CKPT"
fi
mkdir -p "$ckpt"
margin=6  # room for the build when it shares the file system
case "$ckpt" in /dev/shm/*) margin=2 ;; esac
max_gb="${MAX_GB:-$(( $(room "$ckpt") - margin ))}"
results="${OUT:-$root/bench/results}"
skip_tests=0 skip_bench=0
for a in "$@"; do
  case "$a" in --skip-tests) skip_tests=1 ;; --skip-bench) skip_bench=1 ;; esac
done
mkdir -p "$results"
# COMMIT names the results where the tree's .git is not the tree's own (the device tool's copy of a
# working tree carries a .git that can lag the tree it was sent with, and a record named by it would carry the wrong commit).
commit="${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)}"
python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape "$shape" --max-gb "$max_gb" > "$results/checkpoint.log" 2>&1 &
gen=$!
device_cmake "$root" "$build" ${EXTRA_CMAKE_ARGS:-} > "$results/cmake.log" 2>&1 ||
  { tail -30 "$results/cmake.log"; exit 1; }
ninja -C "$build" -j"$(nproc)" cuda_kernel_tests hf_cuda_golden_tests model_tests cuda_bench > "$results/build.log" 2>&1 ||
  { tail -50 "$results/build.log"; exit 1; }
tests_rc=0
if [ "$skip_tests" = 0 ]; then
  for t in "kernels/cuda/cuda_kernel_tests" "diff/hf/hf_cuda_golden_tests" "unit/model/model_tests --gtest_filter=*HybridState*cuda*"; do
    (cd "$root" && $build/tests/$t) >> "$results/cuda-tests-$commit.log" 2>&1 || tests_rc=$?  # every binary runs
  done
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED|Failure|divergence|demo greedy|Expected|Which is|max diff" \
    "$results/cuda-tests-$commit.log" || true
  if [ "${SANITIZE:-0}" = 1 ]; then  # memcheck over every CUDA kernel test (~1 minute more)
    (cd "$root" && compute-sanitizer --tool memcheck --error-exitcode 1 "$build/tests/kernels/cuda/cuda_kernel_tests") \
      > "$results/cuda-sanitizer-$commit.log" 2>&1 || tests_rc=$?
    grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$results/cuda-sanitizer-$commit.log" || true
  fi
fi
wait $gen || { cat "$results/checkpoint.log"; exit 1; }
if [ "$skip_bench" = 0 ]; then
  {
    echo "# CUDA benchmark, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader)"
    echo "Checkpoint: $(tail -1 "$results/checkpoint.log")"
    "$build/bench/cuda_bench" ${BENCH_ARGS:-} --json "$results/$name-$commit.json" "$ckpt"
  } 2>&1 | tee "$results/$name-$commit.md"
fi
exit "$tests_rc"
