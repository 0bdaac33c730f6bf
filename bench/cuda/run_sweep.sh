#!/usr/bin/env bash
# On a GPU machine, one device call for quick A/B runs: build the CUDA tests and benchmarks,
# run the CUDA kernel tests, the 8B-shape engine figures (cuda_bench --engine-only: no kernel
# tables), then the demo model's speculation benchmark once per TACHYON_CUDA_GRAPHS value.
# Results under $OUT (or bench/results). The full record is run_cuda_bench.sh's. The device tool returns at
# most 8 files from $OUT: for long runs point OUT at a scratch folder and copy the ones to keep.
# Env: BENCH_ARGS (e.g. "--profile --runs 2"), GRAPHS (TACHYON_CUDA_GRAPHS values to run, "default" = unset:
# the default; e.g. "default 0"), SPEC_METHODS, SPEC_PROMPTS,
# SPEC_RUNS (3), GEMM=1 (the prefill matmul table per wgmma tile width, cuda_bench --gemm-only, into gemm.md),
# PROBE=1 (bench/cuda/wgmma_rate_probe.cu: the wgmma rate alone and fed like the GEMM, into probe.md), TESTS ("kernel" default; "all" adds the golden tests, "none"), EXTRA_CMAKE_ARGS,
# BUILD, SKIP_ENGINE=1, SKIP_SPEC=1, KERNELS=1 (the kernel tables too: cuda_bench without --engine-only;
# KERNELS=decode: the decode matmul table alone, into kernels.md, before the engine run),
# AB_ARGS / AB_ENV (more engine runs with these arguments / environments, e.g. "--decode-variant 12" or
# "TACHYON_WGMMA=0;TACHYON_CUDA_FUSION=0": one run per ';'-separated environment, into engine-b.md);
# TEST_ENVS: more CUDA kernel test runs, ';'-separated "ENV=VALUE gtest-filter" entries (into sweep-tests.log);
# ATTN_ENVS: like QUICK, one attention table per environment (into attention.md; ATTN=1 is ATTN_ENVS=-);
# QUICK: environments separated by ';' ("-": none), each one cuda_bench --decode-quick run (batch 1, 4 and 8) into quick.md; ATTN=1: the attention table
# (cuda_bench --attention-only) into attention.md; SAMPLING=1: the device token draw table (--sampling-only) into sampling.md. B_CUDA_FLAGS / B_CMAKE_ARGS: a second build with these extra
# CUDA flags / CMake arguments (e.g. "-DTACHYON_ATTENTION_BF16=ON") that runs QUICK and
# ATTN again, with B_TESTS=1 its CUDA tests first (sweep-tests-b.log), with B_ENGINE=1 the full engine run after.
# FULL_ENGINE=0 skips the default build's full engine run.
set -euo pipefail
# ';'-separated environments ("-": none, as "") into the array `envs`.
split_envs() {
  local i
  IFS=';' read -ra envs <<< "$1"
  for i in "${!envs[@]}"; do [ "${envs[$i]}" = - ] && envs[$i]=""; done
  return 0
}
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/cuda/device_cmake.sh"
build="${BUILD:-/tmp/build-sweep}"
results="${OUT:-$root/bench/results}"
mkdir -p "$results"
ckpt=/dev/shm/tachyon-qwen3-8b-random
if [ "${SKIP_ENGINE:-0}" = 0 ]; then
  python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape qwen3-8b --max-gb 100 > "$results/checkpoint.log" 2>&1 &
fi
device_cmake "$root" "$build" ${EXTRA_CMAKE_ARGS:-} > "$results/cmake.log" 2>&1 ||
  { tail -30 "$results/cmake.log"; exit 1; }
ninja -C "$build" -j"$(nproc)" cuda_kernel_tests hf_cuda_golden_tests cuda_bench spec_bench \
  $([ "${PROBE:-0}" = 1 ] && echo wgmma_rate_probe || true) > "$results/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$results/build.log" | head -30; exit 1; }
# Before the checkpoint is needed, while it is written: the probe needs nothing but the device.
[ "${PROBE:-0}" = 1 ] && { timeout 120 "$build/bench/wgmma_rate_probe" 2>&1 | tee "$results/probe.md" || true; }
log="$results/sweep-tests.log"
: > "$log"
case "${TESTS:-kernel}" in
  all) (cd "$root" && timeout 150 "$build/tests/kernels/cuda/cuda_kernel_tests"; timeout 300 "$build/tests/diff/hf/hf_cuda_golden_tests") >> "$log" 2>&1 || true ;;
  kernel) (cd "$root" && timeout 150 "$build/tests/kernels/cuda/cuda_kernel_tests") >> "$log" 2>&1 || true ;;
esac
IFS=';' read -ra test_envs <<< "${TEST_ENVS:-}"
for t in "${test_envs[@]}"; do
  read -r test_env test_filter <<< "$t"
  echo "## cuda_kernel_tests with $test_env, filter ${test_filter:-*}" >> "$log"
  (cd "$root" && env "$test_env" timeout 150 "$build/tests/kernels/cuda/cuda_kernel_tests" --gtest_filter="${test_filter:-*}") >> "$log" 2>&1 || true
