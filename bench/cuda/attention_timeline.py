#!/usr/bin/env python3
"""Where one attention call's time goes, CTA by CTA, from a step timeline CSV (cuda_kv_bench with
TACHYON_TIMELINE_CSV in a -DTACHYON_TIMELINE=1 build; src/kernels/cuda/step_timeline.h).

For every launch in the file (grouped by grid, block and shared memory) it prints the span from the
first CTA's start to the last mark, then per CTA, as percentiles over the CTAs: start to wait
return, to staged (its K and V rows in shared memory), to computed (its chunk state written),
and, for the CTAs that merged, counted to done (the merge). Then how many CTAs were resident per
SM on average over the span and at most at once (the occupancy it got), and when CTAs started (the waves).

    attention_timeline.py kv-bf16-b1.csv[.gz] [--gbps 3350 --bytes 134e6]
"""
import argparse
import csv
import gzip
import statistics
from collections import defaultdict

WAIT, DONE, STAGED, COMPUTED, COUNTED = 0, 1, 2, 3, 4


def percentiles(xs):
    if not xs:
        return "-"
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
    return f"p10 {pick(0.1) / 1e3:.2f}  p50 {pick(0.5) / 1e3:.2f}  p90 {pick(0.9) / 1e3:.2f}  max {xs[-1] / 1e3:.2f} us"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--gbps", type=float, default=0, help="roofline GB/s, for the span's ideal time")
    ap.add_argument("--bytes", type=float, default=0, help="bytes the launch must read")
    args = ap.parse_args()
    launches = defaultdict(lambda: defaultdict(dict))  # signature -> block -> kind -> record
    with (gzip.open(args.csv, "rt") if args.csv.endswith(".gz") else open(args.csv)) as f:
        for row in csv.DictReader(f):
            r = {k: int(v) for k, v in row.items()}
            launches[(r["grid"], r["threads"], r["smem"])][(r["block"], r["sm"])][r["kind"]] = r
    for (grid, threads, smem), ctas in launches.items():
        starts = [c[WAIT]["t_call"] for c in ctas.values() if WAIT in c]
        ends = [max(m["t_call"] for k, m in c.items() if k != WAIT) for c in ctas.values() if len(c) > 1]
        if not starts or not ends:
            continue
        t0, t1 = min(starts), max(ends)
        print(f"launch: grid {grid}, {threads} threads, {smem} B shared; {len(ctas)} CTAs recorded; "
              f"span {(t1 - t0) / 1e3:.1f} us")
        if args.gbps and args.bytes:
            print(f"  ideal at {args.gbps:.0f} GB/s: {args.bytes / args.gbps / 1e3:.1f} us")
        phase = defaultdict(list)
        for c in ctas.values():
            if WAIT not in c:
                continue
            s = c[WAIT]["t_call"]
            phase["start -> wait return"].append(c[WAIT]["t_return"] - s)
            if STAGED in c:
                phase["wait return -> staged"].append(c[STAGED]["t_call"] - c[WAIT]["t_return"])
            if STAGED in c and COMPUTED in c:
                phase["staged -> computed"].append(c[COMPUTED]["t_call"] - c[STAGED]["t_call"])
            if COMPUTED in c:
                phase["start -> computed"].append(c[COMPUTED]["t_call"] - s)
            if COUNTED in c and DONE in c:
                phase["counted -> done (merge)"].append(c[DONE]["t_call"] - c[COUNTED]["t_call"])
                phase["merge ends before the span's end by"].append(t1 - c[DONE]["t_call"])
        for name, xs in phase.items():
            print(f"  {name:38s} {percentiles(xs)}  ({len(xs)} CTAs)")
        # Residency: each CTA from its start to its last mark, summed per SM over the span.
        busy = defaultdict(int)
        for (block, sm), c in ctas.items():
            if WAIT in c and len(c) > 1:
                busy[sm] += max(m["t_call"] for k, m in c.items() if k != WAIT) - c[WAIT]["t_call"]
        if busy:
            mean = statistics.mean(busy.values()) / (t1 - t0)
            print(f"  CTAs resident per SM over the span: mean {mean:.2f} ({len(busy)} SMs)")
        # The most CTAs one SM held at once (each from its wait to its last mark): the occupancy the
        # kernel got, which registers and shared memory bound.
        events = defaultdict(list)
        for (block, sm), c in ctas.items():
            if WAIT in c and len(c) > 1:
                events[sm] += [(c[WAIT]["t_call"], 1), (max(m["t_call"] for k, m in c.items() if k != WAIT), -1)]
        most = defaultdict(int)
        for sm, ev in events.items():
            cur = peak = 0
            for _, step in sorted(ev):
                cur += step
                peak = max(peak, cur)
            most[peak] += 1
        if most:
            print("  most CTAs resident on one SM at once: " +
                  ", ".join(f"{k} on {v} SMs" for k, v in sorted(most.items())))
        first = sorted(starts)
        bins = 10
        width = max(1, (t1 - t0) // bins)
        hist = [0] * bins
        for s in first:
            hist[min(bins - 1, (s - t0) // width)] += 1
        print(f"  CTA starts per tenth of the span: {hist}")


if __name__ == "__main__":
    main()
