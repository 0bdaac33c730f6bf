#!/usr/bin/env bash
# On a GPU machine (issue 49's device figure): time to first token of a 32k-token prompt on a
# random Qwen3-8B-shaped checkpoint, uncompressed against PFlash at keep 0.2 (the attention
# scorer with a random Qwen3-0.6B-shaped draft model reading the whole prompt in one forward,
# and the lexical scorer), in one process, one configuration after another; prints the
# ratios and each row's scorer time. The attention scorer's rows: the full read (all 28 layers,
# full attention), the cheap read with all layers (read window READ_WINDOW), and the cheap read
# of the first SCORER_LAYERS layers (with that window; original and compacted positions).
# Random weights: only the TTFT and scorer columns mean anything (the needle columns are the
# scorer's luck on random attention).
#   bench/cuda/run_pflash_ttft.sh BUILD_DIR   (a build with pflash_bench, e.g. run_cuda_tests.sh's /tmp/b)
# Env: CKPT_DIR (default /dev/shm: the checkpoints are written there, 16.4 + 1.5 GB, and kept
# for a second run), FILLER (32000), ITEMS (2 prompts), REPS (1), KEEP (0.2), READ_WINDOW (256, the
# AttentionScorerOptions default), SCORER_LAYERS (14, half the scorer's), OUT (the record;
# default /tmp/pflash-ttft), MACHINE (what the record names; default nvidia-smi's GPU name).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:?usage: run_pflash_ttft.sh BUILD_DIR}"
ckpt="${CKPT_DIR:-/dev/shm}"
out="${OUT:-/tmp/pflash-ttft}"
mkdir -p "$out"
t0=$(date +%s)
# Both checkpoints drawn on the GPU with torch at once (make_checkpoint.py; idempotent).
python3 bench/cuda/make_checkpoint.py "$ckpt/pflash-qwen3-8b" --shape qwen3-8b > "$out/checkpoint-8b.log" 2>&1 &
target=$!
python3 bench/cuda/make_checkpoint.py "$ckpt/pflash-qwen3-0.6b" --shape qwen3-0.6b > "$out/checkpoint-0.6b.log" 2>&1 ||
  { cat "$out/checkpoint-0.6b.log"; exit 1; }
wait $target || { cat "$out/checkpoint-8b.log"; exit 1; }
cat "$out"/checkpoint-*.log
echo "checkpoints in $(( $(date +%s) - t0 )) s"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
# The demo's tokenizer encodes the haystack (its ids are valid Qwen3 ids); --scorer-chunk 0: the
# draft model reads all 32k tokens in one forward (its positions go to 40960); one greedy token.
"$build/bench/pflash_bench" --device cuda --model "$ckpt/pflash-qwen3-8b" --scorer "$ckpt/pflash-qwen3-0.6b" \
  --tokenizer models/tachyon-demo --filler "${FILLER:-32000}" --items "${ITEMS:-2}" --reps "${REPS:-1}" \
  --keep "${KEEP:-0.2}" --max-tokens 1 --scorer-chunk 0 \
  --scorer-layers "${SCORER_LAYERS:-14}" --read-window "${READ_WINDOW:-256}" --also-read "0:${READ_WINDOW:-256}" \
  --machine "${MACHINE:-$gpu, random Qwen3-8B-shaped target, random Qwen3-0.6B-shaped scorer}" \
  --out "$out/pflash-cuda-$commit.md"
echo "done in $(( $(date +%s) - t0 )) s"
