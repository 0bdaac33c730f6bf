#!/usr/bin/env bash
# --quantize-decode on the CPU: decode and prefill-512 tok/s of the demo model and a random-weight
# Qwen3-0.6B-shaped bf16 checkpoint (generated once into bench/checkpoints/), for bf16,
# --quantize int8/int4 and --quantize-decode int8/int4. Result: bench/results/quantize-decode-cpu-<commit>.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
/usr/bin/python3 "$root/bench/make_random_checkpoint.py" "$root/bench/checkpoints/qwen3-0.6b" --shape qwen3-0.6b
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/quantize-decode-cpu-$commit.md"
{
  echo "# --quantize-decode on the CPU, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  "$build/bench/quantize_decode_bench" "$root/models/tachyon-demo" "$root/bench/checkpoints/qwen3-0.6b" "$@"
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
