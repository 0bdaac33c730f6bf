#!/usr/bin/env bash
# DFlash block drafting on the demo model, CPU: greedy decode tok/s of DFlash chains (block 8,
# "tree_nodes":0) and DDTree trees against plain decoding and today's draft model, on code
# completion, code edit and prose (bench/spec/prompts). Every method's output text is checked
# equal to plain decoding's. Protocol: one warm-up discarded, median of 3, 256 new tokens,
# temperature 0. Writes bench/results/dflash-<commit>.md. Usage: bench/spec/run_dflash_bench.sh [build dir]
#
# The prompts are the exact token ids of bench/spec/prompts/*.ids (--ids): a prompt passed as
# "$(cat file.txt)" loses its trailing newline, and the code-completion prompt without it is
# another prompt. The chain and DDTree rows draft a full block every step (k = 7, no auto-k, no
# gates): their tokens/step is the drafter's accepted length at block 8, which
# tools/dflash_reference.py and tools/train_dflash.py --eval-ids compute outside the engine. The
# auto row is the engine's default configuration.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
tachyon="$build/tachyon"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/dflash-$commit.md"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | sed -n 2p; }
run_once() {  # prompt ids, text file, method flags... → the run summary line (stderr); text to the file
  local ids="$1" text="$2"; shift 2
  "$tachyon" run --ids "$ids" -n 256 --temperature 0 "$@" 2>"$tmp/err" >"$text"
  grep "generated," "$tmp/err" | tail -1
}

{
  echo "# DFlash block drafting, demo model, CPU ($(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Greedy, 256 new tokens, 1 warm-up discarded, median of 3. tok/s = decode tok/s as \`tachyon run\` reports it;"
  echo "ratio = tok/s / plain tok/s of the same run; tokens/step = mean accepted length (accepted drafts + 1);"
  echo "same = the output text equals plain decoding's. Prompts: the token ids of bench/spec/prompts/*.ids."
  echo "dflash_chain, dflash_ddtree (16 nodes), dflash_ddtree32 (32 nodes): k = 7 every step (no auto-k, no gates): the"
  echo "drafter's accepted length at block 8;"
  echo "dflash_auto, draft: engine defaults (auto-k, gates on)."
  echo
  echo "| workload | method | tok/s | ratio | tokens/step | same |"
  echo "|---|---|---:|---:|---:|---|"
  full_block='"num_speculative_tokens":7,"disable_auto_k":true,"disable_gates":true'
  for w in code_completion code_edit prose; do
    ids="$(tr -s ' \n' ',,' < "$root/bench/spec/prompts/$w.ids" | sed 's/^,//; s/,$//')"
    base=""
    for method in none dflash_chain dflash_ddtree dflash_ddtree32 dflash_auto draft; do
      case $method in
        none) flags=(--no-pld --no-drafter --no-mtp) ;;
        dflash_chain) flags=(--speculative-config "{\"method\":\"dflash\",\"tree_nodes\":0,$full_block}") ;;
        dflash_ddtree) flags=(--speculative-config "{\"method\":\"dflash\",\"tree_nodes\":16,$full_block}") ;;
        dflash_ddtree32) flags=(--speculative-config "{\"method\":\"dflash\",\"tree_nodes\":32,$full_block}") ;;
        dflash_auto) flags=(--speculative-config '{"method":"dflash"}') ;;
        draft) flags=(--speculative-config '{"method":"draft"}') ;;
      esac
      run_once "$ids" "$tmp/$method.txt" "${flags[@]}" > /dev/null  # warm-up
      lines=()
      for i in 1 2 3; do lines+=("$(run_once "$ids" "$tmp/$method.txt" "${flags[@]}")"); done
      t=$(for l in "${lines[@]}"; do sed -n 's/.* generated, \([0-9.]*\) tok\/s decode.*/\1/p' <<< "$l"; done | median)
      a=$(sed -n 's/.*, \([0-9.]*\) tokens\/step.*/\1/p' <<< "${lines[0]}")
      [[ $method == none ]] && { base=$t; cp "$tmp/none.txt" "$tmp/plain.txt"; }
      same=$(cmp -s "$tmp/plain.txt" "$tmp/$method.txt" && echo yes || echo NO)
      echo "| $w | $method | $t | $(awk -v t="$t" -v b="$base" 'BEGIN{printf "%.2f", t/b}') | ${a:--} | $same |"
    done
  done
} | tee "$out"
