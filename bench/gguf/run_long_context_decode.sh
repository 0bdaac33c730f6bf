#!/usr/bin/env bash
# Decode at a long context, tachyon against llama.cpp on one GGUF, CPU: tachyon runs a prompt of
# DEPTH random token ids (tachyon run --ids) and greedy-decodes GEN tokens; llama.cpp's llama-bench
# decodes GEN tokens at depth DEPTH (tg GEN @ dDEPTH). Both with THREADS threads, each engine's
# default KV cache (tachyon: bf16; llama.cpp: f16). Prints both decode rates and their ratio.
#   LLAMA=/work/peers/llama.cpp/build/bin bench/gguf/run_long_context_decode.sh MODEL.gguf [build dir]
# Env: DEPTH (8192), GEN (32), THREADS (nproc).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$1"
build="${2:-$root/build}"
llama="${LLAMA:-/work/peers/llama.cpp/build/bin}"
depth="${DEPTH:-8192}" gen="${GEN:-32}" threads="${THREADS:-$(nproc)}"
ids=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1000, 100000)) for _ in range($depth)))")
line=$(TACHYON_THREADS=$threads "$build/tachyon" run "$model" --ids "$ids" -n "$gen" --temperature 0 --no-pld \
  --no-drafter --no-mtp 2>&1 >/dev/null | grep generated)
ours=$(sed -n 's/.* generated, \([0-9.]*\) tok\/s decode.*/\1/p' <<< "$line")
theirs=$("$llama/llama-bench" -m "$model" -t "$threads" -p 0 -n "$gen" -d "$depth" -r 1 2>/dev/null |
  sed -n "s/.*tg$gen @ d$depth *| *\([0-9.]*\).*/\1/p")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads; $(basename "$model"), decode of $gen tokens at $depth context"
echo "tachyon: $line"
echo "| engine | decode tok/s |"
echo "|---|---:|"
echo "| tachyon (bf16 KV) | $ours |"
echo "| llama.cpp (f16 KV) | $theirs |"
echo "ratio tachyon / llama.cpp: $(python3 -c "print(f'{$ours / $theirs:.2f}x')")"