done
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" "$log" || true
if [ "${SKIP_ENGINE:-0}" = 0 ]; then
  wait
  if [ "${KERNELS:-0}" = decode ]; then
    "$build/bench/cuda_bench" --decode-only "$ckpt" > "$results/kernels.md" 2>&1 || tail "$results/kernels.md"
  fi
  [ "${GEMM:-0}" = 1 ] && { timeout 200 "$build/bench/cuda_bench" --gemm-only "$ckpt" 2>&1 | grep -E "^\|" |
    tee "$results/gemm.md" || true; }
  [ "${FULL_ENGINE:-1}" = 0 ] || timeout 400 "$build/bench/cuda_bench" $([ "${KERNELS:-0}" = 1 ] || echo --engine-only) ${BENCH_ARGS:-} "$ckpt" > "$results/engine.md" 2>&1 ||
    tail "$results/engine.md"
  [ "${FULL_ENGINE:-1}" = 0 ] || grep -E "^\| (decode|prefill)|device copy" "$results/engine.md"
  if [ -n "${AB_ARGS:-}${AB_ENV:-}" ]; then
    : > "$results/engine-b.md"
    split_envs "${AB_ENV:--}"
    for e in "${envs[@]}"; do
      echo "## engine with ${e:-} ${AB_ARGS:-}" | tee -a "$results/engine-b.md"
      env $e timeout 300 "$build/bench/cuda_bench" --engine-only ${AB_ARGS:-} "$ckpt" > "$results/engine-b1.md" 2>&1 || tail "$results/engine-b1.md"
      grep -E "^\| (decode|prefill)" "$results/engine-b1.md" | tee -a "$results/engine-b.md"
    done
  fi
fi
quick_runs() {  # $1: the cuda_bench binary, $2: a label
  local e
  split_envs "${QUICK:-}"
  for e in "${envs[@]}"; do
    echo "## decode-quick, build $2, env: ${e:-none}"
    env $e timeout 120 "$1" --engine-only --decode-quick "$ckpt" 2>&1 | grep -E "^\| decode" || echo "(failed: exit $?)"
  done
}
if [ -n "${QUICK:-}" ] && [ "${SKIP_ENGINE:-0}" = 0 ]; then
  quick_runs "$build/bench/cuda_bench" a | tee "$results/quick.md"
fi
[ "${SAMPLING:-0}" = 1 ] && { timeout 120 "$build/bench/cuda_bench" --sampling-only "$ckpt" 2>&1 | grep -E "^\|" |
  tee "$results/sampling.md" || true; }
attn_envs="${ATTN_ENVS:-$([ "${ATTN:-0}" = 1 ] && echo - || true)}"
if [ -n "$attn_envs" ]; then
  split_envs "$attn_envs"
  for e in "${envs[@]}"; do
    echo "## attention, env: ${e:-none}"
    env $e timeout 120 "$build/bench/cuda_bench" --attention-only "$ckpt" 2>&1 | grep -E "^\| (attention|decode|prefill)" || echo "(failed: exit $?)"
  done | tee "$results/attention.md"
fi
if [ -n "${B_CUDA_FLAGS:-}${B_CMAKE_ARGS:-}" ] && [ "${SKIP_ENGINE:-0}" = 0 ]; then
  label="b (${B_CUDA_FLAGS:-} ${B_CMAKE_ARGS:-})"
  targets="cuda_bench$([ "${B_TESTS:-0}" = 1 ] && echo " cuda_kernel_tests hf_cuda_golden_tests" || true)"
  if device_cmake "$root" "$build-b" "-DCMAKE_CUDA_FLAGS=${B_CUDA_FLAGS:-}" ${B_CMAKE_ARGS:-} ${EXTRA_CMAKE_ARGS:-} \
      > "$results/cmake-b.log" 2>&1 &&
      ninja -C "$build-b" -j"$(nproc)" $targets > "$results/build-b.log" 2>&1; then
    if [ "${B_TESTS:-0}" = 1 ]; then
      (cd "$root" && timeout 150 "$build-b/tests/kernels/cuda/cuda_kernel_tests"; timeout 300 "$build-b/tests/diff/hf/hf_cuda_golden_tests") > "$results/sweep-tests-b.log" 2>&1 || true
      echo "## tests, build $label"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" "$results/sweep-tests-b.log" || true
    fi
    [ -n "${QUICK:-}" ] && quick_runs "$build-b/bench/cuda_bench" "$label" | tee -a "$results/quick.md"
    [ "${ATTN:-0}" = 1 ] && { echo "## attention, build $label"; timeout 120 "$build-b/bench/cuda_bench" --attention-only "$ckpt" 2>&1 |
      grep -E "^\| (attention|decode|prefill)" | tee -a "$results/attention.md" || true; }
    if [ "${B_ENGINE:-0}" = 1 ]; then
      echo "## engine, build $label"
      timeout 300 "$build-b/bench/cuda_bench" --engine-only "$ckpt" > "$results/engine-build-b.md" 2>&1 || tail "$results/engine-build-b.md"
      grep -E "^\| (decode|prefill)" "$results/engine-build-b.md" || true
    fi
  else
    echo "build $label failed"; grep -E "error|FAILED" "$results/build-b.log" "$results/cmake-b.log" | head -20 || true
  fi
fi
[ "${SKIP_SPEC:-0}" = 1 ] && exit 0
for g in ${GRAPHS:-default}; do
  echo "## demo model speculation, TACHYON_CUDA_GRAPHS=$g"
  # "default": unset (graphs for the steps the engine marks as repeating)
  env $([ "$g" = default ] && echo -u TACHYON_CUDA_GRAPHS || echo TACHYON_CUDA_GRAPHS=$g) "$build/bench/spec_bench" --device cuda --runs "${SPEC_RUNS:-3}" --tokens 384 \
    --methods "${SPEC_METHODS:-none,ngram,mtp,mtp-tree,draft-tree}" "$root/models/tachyon-demo" \
    ${SPEC_PROMPTS:-$root/bench/spec/prompts/code_completion.ids $root/bench/spec/prompts/prose.ids} 2>&1 |
    grep -E "^\||CUDA graphs"
done | tee "$results/sweep-spec.md"
