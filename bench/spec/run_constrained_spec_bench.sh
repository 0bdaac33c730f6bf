#!/usr/bin/env bash
# Speculation under grammar constraints on the demo model, CPU: greedy decode tok/s and tokens per verify step of
# every drafter against constrained decoding without speculation, on two JSON workloads (bench/spec/prompts:
# response_format json_object restating records of the prompt, and a forced tool call after an agent's log), every
# output checked token-identical to the plain constrained one ("= plain"). The same prompts unconstrained follow, for
# reference. Protocol: spec_bench --paired (each timed run's ratio to a plain run just before it, median of 3 after a
# warm-up), 256 new tokens, engine defaults; then acceptance alone (fixed k = 4, gates off: timing cannot change it). Writes bench/results/spec-constrained-cpu-<commit>.md.
# Usage: bench/spec/run_constrained_spec_bench.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/spec-constrained-cpu-$commit.md"
prompts="$root/bench/spec/prompts"
bench=("$build/bench/spec_bench" --device cpu --paired --runs 3 --tokens 256
       --methods none,ngram,ngram-tree,suffix,suffix-tree,draft,draft-tree,mtp,mtp-tree)
accept=("$build/bench/spec_bench" --device cpu --runs 1 --tokens 256 --fixed-k --k 4 --no-gates --tree-nodes 8
        --methods none,ngram,ngram-tree,suffix,suffix-tree,draft,draft-tree,mtp,mtp-tree)
{
  echo "# Speculation under grammar constraints, demo model, CPU ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "## response_format json_object"
  echo
  "${bench[@]}" --grammar json_object "$root/models/tachyon-demo" "$prompts/json_object.txt"
  echo
  echo "## Forced tool call (tool_choice required: read_file or run_tests)"
  echo
  "${bench[@]}" --grammar tool_call=read_file,run_tests "$root/models/tachyon-demo" "$prompts/tool_call.txt"
  echo
  echo "## The same prompts unconstrained (reference)"
  echo
  "${bench[@]}" "$root/models/tachyon-demo" "$prompts/json_object.txt" "$prompts/tool_call.txt"
  echo
  echo "## Acceptance alone: fixed k = 4, trees of 8 nodes, no gates, one run (tokens per verify step do not depend on"
  echo "timing then); each constrained table is followed by the same prompt unconstrained"
  echo
  for g in json_object tool_call; do
    grammar=$g; [[ $g == tool_call ]] && grammar=tool_call=read_file,run_tests
    "${accept[@]}" --grammar "$grammar" "$root/models/tachyon-demo" "$prompts/$g.txt"
    "${accept[@]}" "$root/models/tachyon-demo" "$prompts/$g.txt" | sed -n "s/^| $g |/| $g (unconstrained) |/p"
    echo
  done
} | tee "$out"
