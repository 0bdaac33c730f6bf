#!/usr/bin/env bash
# On a GPU machine: builds the CUDA tests of this tree (sm_90a alone, no server) and runs them, then
# the golden tests again under each CudaOptions runtime switch (kernels/cuda/cuda_options.h): every
# switch must give the same results. Then the pre-Hopper kernels (sm_80/86/89, device_arch.h): forced
# on this GPU (TACHYON_CUDA_ARCH=80 and 89), and from a compute_80-PTX-only build the driver
# JIT-compiles here (SKIP_PTX=1 leaves that build out; PRE_HOPPER=0 all of these). Logs under $OUT (default /tmp/cuda-tests);
# a summary on stdout.
# Dependencies the machine lacks come from .deps/root (extracted Debian packages, docs/perf/cuda.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/device_cmake.sh
OUT="${OUT:-/tmp/cuda-tests}"
mkdir -p "$OUT"
use_device_deps
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
device_cmake . /tmp/b "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" > $OUT/cmake.log 2>&1 || { tail -30 $OUT/cmake.log; exit 1; }
ninja -C /tmp/b -j16 cuda_kernel_tests cuda_quant_tests cuda_kv_tests hf_cuda_golden_tests model_tests kernel_tests io_gguf_model_tests pflash_tests engine_model_tests > $OUT/build.log 2>&1 || { grep -B2 -A10 "error" $OUT/build.log | head -60; exit 1; }
echo "built in $(( $(date +%s) - t0 )) s"
rc=0
run() { local name="$1"; shift; echo "== $name"; ( env "$@" ) > "$OUT/$name.log" 2>&1 || rc=1; grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|^\[  FAILED" "$OUT/$name.log" | head -12; }
run cuda_kernel_tests /tmp/b/tests/kernels/cuda/cuda_kernel_tests
run cuda_quant_tests /tmp/b/tests/kernels/cuda/cuda_quant_tests
run cuda_quant_tests_wgmma_off TACHYON_WGMMA=0 /tmp/b/tests/kernels/cuda/cuda_quant_tests
run cuda_kv_tests /tmp/b/tests/kernels/cuda/cuda_kv_tests
run hf_cuda_golden /tmp/b/tests/diff/hf/hf_cuda_golden_tests
# The demo's Q4_K_M file travels only in a --gguf pack (bench/cuda/device_pack.sh): left out without it.
gguf_filter=GgufModelCuda.*; [ -f tests/fixtures/gguf/demo-q4_k_m.gguf ] || gguf_filter=$gguf_filter:-*DemoQ4_K_M*
run gguf_cuda /tmp/b/tests/unit/io/io_gguf_model_tests --gtest_filter=$gguf_filter
run hf_cuda_golden_graphs_all TACHYON_CUDA_GRAPHS=1 /tmp/b/tests/diff/hf/hf_cuda_golden_tests
# (Without graphs the overlap test's count of graph replays cannot hold.)
run hf_cuda_golden_graphs_none TACHYON_CUDA_GRAPHS=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests \
  --gtest_filter=-CudaOverlap.StepsIssuedBeforeTheLastOnesTokensAreReadGiveTheSameTokens
# The fused-launch counting tests assert the default backend's fusions, so they are left out where a
# switch turns those off.
run hf_cuda_golden_wgmma_off TACHYON_WGMMA=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests --gtest_filter=-CudaPrefillFusions.*
run hf_cuda_golden_fusion_off TACHYON_CUDA_FUSION=0 /tmp/b/tests/diff/hf/hf_cuda_golden_tests --gtest_filter=-CudaFusedNorm.*:CudaPrefillFusions.*
run model_tests /tmp/b/tests/unit/model/model_tests
# Issue 49 on the GPU: PFlash (both scorers), the disk prefix tier across an engine restart, the
# response cache over a live engine.
run pflash_cuda /tmp/b/tests/unit/engine/pflash_tests --gtest_filter=PflashEngineCuda.*
run caches_cuda /tmp/b/tests/unit/engine/engine_model_tests --gtest_filter='*DiskPrefixEngine*cuda*:*ResponseCacheEngine*cuda*'
run kernel_tests /tmp/b/tests/kernels/kernel_tests
# The pre-Hopper kernels forced on this GPU: an A100's (163 KB of shared memory per block) and an
# L40S's (99 KB). Tests of Hopper-only kernels skip; the fusion-count tests assert Hopper's fusions
# (the streaming matmul's norm, the wgmma epilogues) and are left out.
pre_hopper_filter=--gtest_filter=-CudaFusedNorm.*:CudaPrefillFusions.*
archs="80 89"
[ "${PRE_HOPPER:-1}" = 0 ] && archs="" SKIP_PTX=1  # PRE_HOPPER=0: none of the pre-Hopper runs
for arch in $archs; do
  run cuda_kernel_tests_arch$arch TACHYON_CUDA_ARCH=$arch /tmp/b/tests/kernels/cuda/cuda_kernel_tests
  run cuda_quant_tests_arch$arch TACHYON_CUDA_ARCH=$arch /tmp/b/tests/kernels/cuda/cuda_quant_tests
  run cuda_kv_tests_arch$arch TACHYON_CUDA_ARCH=$arch /tmp/b/tests/kernels/cuda/cuda_kv_tests
  run hf_cuda_golden_arch$arch TACHYON_CUDA_ARCH=$arch /tmp/b/tests/diff/hf/hf_cuda_golden_tests $pre_hopper_filter
done
# compute_80 PTX alone: what a GPU without machine code in the default build runs. The driver
# JIT-compiles it here, and the backend must choose the pre-Hopper kernels by itself (the loaded
# code's PTX version, not the device's compute capability).
if [ "${SKIP_PTX:-0}" != 1 ]; then
  t1=$(date +%s)
  device_cmake . /tmp/b-ptx80 "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" \
    -DTACHYON_CUDA_SM90A_ONLY=OFF -DTACHYON_CUDA_ARCHS=compute_80 > $OUT/cmake-ptx80.log 2>&1 || { tail -30 $OUT/cmake-ptx80.log; exit 1; }
  ninja -C /tmp/b-ptx80 -j16 cuda_kernel_tests cuda_quant_tests cuda_kv_tests hf_cuda_golden_tests > $OUT/build-ptx80.log 2>&1 ||
    { grep -B2 -A10 "error" $OUT/build-ptx80.log | head -60; exit 1; }
  echo "compute_80 PTX build in $(( $(date +%s) - t1 )) s"
  run cuda_kernel_tests_ptx80 /tmp/b-ptx80/tests/kernels/cuda/cuda_kernel_tests
  run cuda_quant_tests_ptx80 /tmp/b-ptx80/tests/kernels/cuda/cuda_quant_tests
  run cuda_kv_tests_ptx80 /tmp/b-ptx80/tests/kernels/cuda/cuda_kv_tests
  run hf_cuda_golden_ptx80 /tmp/b-ptx80/tests/diff/hf/hf_cuda_golden_tests $pre_hopper_filter
fi
echo "done in $(( $(date +%s) - t0 )) s, rc=$rc"
exit $rc
