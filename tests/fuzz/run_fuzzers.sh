#!/usr/bin/env bash
# Builds every libFuzzer target with clang (-fsanitize=fuzzer,address,undefined over the whole
# build, not only the target file) and runs each for a stated time, one after the other.
#
#   tests/fuzz/run_fuzzers.sh [--seconds N] [--build DIR] [--corpus DIR] [--record FILE] [target ...]
#
# Each target's corpus lives in <corpus>/<target> (default build-fuzz/corpus, kept between runs):
# it starts from the seed corpus in tests/fuzz and grows with every input that found new
# coverage. Crashes, leaks and sanitizer reports land in <corpus>/artifacts/<target>/ (a crash
# becomes a regression test by copying its file into the target's seed corpus in tests/fuzz,
# which the ctest replay driver runs). The summary table (target, wall and CPU seconds, runs,
# corpus size, crashes) goes to stdout and, with --record, is appended to FILE.
# Needs: apt-get install -y clang libclang-rt-dev (clang 14 or newer and its sanitizer and libFuzzer runtimes).
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=300
build=build-asan
corpus=""
record=""
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --corpus) corpus="$2"; shift 2 ;;
    --record) record="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "run_fuzzers.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
corpus="${corpus:-build-fuzz/corpus}"

# target name -> seed corpus (the folders the replay driver's ctests use), and the default set: one
# target per parser family. Both from tests/fuzz/targets.tsv, which fuzz_rotation.py reads too.
declare -A seeds=()
defaults=()
while IFS=$'\t' read -r name seed mark; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  seeds[$name]=$seed
  [[ "$mark" == default ]] && defaults+=("$name")
done < tests/fuzz/targets.tsv
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=("${defaults[@]}")
fi
for t in "${targets[@]}"; do
  [[ -n "${seeds[$t]:-}" ]] || { echo "run_fuzzers.sh: unknown target $t (known: ${!seeds[*]})" >&2; exit 2; }
done

# The same configuration as make test-asan's (one instrumented compile serves the tests and the fuzzers).
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTACHYON_LIBFUZZER=ON -DTACHYON_SANITIZE=address,undefined -DTACHYON_BENCH=OFF -DTACHYON_CUDA=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}"

cpu="$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores"
table="| target | wall s | CPU s | runs | corpus files | crashes |"$'\n'"|---|---:|---:|---:|---:|---:|"
status=0
for t in "${targets[@]}"; do
  dir="$corpus/$t" art="$corpus/artifacts/$t"
  mkdir -p "$dir" "$art"
  cp -n "${seeds[$t]}"/* "$dir"/ 2>/dev/null || true
  log="$corpus/$t.log"
  # CPU time of the fuzzer process alone, from /proc after it ends (bash's `times` covers all children).
  start=$(date +%s)
  set +e
  /usr/bin/time -f "%U %S" -o "$corpus/$t.time" \
    "$build/tests/fuzz/"*/"$t" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$art/" "$dir" >"$log" 2>&1
  rc=$?
  set -e
  wall=$(( $(date +%s) - start ))
  cpu_s=$(awk '{printf "%.0f", $1 + $2}' "$corpus/$t.time" 2>/dev/null | tail -1)
  runs=$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*//p' "$log" | tail -1)
  files=$(find "$dir" -type f | wc -l)
  crashes=$(find "$art" -type f | wc -l)
  [[ $rc -eq 0 && $crashes -eq 0 ]] || status=1
  table+=$'\n'"| $t | $wall | ${cpu_s:-?} | ${runs:-?} | $files | $crashes |"
  echo "$t: rc=$rc wall=${wall}s cpu=${cpu_s:-?}s runs=${runs:-?} corpus=$files crashes=$crashes"
done

summary="Fuzzing $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD), ${seconds}s per target, $cpu"$'\n\n'"$table"
echo
echo "$summary"
if [[ -n "$record" ]]; then printf '%s\n\n' "$summary" >>"$record"; fi
exit $status
