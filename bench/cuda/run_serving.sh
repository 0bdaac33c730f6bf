#!/usr/bin/env bash
# On the GPU machine: the full `tachyon serve` (server on, CUDA on) next to llama.cpp's llama-server,
# from what bench/cuda/stage_serving_assets.sh put in ASSETS (default .gpuserve in the tree; nothing is
# fetched there). Phases, one or several per device call (the machine keeps /tmp and /dev/shm while
# warm, so the phases of one machine can be split over back-to-back calls to fit 64 MiB a call):
#
#   build  unpack the .debs into /tmp/sdeps; build `tachyon` (server, CUDA, sm_90a) in /tmp/b; build
#          llama-server (GGML_CUDA, sm_90a) in /tmp/llb; write the random Qwen3-8B-shaped checkpoint
#          (bench/cuda/make_checkpoint.py) with Qwen3's tokenizer in /dev/shm/ck, its output head limited
#          to tokens that are text on their own (bench/text_head.py: llama-server fails requests whose
#          output is not valid UTF-8, and no end-of-turn token cuts a request short), and its BF16 GGUF
#          with llama.cpp's convert_hf_to_gguf.py; the three run side by side. Needs ASSETS/debs,
#          llama.tar.xz, qwen3-tokenizer.tar.xz.
#   node   unpack node and the SDKs (ASSETS/node.tar.xz, node_modules.tar.xz) into /tmp/node.
#   e2e    tests/e2e/run_e2e.mjs: the SDK tests against `tachyon serve` of models/tachyon-demo on the
#          GPU (the tree must hold the demo model; ASSETS/fixtures gives the GGUF fixture).
#   bench  bench/serve/serve_bench.py against tachyon, then against llama-server (flash attention on),
#          same checkpoint, same workloads, LEVELS clients (default 1,8,32,64), then the comparison.
#
#   OUT=/tmp/x bench/cuda/run_serving.sh build node     # logs and results under $OUT
#
# Two calls fit the 64 MiB a call carries (the tree is ~57 MB, ~38 of them the demo model): call 1 runs
# `build node` with models/ and tests/fixtures/ left out of the sent tree (a temporary sparse-checkout
# exclusion) and carries ASSETS' debs, llama.tar.xz, qwen3-tokenizer.tar.xz, node.tar.xz and
# node_modules.tar.xz (~46 MB); call 2, sent at once (the machine is given back after 30 s idle), runs
# `bench e2e` with the demo model in the tree and carries ASSETS/fixtures. Call 1 took 433 s on an H100,
# `bench` ~110-150 s for one workload at 1/8/32/64 clients on both engines, `e2e` 43 s.
# Environment: TESTS (test targets the build phase also builds in the same build folder, whose
# libraries the server shares: one CUDA compile for both), ASSETS, LEVELS, RUNS (measured runs per level, default 2), WORKLOADS (default
# chat_prose,code_completion), SLOT_CTX (context per client, default 4096), TACHYON_ARGS (extra
# `tachyon serve` flags), COMMIT (the tree's commit, for the results' names), LLAMA_VERSION (the llama.cpp
# commit staged; its source carries no git metadata, default d32676d7, ../shared/peers/README.md).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
ASSETS="$(cd "${ASSETS:-.gpuserve}" 2>/dev/null && pwd || echo "${ASSETS:-.gpuserve}")"
OUT="${OUT:-/tmp/serving}"
mkdir -p "$OUT"
build=/tmp/b llbuild=/tmp/llb llsrc=/tmp/llama ck=/dev/shm/ck gguf=/dev/shm/ck-bf16.gguf
nodedir=/tmp/node deps=/tmp/sdeps
commit="${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
LEVELS="${LEVELS:-1,8,32,64}" RUNS="${RUNS:-2}" WORKLOADS="${WORKLOADS:-chat_prose,code_completion}"
SLOT_CTX="${SLOT_CTX:-4096}"
max_clients=$(tr ',' '\n' <<< "$LEVELS" | sort -n | tail -1)
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

