#!/usr/bin/env bash
# Speculative decoding on the demo model, CPU: greedy decode tok/s per method against no
# speculation, on four workloads (bench/spec/prompts: code completion, code edit = the model
# rewrites a file it has seen twice, chat prose, an agent loop of repeated tool-call JSON).
# "default" is what `tachyon run` does with no flag (drafter/ → draft; gates and auto-k on).
# Protocol: one warm-up run discarded, median of 5, 384 new tokens, temperature 0, all
# engine defaults. Also records the verify-cost curve (bench/spec/verify_cost.cpp) of the
# same build. Writes bench/results/spec-<commit>.md. Usage: bench/spec/run_spec_bench.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
tachyon="$build/tachyon"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/spec-$commit.md"

median() { sort -g | sed -n 3p; }
run_line() {  # prompt ids (comma-separated), method flags... → the run summary line
  local ids="$1"; shift
  "$tachyon" run --ids "$ids" -n 384 --temperature 0 "$@" 2>&1 >/dev/null | grep "generated," | tail -1
}
tok_s() { run_line "$@" | sed -n 's/.* generated, \([0-9.]*\) tok\/s decode.*/\1/p'; }

{
  echo "# Speculative decoding, demo model, CPU ($(nproc) cores), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Greedy, 384 new tokens, 1 warm-up discarded, median of 5. tok/s = decode tok/s (tokens after the first over"
  echo "the time after the first, as \`tachyon run\` reports it); ratio = tok/s / tok/s without speculation."
  echo "Engine defaults (k = 4, auto-k, prompt/acceptance/throughput gates on)."
  echo
  echo "| workload | method | tok/s | ratio | tokens per verify step | gate |"
  echo "|---|---|---:|---:|---:|---|"
  for w in code_completion code_edit prose agent_loop; do
    # The exact ids of the prompt (bench/spec/prompts/*.ids): "$(cat FILE.txt)" would drop its
    # trailing newline and change what the model continues.
    p="$(tr -s ' \n' ',,' < "$root/bench/spec/prompts/$w.ids" | sed 's/^,//; s/,$//')"
    base=""
    for method in none default ngram suffix draft mtp; do
      case $method in
        none) flags=(--no-pld --no-drafter --no-mtp) ;;
        default) flags=() ;;
        *) flags=(--speculative-config "{\"method\":\"$method\"}") ;;
      esac
      tok_s "$p" "${flags[@]}" > /dev/null  # warm-up
      t=$(for i in 1 2 3 4 5; do tok_s "$p" "${flags[@]}"; done | median)
      line=$(run_line "$p" "${flags[@]}")
      a=$(sed -n 's/.*, \([0-9.]*\) tokens\/step.*/\1/p' <<< "$line")
      gate=$(sed -n 's/.*off by \([a-z_]*\).*/\1/p' <<< "$line")
      [[ $method == none ]] && base=$t
      echo "| $w | $method | $t | $(awk -v t="$t" -v b="$base" 'BEGIN{printf "%.2f", t/b}') | ${a:--} | ${gate:-} |"
    done
  done
  echo
  echo "## Verify cost (bench/verify_cost, context 256, wall time, median of 200)"
  echo
  "$build/bench/verify_cost" --reps 200 --max-rows 9 "$root/models/tachyon-demo"
} | tee "$out"
