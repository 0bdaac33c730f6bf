#!/usr/bin/env bash
# On a GPU machine: builds the CUDA tests of this tree (sm_90a alone, no server) and runs them, then
# the golden tests again under each CudaOptions runtime switch (kernels/cuda/cuda_options.h): every
# switch must give the same results. Logs under $OUT (default /tmp/cuda-tests); a summary on stdout.
# Dependencies the machine lacks come from .deps/root (extracted Debian packages, docs/perf/cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
OUT="${OUT:-/tmp/cuda-tests}"
mkdir -p "$OUT"
if [ -d .deps/root/usr ]; then
  deps=$PWD/.deps/root/usr
  export CMAKE_PREFIX_PATH=$deps LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$deps/lib/x86_64-linux-gnu/pkgconfig:$deps/share/pkgconfig
fi
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C /tmp/b -j16 cuda_kernel_tests cuda_quant_tests cuda_kv_tests hf_cuda_golden_tests model_tests kernel_tests > $OUT/build.log 2>&1 || { grep -B2 -A10 "error" $OUT/build.log | head -60; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
rc=0
run() { local name="$1"; shift; echo "== $name"; ( env "$@" ) > "$OUT/$name.log" 2>&1 || rc=1; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED" "$OUT/$name.log" | head -12; }
run cuda_kernel_tests /tmp/b/tests/kernels/cuda/cuda_kernel_tests
run cuda_quant_tests /tmp/b/tests/kernels/cuda/cuda_quant_tests
run cuda_quant_tests_wgmma_off TACHYON_WGMMA=0 /tmp/b/tests/kernels/cuda/cuda_quant_tests
run cuda_kv_tests /tmp/b/tests/kernels/cuda/cuda_kv_tests
run hf_cuda_golden /tmp/b/tests/diff/hf/hf_cuda_golden_tests
run hf_cuda_golden_graphs_all TACHYON_CUDA_GRAPHS=1 /tmp/b/tests/diff/hf/hf_cuda_golden_tests
# (Without graphs the overlap test's count of graph replays cannot hold.)
run hf_cuda_golden_graphs_none TACHYON_CUDA_GRAPHS=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests \
  --gtest_filter=-CudaOverlap.StepsIssuedBeforeTheLastOnesTokensAreReadGiveTheSameTokens
# The fused-launch counting tests assert the default backend's fusions, so they are left out where a
# switch turns those off.
run hf_cuda_golden_wgmma_off TACHYON_WGMMA=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests --gtest_filter=-CudaPrefillFusions.*
run hf_cuda_golden_fusion_off TACHYON_CUDA_FUSION=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests --gtest_filter=-CudaFusedNorm.*:CudaPrefillFusions.*
run model_tests /tmp/b/tests/unit/model/model_tests
run kernel_tests /tmp/b/tests/kernels/kernel_tests
echo "done in $(( $(date +%s) - t0 )) s, rc=$rc"
exit $rc
