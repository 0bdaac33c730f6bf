#!/usr/bin/env bash
# On a GPU machine, one device call for the A/B of a change: builds this tree (A) and this tree with
# each patch of PATCH applied (B, C, ...: `patch -p1`, so no git is needed there; the trees build
# concurrently), runs the patched builds' CUDA tests, then alternates the A, B, ... processes ROUNDS
# times per mode, so all see the same machine, clock and power cap (only same-call, alternating
# comparisons have held up on the lent H200s: docs/perf/cuda.md).
#
#   PATCH=bench/cuda/lab/x.patch bench/cuda/ab_patch.sh
#   PATCH="x.patch y.patch x.patch+y.patch" TESTS=none bench/cuda/ab_patch.sh   # B, C, and D = both
#   PATCH="bench/cuda/lab/stream-min-n.patch@TACHYON_STREAM_MIN_N=6144 bench/cuda/lab/stream-min-n.patch@TACHYON_STREAM_MIN_N=4096" \
#     MODES=decode bench/cuda/ab_patch.sh   # B and C: one build of a lab patch under two envs
#
# Env: PATCH (space-separated variants, each a patch against this tree or several joined by '+',
# optionally followed by '@' and ','-separated ENV=VALUE settings of that variant's runs and tests,
# where only=MODE+MODE limits the modes it runs; variants with the same patches share one build,
# and "@ENV=VALUE" alone is A's build; empty PATCH: B is A's binary run with B_ENV), B_ENV
# (environment of every variant's runs but A's, e.g. "TACHYON_CUDA_FUSION=0"), MODES (default
# "attention prefill"; also "decode", "gemm", "kv": cuda_kv_bench's attention per layer by KV format at
# batch 1 / 32k and batch 32 / 8k (KV_FORMATS, default bf16,int8,int4), "delta": cuda_delta_rule_bench's
# gated delta rule rows, and "clocks": cuBLAS and our GEMM
# per SM cycle under nvidia-smi, bench/cuda/gemm_clocks.py), ROUNDS (2; ROUNDS_<mode> for one mode), TESTS ("kernel"
# default, "all" adds the golden tests, "none"), TEST_ENVS (';'-separated "ENV=VALUE gtest-filter"
# entries: more kernel-test runs of each variant, also with TESTS=none), BUILD (default /tmp/ab), SHAPE (the
# random checkpoint's shape, bench/cuda/make_checkpoint.py: default qwen3-8b; qwen3-30b-a3b for MoE decode, 61 GB), MAX_GB
# (default 100: whole layers are dropped to stay under it; 40 lets qwen3-30b-a3b decode on an 80 GB H100).
# Results under $OUT (or bench/results): ab.md (the runs, then medians per variant and their ratios
# to A: bench/cuda/ab_summary.py), tests-<variant>.log, checkpoint.log. Round r runs the variants
# starting from the r-th, so that no variant always runs first.
# Dependencies that the machine lacks are taken from $root/.deps/root (extracted Debian packages)
# when that folder exists.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/cuda/device_cmake.sh"
results="${OUT:-$root/bench/results}"
build="${BUILD:-/tmp/ab}"
mkdir -p "$results"
t0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - t0)) s] $*"; }
use_device_deps "$root"
modes="${MODES:-attention prefill}"
shape="${SHAPE:-qwen3-8b}"
max_gb="${MAX_GB:-100}"
ckpt=/dev/shm/tachyon-$shape-random-$max_gb
case " $modes " in
  *" prefill "* | *" decode "*)
    python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape "$shape" --max-gb "$max_gb" > "$results/checkpoint.log" 2>&1 & ;;
  *)
    ckpt=/dev/shm/tachyon-$shape-config
    python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape "$shape" --config-only > "$results/checkpoint.log" 2>&1 & ;;
esac

