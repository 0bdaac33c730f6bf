#!/usr/bin/env bash
# The drafter choice on the demo model, CPU: per workload (code completion, prose, a JSON answer,
# repetitive code editing; bench/spec/prompts) the drafter the engine chose and its decode tok/s
# against plain decoding and against each single drafter (bench/spec/spec_bench.cpp: "choice" is
# one engine holding ngram, draft, mtp, dflash and the merged drafter over ngram and draft for the
# whole invocation, as `tachyon serve` does, after 12 untimed requests of each workload; "merged":
# that merged drafter alone, spec/merged_drafter.h; its per-workload counters go to stderr). Greedy,
# every method's tokens checked equal to plain
# decoding's (the "= plain" column), 384 new tokens, one warm-up discarded, one timed run
# (--runs N to change). Writes bench/results/drafter-choice-<commit>.md with the CPU and the load.
# Usage: bench/spec/run_choice_bench.sh [build dir] [--runs N]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
shift || true
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/drafter-choice-$commit.md"
p="$root/bench/spec/prompts"
{
  echo "# Drafter choice, demo model, CPU ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (a shared host: ratios are to plain decoding measured"
  echo "in the same invocation). Command: \`bench/spec/run_choice_bench.sh ${*:-}\`."
  echo
  "$build/bench/spec_bench" --device cpu --tokens 384 --runs 1 --methods none,ngram,suffix,draft,mtp,dflash,merged,choice "$@" \
    "$root/models/tachyon-demo" "$p/code_completion.txt" "$p/prose.txt" "$p/json_object.txt" "$p/code_edit.txt"
  echo
  echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} | tee "$out"
