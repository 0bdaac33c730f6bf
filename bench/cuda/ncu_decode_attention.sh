#!/usr/bin/env bash
# On a GPU machine: where the split-KV decode attention's warps wait, per SASS instruction. ncu
# (--set full, the finest warp sampling) on one launch of attention_decode_kernel at head_dim 128
# in the cluster variant (the Qwen3-8B decode shape per CTA: 4 query heads per KV head, one
# 64-key chunk), taken from the kernel test AttentionMatchesReferenceAndIsRowInvariant: its first
# such launch is the decode row at 350 alone (8 chunk CTAs per KV head, 6 of them with keys, x 2
# KV heads: 16 CTAs). Results under $OUT: ncu-decode-details.txt,
# ncu-decode-source.csv.gz (the whole page), and the top instructions on stdout.
# Env: BUILD (default /tmp/build-ncu), TOP (instructions listed, 40), KERNEL (mangled-name regex).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/cuda/device_cmake.sh"
out="${OUT:-$root/bench/results}"
build="${BUILD:-/tmp/build-ncu}"
device_cmake "$root" "$build" ${EXTRA_CMAKE_ARGS:-} > "$out/ncu-cmake.log" 2>&1 ||
  { tail -20 "$out/ncu-cmake.log"; exit 1; }
ninja -C "$build" cuda_kernel_tests > "$out/ncu-build.log" 2>&1 || { grep -E "error|FAILED" "$out/ncu-build.log" | head; exit 1; }
ncu_bin="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
rep=/tmp/ncu-decode-attention
timeout 300 "$ncu_bin" --set full --warp-sampling-interval 0 --kernel-name-base mangled \
  --kernel-name "regex:${KERNEL:-attention_decode_kernelILi16ELb1E}" --launch-count 1 -f -o "$rep" \
  "$build/tests/kernels/cuda/cuda_kernel_tests" --gtest_filter='*AttentionMatchesReferenceAndIsRowInvariant*' \
  > "$out/ncu-decode-run.log" 2>&1 || true
"$ncu_bin" --import "$rep.ncu-rep" --page details --print-units base > "$out/ncu-decode-details.txt" 2>&1 || true
"$ncu_bin" --import "$rep.ncu-rep" --page source --csv --print-source sass > /tmp/ncu-decode-source.csv 2>&1 || true
gzip -c /tmp/ncu-decode-source.csv > "$out/ncu-decode-source.csv.gz"
grep -E "^ +(Duration|Elapsed Cycles|SM Frequency|Issued Warp Per Scheduler|Warp Cycles Per Issued Instruction|Grid Size|Registers Per Thread)" \
  "$out/ncu-decode-details.txt" | head -12
python3 "$root/bench/cuda/ncu_top_instructions.py" /tmp/ncu-decode-source.csv "${TOP:-40}" 0.25
