#!/usr/bin/env bash
# KV cache bytes per token: tachyon's formats against llama.cpp's cache types (measured: the KV
# buffer each allocates) and vLLM's (its documented element sizes: `auto` stores the model's
# dtype, `fp8` one byte per element with per-tensor or per-head scales, nothing per token), on
# the demo model (head_dim 64) and a Qwen3-0.6B-shaped checkpoint (head_dim 128, the head size of
# Qwen3-0.6B..32B and Llama 3), with the Qwen3-8B shape (36 layers, 8 KV heads, head_dim 128)
# scaled from the latter. Issue #46 item 6. Writes bench/results/kv-bytes-vs-peers-<commit>.md.
#
#   LLAMA_CPP=/work/peers/llama.cpp bench/kv/run_kv_bytes_vs_peers.sh [QWEN3_0.6B_DIR]
#
# LLAMA_CPP: a llama.cpp source tree whose libllama is built in $LLAMA_BUILD (default
# $LLAMA_CPP/build; /work/shared/peers/README.md says how on this VM: the library target alone
# is enough). QWEN3_0.6B_DIR: a random Qwen3-0.6B-shaped checkpoint with a tokenizer
# (bench/make_random_checkpoint.py --shape qwen3-0.6b, then the demo's tokenizer files beside it).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD:-$root/build}"
llama="${LLAMA_CPP:-/work/peers/llama.cpp}"
llama_build="${LLAMA_BUILD:-$llama/build}"
qwen06="${1:-/work/peers/ckpt/qwen3-0.6b}"
tool=/tmp/llama_kv_bytes
lib="$(dirname "$(find "$llama_build" -name 'libllama.so' | head -1)")"
ggml_lib="$(dirname "$(find "$llama_build" -name 'libggml.so' | head -1)")"
g++ -O1 -std=c++17 "$root/bench/kv/llama_kv_bytes.cpp" -I"$llama/include" -I"$llama/ggml/include" \
  -L"$lib" -L"$ggml_lib" -Wl,-rpath,"$lib:$ggml_lib" -lllama -lggml -lggml-base -o "$tool"
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo -dirty)"
out="$root/bench/results/kv-bytes-vs-peers-$commit.md"
n_ctx=32768
{
  echo "# KV cache bytes per token: tachyon, llama.cpp, vLLM (commit $commit, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "tachyon: \`tachyon info\`'s \"KV per token\" line (the KV layout's own bytes: codes and per-token scales)."
  echo "llama.cpp ($(git -C "$llama" rev-parse --short HEAD 2>/dev/null || echo "source d32676d7, snapshot")): the"
  echo "KV buffer a $n_ctx-token CPU context of the demo model's GGUF allocates, per its own log, over $n_ctx"
  echo "(\`bench/kv/llama_kv_bytes.cpp\`; flash attention on, which its quantized V cache needs)."
  echo
  echo "## tachyon"
  echo
  for m in "$root/models/tachyon-demo" "$qwen06"; do
    echo "- $(basename "$m"): $("$build/tachyon" info "$m" 2>/dev/null | grep -E '^layers' | sed 's/  */ /g')"
    echo "  - $("$build/tachyon" info "$m" 2>/dev/null | grep -E '^KV per token' | sed 's/  */ /g')"
  done
  echo
  echo "## llama.cpp, demo model GGUF (tests/fixtures/gguf/demo-q4_k_m.gguf: 6 layers, 2 KV heads, head_dim 64)"
  echo
  "$tool" "$root/tests/fixtures/gguf/demo-q4_k_m.gguf" "$n_ctx" f32 f16 bf16 q8_0 q5_1 q5_0 q4_1 q4_0 iq4_nl 2>/dev/null
} | tee "$out"
