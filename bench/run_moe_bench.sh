#!/usr/bin/env bash
# The MoE / hybrid CPU decode benchmark (issue 9): random-weight bf16 checkpoints shaped like
# Qwen3-30B-A3B (qwen3_moe) and Qwen3-Next-80B-A3B (qwen3_next, 3 Gated DeltaNet : 1 gated
# attention) scaled to ~1B total parameters, generated once into bench/checkpoints/. Decode is
# compared with the active-parameter roofline (routed experts only, plus KV and recurrent
# state). Results go to bench/results/cpu-moe-<commit>.{json,md}.
# Env: BUILD (build dir), CHECKPOINTS (where checkpoints live), RESULTS (output dir).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD:-$root/build}"
ckpts="${CHECKPOINTS:-$root/bench/checkpoints}"
results="${RESULTS:-$root/bench/results}"
for shape in qwen3-moe-1b qwen3-next-1b; do
  python3 "$root/bench/make_random_checkpoint.py" "$ckpts/$shape" --shape "$shape"
done
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)"
mkdir -p "$results"
out="$results/cpu-moe-$commit"
{
  echo "# CPU MoE / hybrid benchmark, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  "$build/bench/cpu_bench" --json "$out.json" "$ckpts/qwen3-moe-1b" "$ckpts/qwen3-next-1b" "$@"
} | tee "$out.md"
