#!/usr/bin/env bash
# On a GPU machine, one device call for the A/B of a change: builds this tree (A) and this tree with
# PATCH applied (B: `patch -p1`, so no git is needed there), runs B's CUDA tests, then alternates A
# and B processes ROUNDS times per mode, so both see the same machine, clock and power cap (only
# same-call, alternating comparisons have held up on the lent H200s: bench/NOTES-cuda.md).
#
#   PATCH=bench/results/x.patch bench/cuda/ab_patch.sh
#
# Env: PATCH (a patch against this tree; empty: B is A's binary run with B_ENV), B_ENV (environment
# of B's runs, e.g. "TACHYON_WGMMA_WIDE_COST=1.0"), MODES (default "attention prefill"; also
# "decode" and "gemm"), ROUNDS (2), TESTS ("kernel" default, "all" adds the golden tests, "none"),
# TEST_ENVS (';'-separated "ENV=VALUE gtest-filter" entries: more kernel-test runs of B), BUILD
# (default /tmp/ab). Results under $OUT (or bench/results): ab.md, tests-b.log, build logs.
# Dependencies that the machine lacks are taken from $root/.deps/root (extracted Debian packages)
# when that folder exists.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
results="${OUT:-$root/bench/results}"
build="${BUILD:-/tmp/ab}"
mkdir -p "$results"
t0=$(date +%s)
elapsed() { echo "[$(($(date +%s) - t0)) s] $*"; }
if [ -d "$root/.deps/root/usr" ]; then
  deps="$root/.deps/root/usr"
  export CMAKE_PREFIX_PATH="$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$deps/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
fi
modes="${MODES:-attention prefill}"
ckpt=/dev/shm/tachyon-qwen3-8b-random
case " $modes " in
  *" prefill "* | *" decode "*)
    python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape qwen3-8b --max-gb 100 > "$results/checkpoint.log" 2>&1 & ;;
  *)
    ckpt=/dev/shm/tachyon-qwen3-8b-config
    python3 "$root/bench/cuda/make_checkpoint.py" "$ckpt" --shape qwen3-8b --config-only > "$results/checkpoint.log" 2>&1 & ;;
esac

# build SOURCE_DIR BUILD_DIR LABEL TARGETS...
build_tree() {
  local src="$1" dir="$2" label="$3"
  shift 3
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACHYON_SERVER=OFF -DTACHYON_TESTS=ON \
    -DTACHYON_CUDA=ON "-DTACHYON_ONLY_MODULES=base;io;tokenizer;chat;kernels;kv;sampling;model;spec;engine" \
    > "$results/cmake-$label.log" 2>&1 &&
    ninja -C "$dir" -j"$(nproc)" "$@" > "$results/build-$label.log" 2>&1 ||
    { echo "build $label failed"; grep -E "error|FAILED" "$results/cmake-$label.log" "$results/build-$label.log" | head -20; exit 1; }
}
tests="cuda_kernel_tests$([ "${TESTS:-kernel}" = all ] && echo " hf_cuda_golden_tests" || true)"
[ "${TESTS:-kernel}" = none ] && tests=""
build_tree "$root" "$build/a" a cuda_bench
a="$build/a/bench/cuda_bench"
b_src="$root"
b_dir="$build/a"
if [ -n "${PATCH:-}" ]; then
  b_src="$build/src-b"
  rm -rf "$b_src" && mkdir -p "$b_src"
  tar -C "$root" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$b_src" -xf -
  patch_file="$PATCH"
  [[ "$patch_file" = /* ]] || patch_file="$root/$patch_file"
  (cd "$b_src" && patch -p1 --quiet < "$patch_file") || { echo "$PATCH does not apply"; exit 1; }
  b_dir="$build/b"
fi
build_tree "$b_src" "$b_dir" b cuda_bench $tests
b="$b_dir/bench/cuda_bench"
elapsed built

log="$results/tests-b.log"
: > "$log"
if [ -n "$tests" ]; then
  (cd "$b_src" && env ${B_ENV:-} timeout 150 "$b_dir/tests/kernels/cuda/cuda_kernel_tests") >> "$log" 2>&1
  [ "${TESTS:-kernel}" = all ] &&
    (cd "$b_src" && env ${B_ENV:-} timeout 300 "$b_dir/tests/diff/hf/hf_cuda_golden_tests") >> "$log" 2>&1
  IFS=';' read -ra test_envs <<< "${TEST_ENVS:-}"
  for t in "${test_envs[@]}"; do
    read -r test_env test_filter <<< "$t"
    echo "## cuda_kernel_tests with $test_env, filter ${test_filter:-*}" >> "$log"
    (cd "$b_src" && env ${B_ENV:-} "$test_env" timeout 150 "$b_dir/tests/kernels/cuda/cuda_kernel_tests" \
      --gtest_filter="${test_filter:-*}") >> "$log" 2>&1
  done
  elapsed "tests of B"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|^## " "$log" || true
fi
wait
elapsed checkpoint

# One run of a mode by binary $1 with environment $2 (may be empty).
run_mode() {
  case "$3" in
    attention) env $2 timeout 120 "$1" --attention-only "$ckpt" 2>&1 | grep -E "^\| (prefill|decode)" ;;
    prefill) env $2 timeout 120 "$1" --engine-only --prefill-quick "$ckpt" 2>&1 | grep -E "^\| prefill" ;;
    decode) env $2 timeout 150 "$1" --engine-only --decode-quick "$ckpt" 2>&1 | grep -E "^\| decode" ;;
    gemm) env $2 timeout 150 "$1" --gemm-only "$ckpt" 2>&1 | grep -E "^\|" ;;
    *) echo "unknown mode $3" ;;
  esac
}
{
  echo "# A/B: A = this tree, B = ${PATCH:-the A binary}${B_ENV:+ with $B_ENV}; alternating processes"
  for mode in $modes; do
    for ((r = 1; r <= ${ROUNDS:-2}; ++r)); do
      echo "## $mode, round $r, A"
      run_mode "$a" "" "$mode" || echo "(failed)"
      echo "## $mode, round $r, B"
      run_mode "$b" "${B_ENV:-}" "$mode" || echo "(failed)"
    done
  done
} | tee "$results/ab.md"
elapsed done
