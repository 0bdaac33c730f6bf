#!/usr/bin/env bash
# On a GPU machine: builds and runs what checks the quantized decode kernels (matmul_quant.cuh) and
# the streaming ring they share with the bf16 kernel (stream_ring.cuh), then cuda_quant_bench.
# STAGE=all (default: build, cuda_quant_tests, the bench, the other tests), STAGE=quick (build and
# run cuda_quant_tests and the bench alone), STAGE=tests (no bench) or STAGE=bench (the bench
# alone, on a warm machine whose $BUILD a previous call built). Builds in
# $BUILD (default build-device, ignored by git). Logs under $LOGS (default /tmp/cuda-quant), packed
# after each step into $OUT/cuda-quant-logs.tar.gz where $OUT is set (the device tool returns at
# most 8 files); a summary on stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
LOGS="${LOGS:-/tmp/cuda-quant}"
BUILD="${BUILD:-build-device}"
STAGE="${STAGE:-all}"
mkdir -p "$LOGS"
use_device_deps
rc=0
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/cuda-quant-logs.tar.gz" -C "$LOGS" . ; true; }
run() {
  local name="$1"; shift; echo "== $name"; ( env "$@" ) > "$LOGS/$name.log" 2>&1 || rc=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED" "$LOGS/$name.log" | head -12; pack
}
bench() {
  echo "== cuda_quant_bench --runs 5 --layers 6 (load: $(uptime | sed 's/.*load/load/'))"
  $BUILD/bench/cuda_quant_bench --runs 5 --layers 6 2>&1 | tee "$LOGS/cuda_quant_bench.log" || rc=1; pack
}
if [ "$STAGE" != bench ]; then
  t0=$(date +%s)
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  device_cmake . $BUILD "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > $LOGS/cmake.log 2>&1 || { tail -30 $LOGS/cmake.log; exit 1; }
  targets="cuda_quant_tests cuda_kernel_tests hf_cuda_golden_tests io_gguf_model_tests cuda_quant_bench"
  [ "$STAGE" = quick ] && targets="cuda_quant_tests cuda_quant_bench"
  ninja -C $BUILD -j16 $targets > $LOGS/build.log 2>&1 || { grep -B2 -A10 "error" $LOGS/build.log | head -60; exit 1; }
  echo "built in $(( $(date +%s) - t0 )) s"
  run cuda_quant_tests $BUILD/tests/kernels/cuda/cuda_quant_tests
  # The bench early: a run cut at its time limit still brings the figures (stdout).
  [ "$STAGE" = all ] || [ "$STAGE" = quick ] && bench
  [ "$STAGE" = quick ] && exit $rc
  # The pre-Hopper path (split-K kernel) on this GPU, within an L40S's shared memory.
  run cuda_quant_tests_arch89 TACHYON_CUDA_ARCH=89 $BUILD/tests/kernels/cuda/cuda_quant_tests
  run cuda_kernel_tests $BUILD/tests/kernels/cuda/cuda_kernel_tests
  run hf_cuda_golden_quantize_decode $BUILD/tests/diff/hf/hf_cuda_golden_tests --gtest_filter='*CudaQuantizeDecode*'
  run gguf_cuda $BUILD/tests/unit/io/io_gguf_model_tests --gtest_filter='GgufModelCuda.*'
  run hf_cuda_golden $BUILD/tests/diff/hf/hf_cuda_golden_tests --gtest_filter='-*CudaQuantizeDecode*'
  echo "all in $(( $(date +%s) - t0 )) s"
fi
[ "$STAGE" = bench ] && bench
exit $rc