# Build logs stay on the machine (a call returns at most 8 files); a failure prints its errors. A
# failed configure drops its cache: its NOT-FOUND entries would otherwise outlive the cause (a
# call without the carried .deps) on a machine that stays warm.
logs="$build/logs"
mkdir -p "$logs"
# build SOURCE_DIR BUILD_DIR LABEL TARGETS...
build_tree() {
  local src="$1" dir="$2" label="$3"
  shift 3
  device_cmake "$src" "$dir" "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" \
    > "$logs/cmake-$label.log" 2>&1 || { rm -f "$dir/CMakeCache.txt"; false; } &&
    ninja -C "$dir" -j"$(nproc)" "$@" > "$logs/build-$label.log" 2>&1 ||
    { echo "build $label failed"; grep -E "error|FAILED" "$logs/cmake-$label.log" "$logs/build-$label.log" | head -20; exit 1; }
}
# cuda_bench (and the model and engine it links) only where a mode runs it: kv runs cuda_kv_bench alone.
benches="$([[ " $modes " = *" kv "* ]] && echo cuda_kv_bench || true)"
[[ " $modes " = *" delta "* ]] && benches="cuda_delta_rule_bench $benches"
for mode in $modes; do [ "$mode" != kv ] && [ "$mode" != delta ] && benches="cuda_bench $benches" && break; done
tests="cuda_kernel_tests$([ "${TESTS:-kernel}" = all ] && echo " hf_cuda_golden_tests" || true)"
[ "${TESTS:-kernel}" = none ] && tests="$([ -n "${TEST_ENVS:-}" ] && echo cuda_kernel_tests || true)"
# The variants: A, then one per word of PATCH (B, C, ...; "x.patch+y.patch" applies both), or
# B = A's binary under B_ENV. The trees build concurrently: the large CUDA files compile one
# per core, so one build alone leaves most of the machine idle.
# owner[i]: the variant whose build variant i runs (itself, or an earlier one with the same patches).
labels=(a) srcs=("$root") dirs=("$build/a") patches=("") envs=("") owner=(0) only=("")
if [ -n "${PATCH:-}" ]; then
  letters=(b c d e f)
  for word in $PATCH; do
    label="${letters[$((${#labels[@]} - 1))]:-}"
    [ -n "$label" ] || { echo "PATCH names more than ${#letters[@]} variants"; exit 1; }
    p="${word%%@*}" e="" m=""
    [[ "$word" = *@* ]] && e="${word#*@}" && e="${e//,/ }"
    for setting in $e; do [[ "$setting" = only=* ]] && m="${setting#only=}" && m="${m//+/ }"; done
    e="$(for setting in $e; do [[ "$setting" = only=* ]] || printf '%s ' "$setting"; done)"
    o=${#labels[@]}
    for ((j = 0; j < ${#labels[@]}; ++j)); do [ "${patches[$j]}" = "$p" ] && o=${owner[$j]} && break; done
    if [ "$o" = "${#labels[@]}" ]; then
      labels+=("$label") srcs+=("$build/src-$label") dirs+=("$build/$label")
    else
      labels+=("$label") srcs+=("${srcs[$o]}") dirs+=("${dirs[$o]}")
    fi
    patches+=("$p") envs+=("$e") owner+=("$o") only+=("$m")
  done
else
  labels+=(b) srcs+=("$root") dirs+=("$build/a") patches+=("") envs+=("") owner+=(0) only+=("")
fi
pids=()
for ((i = 0; i < ${#labels[@]}; ++i)); do
  [ "${owner[$i]}" != "$i" ] && continue
  (
    if [ -n "${patches[$i]}" ]; then
      rm -rf "${srcs[$i]}" && mkdir -p "${srcs[$i]}"
      tar -C "$root" --exclude=./.git --exclude='./build*' -cf - . | tar -C "${srcs[$i]}" -xf -
      IFS='+' read -ra parts <<< "${patches[$i]}"
      for f in "${parts[@]}"; do
        [[ "$f" = /* ]] || f="$root/$f"
        (cd "${srcs[$i]}" && patch -p1 --quiet < "$f") || { echo "$f does not apply"; exit 1; }
      done
      build_tree "${srcs[$i]}" "${dirs[$i]}" "${labels[$i]}" $benches $tests
    else
      build_tree "${srcs[$i]}" "${dirs[$i]}" "${labels[$i]}" $benches
    fi
  ) &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || exit 1; done
elapsed built

# variant_test SECONDS "ENV=VALUE ..." TEST [ARGS...]: a test binary of variant $i, run in its source
# tree under B_ENV and the given environment (may be empty), appended to $log.
variant_test() {
  local seconds="$1" extra_env="$2" test="$3"
  shift 3
  (cd "${srcs[$i]}" && env ${B_ENV:-} ${envs[$i]} $extra_env timeout "$seconds" "${dirs[$i]}/tests/$test" "$@") >> "$log" 2>&1
}
# The tests of each variant but A (A's binary under B_ENV and the variant's settings where it
# has no patch).
for ((i = 1; i < ${#labels[@]}; ++i)); do
  [ -z "$tests" ] && break
  log="$results/tests-${labels[$i]}.log"
  : > "$log"
  if [ "${owner[$i]}" = 0 ]; then
    ninja -C "${dirs[$i]}" -j"$(nproc)" $tests > "$logs/build-tests.log" 2>&1 || { echo "test build failed"; exit 1; }
  fi
  [ "${TESTS:-kernel}" != none ] && variant_test 150 "" kernels/cuda/cuda_kernel_tests
  [ "${TESTS:-kernel}" = all ] && variant_test 300 "" diff/hf/hf_cuda_golden_tests
  IFS=';' read -ra test_envs <<< "${TEST_ENVS:-}"
  for t in "${test_envs[@]}"; do
    read -r test_env test_filter <<< "$t"
    echo "## cuda_kernel_tests with $test_env, filter ${test_filter:-*}" >> "$log"
    variant_test 150 "$test_env" kernels/cuda/cuda_kernel_tests --gtest_filter="${test_filter:-*}"
  done
  elapsed "tests of ${labels[$i]^^}"
  echo "## tests of ${labels[$i]^^}"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|^## " "$log" || true
done
wait
elapsed checkpoint

# One run of a mode by binary $1 with environment $2 (may be empty); its whole output stays in
# $build/last-run.log, whose tail names the error of a failed run.
run_mode() {
  case "$3" in
    attention) env $2 timeout 120 "$1" --attention-only "$ckpt" 2>&1 | tee "$build/last-run.log" | grep -E "^\| (prefill|decode)" ;;
    prefill) env $2 timeout 120 "$1" --engine-only --prefill-quick "$ckpt" 2>&1 | tee "$build/last-run.log" | grep -E "^\| prefill" ;;
    decode) env $2 timeout 150 "$1" --engine-only --decode-quick "$ckpt" 2>&1 | tee "$build/last-run.log" | grep -E "^\| decode" ;;
    gemm) env $2 timeout 150 "$1" --gemm-only "$ckpt" 2>&1 | tee "$build/last-run.log" | grep -E "^\|" ;;
    kv)  # each format's row, named by its scenario ("## batch 1, 32k context" -> "b1 32k bf16")
      env $2 timeout 150 "$(dirname "$1")/cuda_kv_bench" --formats "${KV_FORMATS:-bf16,int8,int4}" 2>&1 |
        awk '/^## / { s = "" } /^## batch [0-9]+, [0-9]+k context/ { s = "b" $3 " " $4; sub(/,/, "", s) }
             /^\| [a-z0-9]+ \| [0-9.]+ \|/ && s != "" { sub(/^\| /, "| " s " "); print }' ;;
    delta)  # the gated delta rule's rows: decode by sequences, prefill by rows
      env $2 timeout 120 "$(dirname "$1")/cuda_delta_rule_bench" 2>&1 | tee "$build/last-run.log" |
        awk '/^## Decode/ { s = "decode seqs" } /^## Prefill/ { s = "prefill rows" }
             /^\| [0-9]+ \|/ { sub(/^\| /, "| " s " "); print }' ;;
    clocks)  # cuBLAS and ours in blocks, nvidia-smi sampling meanwhile, joined per block
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader,nounits -lms 20 > "$build/smi.csv" 2>&1 &
      local smi=$!
      env $2 timeout 150 "$1" --gemm-clocks "$ckpt" > "$build/blocks.md" 2>&1
      kill "$smi"
      python3 "$root/bench/cuda/gemm_clocks.py" "$build/blocks.md" "$build/smi.csv"
      cat "$build/blocks.md" "$build/smi.csv" >> "$results/clocks-raw.log" ;;
    *) echo "unknown mode $3" ;;
  esac
}
{
  what="B = the A binary"
  [ -n "${PATCH:-}" ] && what="variants B, C, ...: $PATCH"
  echo "# A/B: A = this tree; $what${B_ENV:+; every variant run with $B_ENV}; alternating processes"
  for ((i = 1; i < ${#labels[@]}; ++i)); do
    [ -n "${envs[$i]}${only[$i]}" ] &&
      echo "# ${labels[$i]^^}: ${patches[$i]:-the A build} with ${envs[$i]:-no settings}${only[$i]:+, modes ${only[$i]}}"
  done
  for mode in $modes; do
    rounds_var="ROUNDS_$mode"
    active=()
    for ((i = 0; i < ${#labels[@]}; ++i)); do
      [ -n "${only[$i]}" ] && [[ " ${only[$i]} " != *" $mode "* ]] && continue
      active+=("$i")
    done
    # Round r starts at the r-th variant: the first process of a round ran with less host time
    # per step than the others in every call of one series, whatever it ran (docs/perf/cuda.md).
    for ((r = 1; r <= ${!rounds_var:-${ROUNDS:-2}}; ++r)); do
      for ((j = 0; j < ${#active[@]}; ++j)); do
        i=${active[$(((r - 1 + j) % ${#active[@]}))]}
        echo "## $mode, round $r, ${labels[$i]^^}"
        env_i=""
        [ $i -gt 0 ] && env_i="${B_ENV:-} ${envs[$i]}"
        run_mode "${dirs[$i]}/bench/cuda_bench" "$env_i" "$mode" ||
          { echo "(failed)"; tail -n 3 "$build/last-run.log" 2>/dev/null | sed 's/^/    /'; }
      done
    done
  done
} | tee "$results/ab.md"
python3 "$root/bench/cuda/ab_summary.py" "$results/ab.md" | tee -a "$results/ab.md"
elapsed done