phase_build() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  . bench/cuda/server_deps.sh
  server_deps_unpack "$ASSETS/debs" "$deps" || { echo "no .debs in $ASSETS/debs"; return 1; }
  rm -rf "$llsrc" && mkdir -p "$llsrc" && xz -dc "$ASSETS/llama.tar.xz" | tar -x -C "$llsrc" || return 1
  stamp "unpacked"
  (
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACHYON_SERVER=ON \
      -DTACHYON_TESTS="$([ -n "${TESTS:-}" ] && echo ON || echo OFF)" \
      -DTACHYON_CUDA=ON -DTACHYON_CUDA_SM90A_ONLY=ON "${SERVER_DEPS_CMAKE_ARGS[@]}" &&
    ninja -C "$build" -j10 tachyon &&
    { [ -z "${TESTS:-}" ] || ninja -C "$build" -j10 -k 0 ${TESTS}; }
  ) > "$OUT/tachyon-build.log" 2>&1 &
  local tb=$!
  (
    cmake -S "$llsrc" -B "$llbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON &&
    ninja -C "$llbuild" -j14 llama-server
  ) > "$OUT/llama-build.log" 2>&1 &
  local lb=$!
  (
    python3 bench/cuda/make_checkpoint.py "$ck" --shape qwen3-8b &&
    mkdir -p /tmp/qwen3-tokenizer && xz -dc "$ASSETS/qwen3-tokenizer.tar.xz" | tar -x -C /tmp/qwen3-tokenizer &&
    python3 bench/text_head.py "$ck" /tmp/qwen3-tokenizer &&
    { [ -s "$gguf" ] || python3 "$llsrc/convert_hf_to_gguf.py" "$ck" --outtype bf16 --outfile "$gguf.part"; } &&
    { [ -s "$gguf" ] || mv "$gguf.part" "$gguf"; } && ls -la "$gguf"
  ) > "$OUT/checkpoint.log" 2>&1 &
  local cb=$!
  local rc=0
  wait $tb && stamp "tachyon built" || { stamp "tachyon build FAILED"; grep -B2 -A12 -E "error|Error" "$OUT/tachyon-build.log" | head -60; rc=1; }
  [ -x "$build/tachyon" ] && { ldd "$build/tachyon" | grep -E "not found|sdeps" | head -20; }
  wait $cb && stamp "checkpoint and GGUF written" || { stamp "checkpoint FAILED"; tail -30 "$OUT/checkpoint.log"; rc=1; }
  wait $lb && stamp "llama-server built" || { stamp "llama-server build FAILED"; grep -B2 -A12 -E "error|Error" "$OUT/llama-build.log" | head -60; rc=1; }
  df -h /dev/shm /tmp | tail -2
  return $rc
}

phase_node() {
  rm -rf "$nodedir" && mkdir -p "$nodedir/bin" &&
  xz -dc "$ASSETS/node.tar.xz" | tar -x -C "$nodedir/bin" &&
  xz -dc "$ASSETS/node_modules.tar.xz" | tar -x -C "$nodedir" && "$nodedir/bin/node" --version
}

