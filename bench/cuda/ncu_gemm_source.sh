#!/usr/bin/env bash
# On a GPU machine: where the prefill GEMM's warps wait, per SASS instruction. ncu (--set full) on
# one launch of the gate_up shape (M 4096, N 24576, K 4096) per wgmma tile width (128 and 192
# columns), then its source page: the instructions with the most warp-state samples, each with
# its samples by stall reason. The test WgmmaPrefillMatmulGivesTheBitsOfTheMmaSyncKernel is cut
# to that one shape on the device's copy of the tree (its wgmma launches: 128, 192, by shape).
# Results under $OUT: ncu-source-{128,192}.csv.gz (the whole page), ncu-source-top.txt.
# Env: BUILD (default /tmp/build-ncu), TOP (instructions listed, 30).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/cuda/device_cmake.sh"
out="${OUT:-$root/bench/results}"
build="${BUILD:-/tmp/build-ncu}"
cd "$root"
test_file=tests/kernels/cuda/cuda_vs_reference_test.cpp
python3 - "$test_file" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
start = s.index('TEST_F(CudaKernels, WgmmaPrefillMatmulGivesTheBitsOfTheMmaSyncKernel)')
i = s.index('for (auto [rows, n, k] : {', start)
j = s.index(') {', i)
s = s[:i] + 'for (auto [rows, n, k] : {std::tuple{int64_t{4096}, int64_t{24576}, int64_t{4096}}}' + s[j:]
open(p, 'w').write(s)
PY
device_cmake "$root" "$build" ${EXTRA_CMAKE_ARGS:-} > "$out/ncu-cmake.log" 2>&1 ||
  { tail -20 "$out/ncu-cmake.log"; exit 1; }
ninja -C "$build" cuda_kernel_tests > "$out/ncu-build.log" 2>&1 || { grep -E "error|FAILED" "$out/ncu-build.log" | head; exit 1; }
ncu_bin="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
skip=0
for cols in 128 192; do
  rep="/tmp/ncu-gemm-$cols"
  timeout 240 "$ncu_bin" --set full --kernel-name regex:matmul_wgmma_kernel --launch-skip $skip --launch-count 1 \
    -f -o "$rep" "$build/tests/kernels/cuda/cuda_kernel_tests" --gtest_filter='*WgmmaPrefillMatmul*' > "$out/ncu-run-$cols.log" 2>&1 || true
  skip=$((skip + 1))
  "$ncu_bin" --import "$rep.ncu-rep" --page details --print-units base > "$out/ncu-details-$cols.txt" 2>&1 || true
  "$ncu_bin" --import "$rep.ncu-rep" --page source --csv --print-source sass > "/tmp/ncu-source-$cols.csv" 2>&1 || true
  gzip -c "/tmp/ncu-source-$cols.csv" > "$out/ncu-source-$cols.csv.gz"
  echo "## $cols columns"
  grep -E "^ +(Duration|Compute \(SM\) Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|SM Frequency|Issued Warp Per Scheduler|Warp Cycles Per Issued Instruction)" "$out/ncu-details-$cols.txt" | head -12
  python3 "$root/bench/cuda/ncu_top_instructions.py" "/tmp/ncu-source-$cols.csv" "${TOP:-30}"
done
