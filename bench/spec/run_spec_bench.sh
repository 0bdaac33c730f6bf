#!/usr/bin/env bash
# Speculative decoding on the demo model, CPU: greedy decode tok/s per method against no
# speculation, on three workloads (code completion, code edit = the model copies a file it has
# seen, prose). Protocol: one warm-up run discarded, median of 3, 128 new tokens, temperature 0.
# Writes bench/results/spec-<commit>.md. Usage: bench/spec/run_spec_bench.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
tachyon="${1:-$root/build}/tachyon"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/spec-$commit.md"

file='import numpy as np


def normalize(x, axis=-1, eps=1e-12):
    """Scale x to unit L2 norm along axis."""
    norm = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    return x / np.maximum(norm, eps)


def softmax(x, axis=-1):
    """Numerically stable softmax."""
    shifted = x - np.max(x, axis=axis, keepdims=True)
    exp = np.exp(shifted)
    return exp / np.sum(exp, axis=axis, keepdims=True)
'
declare -A prompts
prompts[code_completion]=$'import torch\nimport torch.nn as nn\n\n\nclass MLP(nn.Module):\n    def __init__(self, in_features, hidden, out_features):\n'
prompts[code_edit]="$file"$'\n\n# The same module, with eps renamed to epsilon:\n'"${file:0:40}"
prompts[prose]=$'The history of the printing press begins in the fifteenth century, when'

median() { sort -g | sed -n 2p; }
tok_s() {  # prompt, method flags...
  local prompt="$1"; shift
  "$tachyon" run "$prompt" -n 128 --temperature 0 "$@" 2>&1 >/dev/null | sed -n 's/.* generated, \([0-9.]*\) tok\/s.*/\1/p' | tail -1
}
accept() {
  local prompt="$1"; shift
  "$tachyon" run "$prompt" -n 128 --temperature 0 "$@" 2>&1 >/dev/null | sed -n 's/.*, \([0-9.]*\) tokens\/step.*/\1/p' | tail -1
}

{
  echo "# Speculative decoding, demo model, CPU ($(nproc) cores), commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Greedy, 128 new tokens, 1 warm-up discarded, median of 3. ratio = tok/s / tok/s without speculation."
  echo
  echo "| workload | method | tok/s | ratio | tokens per verify step |"
  echo "|---|---|---:|---:|---:|"
  for w in code_completion code_edit prose; do
    p="${prompts[$w]}"
    base=""
    for method in none ngram suffix draft mtp; do
      if [[ $method == none ]]; then flags=(--no-pld --no-drafter --no-mtp)
      else flags=(--speculative-config "{\"method\":\"$method\"}"); fi
      tok_s "$p" "${flags[@]}" > /dev/null  # warm-up
      t=$(for i in 1 2 3; do tok_s "$p" "${flags[@]}"; done | median)
      a=$([[ $method == none ]] && echo "-" || accept "$p" "${flags[@]}")
      [[ $method == none ]] && base=$t
      echo "| $w | $method | $t | $(awk -v t="$t" -v b="$base" 'BEGIN{printf "%.2f", t/b}') | ${a:--} |"
    done
  done
} | tee "$out"