phase_e2e() {
  [ -x "$build/tachyon" ] || { echo "no $build/tachyon: run the build phase first"; return 1; }
  [ -x "$nodedir/bin/node" ] || { echo "no $nodedir/bin/node: run the node phase first"; return 1; }
  local f
  for f in "$ASSETS"/fixtures/*; do  # the GGUF fixture gguf.test.mjs serves, left out of the device copy
    [ -f "$f" ] && [ ! -s "tests/fixtures/gguf/$(basename "$f")" ] && cp "$f" tests/fixtures/gguf/
  done
  # The embedding model of embeddings.test.mjs (bench/cuda/device_pack.sh leaves tests/fixtures/embedding out).
  [ -d "$ASSETS/fixtures/embedding" ] && [ ! -d tests/fixtures/embedding/qwen3_embedding ] &&
    mkdir -p tests/fixtures && cp -r "$ASSETS/fixtures/embedding" tests/fixtures/
  stamp "e2e SDK tests against tachyon serve (demo model, CUDA)"
  PATH="$nodedir/bin:$PATH" timeout 290 "$nodedir/bin/node" tests/e2e/run_e2e.mjs --tachyon "$build/tachyon" \
    --node-modules "$nodedir/node_modules" > "$OUT/e2e-sdk.log" 2>&1
  local rc=$?
  grep -E "^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms)|^not ok|on (cuda|cpu)" "$OUT/e2e-sdk.log" | head -40
  stamp "e2e rc=$rc"
  return $rc
}

wait_healthy() {  # URL PID LOG
  local i
  for i in $(seq 1 600); do
    kill -0 "$2" 2> /dev/null || { echo "server exited:"; tail -30 "$3"; return 1; }
    python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + '/health', timeout=2)" "$1" \
      > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server not healthy after 300 s"; tail -30 "$3"; return 1
}

phase_bench() {
  [ -x "$build/tachyon" ] && [ -x "$llbuild/bin/llama-server" ] && [ -s "$gguf" ] ||
    { echo "run the build phase first"; return 1; }
  # Results are named by the card (h100, h200): a call for one kind may be served by the other.
  local gpu card
  gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  card="$(sed -E 's/^NVIDIA //; s/ .*//' <<< "$gpu" | tr 'A-Z' 'a-z')"
  local ctx=$(( SLOT_CTX * max_clients )) common=(--levels "$LEVELS" --runs "$RUNS" --workloads "$WORKLOADS" --over-cap
    --no-plots --out-dir "$OUT" --note "$gpu, side by side, random Qwen3-8B-shaped bf16 checkpoint, one run")
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  stamp "tachyon serve"
  # Both engines: LEVELS' largest client count in the running batch, SLOT_CTX tokens of context each.
  PYTHONUNBUFFERED=1 python3 bench/serve/serve_bench.py run --model "$ck" --tachyon "$build/tachyon" \
    --server-args "--max-concurrent $max_clients --ctx-size $SLOT_CTX ${TACHYON_ARGS:-}" \
    --engine-commit "$commit" --name "serve-$card-tachyon-$commit" "${common[@]}" 2>&1 | tee "$OUT/bench-tachyon.log"
  cp /tmp/serve-bench-*.log "$OUT/tachyon-serve.log" 2> /dev/null
  stamp "llama-server"
  "$llbuild/bin/llama-server" -m "$gguf" --host 127.0.0.1 --port 8089 -ngl 999 -fa on -np "$max_clients" \
    -c "$ctx" --jinja > "$OUT/llama-server.log" 2>&1 &
  local lp=$!
  if wait_healthy http://127.0.0.1:8089 $lp "$OUT/llama-server.log"; then
    PYTHONUNBUFFERED=1 python3 bench/serve/serve_bench.py run --url http://127.0.0.1:8089 --engine llama.cpp \
      --engine-version "${LLAMA_VERSION:-d32676d7}" \
      --name "serve-$card-llamacpp-$commit" "${common[@]}" 2>&1 | tee "$OUT/bench-llama.log"
  fi
  kill $lp 2> /dev/null; wait $lp 2> /dev/null
  [ -s "$OUT/serve-$card-llamacpp-$commit.json" ] && [ -s "$OUT/serve-$card-tachyon-$commit.json" ] &&
    python3 bench/serve/serve_bench.py compare "$OUT/serve-$card-llamacpp-$commit.json" \
      "$OUT/serve-$card-tachyon-$commit.json" --out-dir "$OUT" --no-plots --name "serve-$card-compare-$commit"
  stamp "bench done"
}

rc=0
for phase in "$@"; do
  case "$phase" in
    build) phase_build || rc=1 ;;
    node) phase_node || rc=1 ;;
    e2e) phase_e2e || rc=1 ;;
    bench) phase_bench || rc=1 ;;
    *) echo "unknown phase $phase (build, node, e2e, bench)"; exit 2 ;;
  esac
done
stamp "phases $* done, rc=$rc"
exit $rc
