#!/usr/bin/env bash
# `make bench`: the CPU engine benchmark on the demo model and a random-weight
# Qwen3-0.6B-shaped bf16 checkpoint (generated once into bench/checkpoints/). Results go to
# bench/results/cpu-decode-prefill-<commit>.{json,md}.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
/usr/bin/python3 "$root/bench/make_random_checkpoint.py" "$root/bench/checkpoints/qwen3-0.6b" --shape qwen3-0.6b
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/cpu-decode-prefill-$commit"
{
  echo "# CPU benchmark, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  "$build/bench/cpu_bench" --json "$out.json" "$root/models/tachyon-demo" "$root/bench/checkpoints/qwen3-0.6b" "$@"
} | tee "$out.md"
