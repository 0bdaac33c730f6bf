#!/usr/bin/env bash
# DFlash block drafting on the demo model, CPU: greedy decode tok/s of DFlash chains (block 8,
# "tree_nodes":0) and DDTree trees against plain decoding and today's draft model, on code
# completion, code edit and prose (bench/spec/prompts). Every method's output text is checked
# equal to plain decoding's. Protocol: one warm-up discarded, median of 3, 256 new tokens,
# temperature 0. Writes bench/results/dflash-<commit>.md. Usage: bench/spec/run_dflash_bench.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
tachyon="$build/tachyon"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/dflash-$commit.md"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | sed -n 2p; }
run_once() {  # prompt, text file, method flags... → the run summary line (stderr); text to the file
  local prompt="$1" text="$2"; shift 2
  "$tachyon" run "$prompt" -n 256 --temperature 0 "$@" 2>"$tmp/err" >"$text"
  grep "generated," "$tmp/err" | tail -1
}

{
  echo "# DFlash block drafting, demo model, CPU ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Greedy, 256 new tokens, 1 warm-up discarded, median of 3. tok/s = decode tok/s as \`tachyon run\` reports it;"
  echo "ratio = tok/s / plain tok/s of the same run; tokens/step = mean accepted length (accepted drafts + 1);"
  echo "same = the output text equals plain decoding's. Engine defaults otherwise (auto-k, gates on)."
  echo
  echo "| workload | method | tok/s | ratio | tokens/step | same |"
  echo "|---|---|---:|---:|---:|---|"
  for w in code_completion code_edit prose; do
    p="$(cat "$root/bench/spec/prompts/$w.txt")"
    base=""
    for method in none dflash_chain dflash_ddtree dflash_auto draft; do
      case $method in
        none) flags=(--no-pld --no-drafter --no-mtp) ;;
        dflash_chain) flags=(--speculative-config '{"method":"dflash","tree_nodes":0}') ;;
        dflash_ddtree) flags=(--speculative-config '{"method":"dflash","tree_nodes":16}') ;;
        dflash_auto) flags=(--speculative-config '{"method":"dflash"}') ;;
        draft) flags=(--speculative-config '{"method":"draft"}') ;;
      esac
      run_once "$p" "$tmp/$method.txt" "${flags[@]}" > /dev/null  # warm-up
      lines=()
      for i in 1 2 3; do lines+=("$(run_once "$p" "$tmp/$method.txt" "${flags[@]}")"); done
      t=$(for l in "${lines[@]}"; do sed -n 's/.* generated, \([0-9.]*\) tok\/s decode.*/\1/p' <<< "$l"; done | median)
      a=$(sed -n 's/.*, \([0-9.]*\) tokens\/step.*/\1/p' <<< "${lines[0]}")
      [[ $method == none ]] && { base=$t; cp "$tmp/none.txt" "$tmp/plain.txt"; }
      same=$(cmp -s "$tmp/plain.txt" "$tmp/$method.txt" && echo yes || echo NO)
      echo "| $w | $method | $t | $(awk -v t="$t" -v b="$base" 'BEGIN{printf "%.2f", t/b}') | ${a:--} | $same |"
    done
  done
} | tee "$out"
