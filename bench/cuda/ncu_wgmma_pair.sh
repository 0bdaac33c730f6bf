#!/usr/bin/env bash
# On a GPU machine: ncu on one prefill GEMM launch of the gate_up shape (M 4096, N 24576, K 4096)
# in persistent pairs of CTAs (in the tree since session 15; an older tree gets
# bench/results/wgmma-pair-session14.patch applied: run it on the device's copy) and one CTA per
# tile (TACHYON_WGMMA_PAIR=0): duration, throughputs, warp stalls, source counters, and the cycles per
# issued instruction by stall reason (ncu-stalls-{1,0}.txt).
# Results under $OUT: ncu-pair-{1,0}.txt, ncu-stalls-{1,0}.txt. Env: BUILD (default /tmp/build-ncu),
# SECTIONS=0 (the stall metrics only).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-$root/bench/results}"
build="${BUILD:-/tmp/build-ncu}"
cd "$root"
grep -q "kPair" src/kernels/cuda/matmul.cu || patch -p1 -s < bench/results/wgmma-pair-session14.patch
# The gate_up shape as the test's sixth case (its wgmma launch is the sixth: --launch-skip 5).
sed -i 's/{1000, 4200, 1100}}) {/{1000, 4200, 1100}, {4096, 24576, 4096}}) {/' tests/kernels/cuda/cuda_vs_reference_test.cpp
grep -q "{4096, 24576, 4096}" tests/kernels/cuda/cuda_vs_reference_test.cpp
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACHYON_SERVER=OFF -DTACHYON_TESTS=ON -DTACHYON_CUDA=ON \
  ${EXTRA_CMAKE_ARGS:-} > "$out/ncu-cmake.log" 2>&1 || { tail -20 "$out/ncu-cmake.log"; exit 1; }
ninja -C "$build" cuda_kernel_tests > "$out/ncu-build.log" 2>&1 || { grep -E "error|FAILED" "$out/ncu-build.log" | head; exit 1; }
ncu_bin="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
for pair in 1 0; do
  [ "${SECTIONS:-1}" = 0 ] || TACHYON_WGMMA_PAIR=$pair timeout 200 "$ncu_bin" --kernel-name regex:matmul_wgmma_kernel --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section LaunchStats --section Occupancy --section SourceCounters \
    "$build/tests/kernels/cuda/cuda_kernel_tests" --gtest_filter='*WgmmaPrefillMatmul*' > "$out/ncu-pair-$pair.txt" 2>&1 || true
  # Cycles per issued instruction by stall reason (all warps: the producer's and the consumers').
  TACHYON_WGMMA_PAIR=$pair timeout 200 "$ncu_bin" --kernel-name regex:matmul_wgmma_kernel --launch-skip 5 --launch-count 1 \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    "$build/tests/kernels/cuda/cuda_kernel_tests" --gtest_filter='*WgmmaPrefillMatmul*' > "$out/ncu-stalls-$pair.txt" 2>&1 || true
  echo "## pair $pair"
  grep -E "issue_stalled" "$out/ncu-stalls-$pair.txt" | awk '$NF + 0 >= 0.05' | sort -k3 -g -r | head -14
  [ "${SECTIONS:-1}" = 0 ] || grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Stall|Warp Cycles Per Issued|Issued Warp Per Scheduler|No Eligible|Cluster|PASSED|FAILED" "$out/ncu-pair-$pair.txt" | head -40
done
