#!/usr/bin/env bash
# DFlash at the engine's defaults ({"method":"dflash"}: auto-k, trees or chains as measured, the
# gates) of two tachyon builds, A and B, on the demo model: rounds alternate plain decoding (B's
# binary), A and B, so that every ratio to plain is taken within one round (the 2-core VMs' speed
# moves 20-40% between runs). Prints each run and the medians per workload and build: the ratio to
# plain decoding, tokens per verify step, and in how many runs a gate switched DFlash off.
#   bench/spec/ab_dflash_auto.sh OLD/build/tachyon NEW/build/tachyon [rounds (5)]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
a="$1" b="$2" rounds="${3:-5}"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
field() { sed -n "s/$1/\\1/p"; }
for w in code_completion code_edit prose; do
  ids="$(tr -s ' \n' ',,' < "$root/bench/spec/prompts/$w.ids" | sed 's/^,//; s/,$//')"
  for r in $(seq "$rounds"); do
    plain=$("$b" run --ids "$ids" -n 256 --temperature 0 --no-pld --no-drafter --no-mtp 2>&1 >/dev/null |
      field '.* generated, \([0-9.]*\) tok\/s.*')
    for build in A B; do
      bin=$a; [[ $build == B ]] && bin=$b
      line=$("$bin" run --ids "$ids" -n 256 --temperature 0 --speculative-config '{"method":"dflash"}' 2>&1 >/dev/null |
        grep generated)
      tps=$(field '.* generated, \([0-9.]*\) tok\/s.*' <<< "$line")
      steps=$(field '.*, \([0-9.]*\) tokens\/step.*' <<< "$line")
      gate=$(grep -o "off by [a-z_]*" <<< "$line" || true)
      echo "$w $r $build $plain $tps ${steps:-0} ${gate:+gated}" | tee -a "$tmp"
    done
  done
done
python3 - "$tmp" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[2]), []).append((float(f[4]) / float(f[3]), float(f[5]), len(f) > 6))
print("\n| workload | build | median ratio to plain | median tokens/step | runs gated off |")
print("|---|---|---:|---:|---:|")
for (w, build), v in rows.items():
    print(f"| {w} | {build} | {statistics.median(x[0] for x in v):.3f} | {statistics.median(x[1] for x in v):.2f} | "
          f"{sum(x[2] for x in v)} of {len(v)} |")
PY
