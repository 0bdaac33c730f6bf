#!/usr/bin/env python3
"""Where a decode step's device time goes, from a step timeline (cuda_bench with
TACHYON_TIMELINE_CSV in a -DTACHYON_TIMELINE=1 build; src/kernels/cuda/step_timeline.h).

Each CTA that reaches pdl_wait left (t_call, t_return): when it called the wait (it was resident)
and when the wait returned (the kernel before it had completed). Records are grouped into
launches (same grid, block and shared memory, in order of t_return); a launch's time on the
critical path is from its first wait return to the next launch's. Launches repeat per layer;
the table gives each position of the layer averaged over the middle layers of every step.

    decode_timeline.py timeline-b1.csv [--gbps 4265] [--bytes qkv=50.3e6,o=33.6e6,...]
"""
import argparse
import bisect
import csv
import statistics
import sys
from collections import defaultdict


def load(path):
    waits, marks = [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            r = {k: int(v) for k, v in row.items()}
            (waits if r["kind"] == 0 else marks).append(r)
    return waits, marks


def signature(r):
    return (r["grid"], r["threads"], r["smem"])


def group_launches(waits, gap_ns=20000):
    """Launches in stream order: a new one where the signature changes, the grid is full or
    the wait returns come more than gap_ns apart."""
    launches = []
    for r in sorted(waits, key=lambda r: r["t_return"]):
        cur = launches[-1] if launches else None
        if (cur is None or cur["sig"] != signature(r) or len(cur["ctas"]) >= r["grid"]
                or r["t_return"] - cur["t_first"] > gap_ns):
            cur = {"sig": signature(r), "t_first": r["t_return"], "ctas": [], "marks": defaultdict(list)}
            launches.append(cur)
        cur["ctas"].append(r)
    for l in launches:
        l["t_wait"] = min(c["t_return"] for c in l["ctas"])
        l["t_resident"] = min(c["t_call"] for c in l["ctas"])
    return launches


def attach_marks(launches, marks):
    """A mark belongs to the last launch of its signature whose first wait returned before it."""
    by_sig = defaultdict(list)
    for l in launches:
        by_sig[l["sig"]].append(l)
    starts = {sig: [l["t_wait"] for l in ls] for sig, ls in by_sig.items()}
    for m in marks:
        sig = signature(m)
        i = bisect.bisect_right(starts.get(sig, []), m["t_call"]) - 1
        if i >= 0:
            by_sig[sig][i]["marks"][m["kind"]].append(m["t_call"])


def split_steps(launches):
    """Steps: the whole sequence of launch signatures repeats with the step (one graph); the
    smallest period of at least 20 launches that holds from the first launch on is a step."""
    sigs = [l["sig"] for l in launches]
    for period in range(20, len(sigs) // 2 + 1):
        if all(sigs[i] == sigs[i + period] for i in range(len(sigs) - period)):
            return [launches[i:i + period] for i in range(0, len(sigs) - period + 1, period)]
    return [launches]


def layer_period(sigs):
    """(start, period) of the repeating layer block in one step's launch signatures."""
    for period in range(2, 40):
        for start in range(0, 12):
            reps = (len(sigs) - start) // period
            if reps < 4:
                continue
            if all(sigs[start + k] == sigs[start + k + period] for k in range((reps - 1) * period)):
                return start, period, reps
    return None


def us(ns):
    return ns / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--gbps", type=float, default=0.0, help="copy bandwidth of the run, for bytes-at-roofline times")
    ap.add_argument("--bytes", default="", help="position=bytes,... of the layer's matmuls (e.g. 3=50.3e6)")
    a = ap.parse_args()
    waits, marks = load(a.csv)
    launches = group_launches(waits)
    attach_marks(launches, marks)
    for i, l in enumerate(launches):
        l["critical"] = launches[i + 1]["t_wait"] - l["t_wait"] if i + 1 < len(launches) else None
    steps = split_steps(launches)
    if len(steps) < 2:
        sys.exit("no repeating step found")
    print(f"# {a.csv}: {len(waits)} waits, {len(marks)} marks, {len(launches)} launches, {len(steps)} steps")
    step_ns = [s[-1]["t_wait"] - s[0]["t_wait"] for s in steps]
    print(f"{len(steps[0])} launches per step; a step from its first wait return to its last: median "
          f"{us(statistics.median(step_ns)):.1f} us ({', '.join(f'{us(t):.1f}' for t in step_ns)})")
    gaps = [b[0]["t_wait"] - a_[-1]["t_wait"] for a_, b in zip(steps, steps[1:])]
    print(f"last wait return of a step to the next step's first (host time included): "
          f"{', '.join(f'{us(t):.1f}' for t in gaps)} us")
    sigs = [l["sig"] for l in steps[0]]
    found = layer_period(sigs)
    if not found:
        sys.exit("no repeating layer block found: " + " ".join(str(s) for s in sigs[:60]))
    start, period, reps = found
    print(f"layer block: launches {start}..{start + period - 1}, {reps} repeats; "
          f"before it {start} launches, after it {len(sigs) - start - reps * period}")
    sizes = {}
    for item in filter(None, a.bytes.split(",")):
        k, v = item.split("=")
        sizes[int(k)] = float(v)

    # Per position of the layer: layers 1 .. reps-2 of every step (the first and last layer
    # meet the embedding and the LM head). Marks: time after the launch's first wait return.
    mark_names = {2: "staged", 3: "computed", 4: "counted", 1: "done"}
    rows = []
    for p in range(period):
        crit, lead, ctas = [], [], []
        mark_first, mark_mean, mark_last = defaultdict(list), defaultdict(list), defaultdict(list)
        for s in steps:
            if [l["sig"] for l in s] != sigs:
                continue
            for layer in range(1, reps - 1):
                l = s[start + layer * period + p]
                crit.append(l["critical"])
                lead.append(l["t_wait"] - l["t_resident"])
                ctas.append(len(l["ctas"]))
                for kind, times in l["marks"].items():
                    mark_first[kind].append(min(times) - l["t_wait"])
                    mark_mean[kind].append(statistics.mean(times) - l["t_wait"])
                    mark_last[kind].append(max(times) - l["t_wait"])
        marks_text = "; ".join(
            f"{mark_names.get(k, k)} {us(statistics.mean(mark_first[k])):.1f} / {us(statistics.mean(mark_mean[k])):.1f}"
            f" / {us(statistics.mean(mark_last[k])):.1f}" for k in (2, 3, 4, 1) if mark_first[k])
        rows.append((p, crit, lead, ctas, marks_text))
    print("\n| pos | grid, threads, smem | CTAs waiting | critical us | first CTA resident before the wait us | "
          "marks after the wait: first / mean / last CTA us | bytes at the copy rate us |")
    print("|---|---|---|---|---|---|---|")
    total = 0.0
    for p, crit, lead, ctas, marks_text in rows:
        c = statistics.mean(crit)
        total += c
        sig = sigs[start + p]
        roof = f"{sizes[p] / (a.gbps * 1e3):.1f}" if p in sizes and a.gbps else ""
        print(f"| {p} | {sig[0]}, {sig[1]}, {sig[2]} | {statistics.mean(ctas):.0f} | {us(c):.2f} | "
              f"{us(statistics.mean(lead)):.1f} | {marks_text} | {roof} |")
    print(f"\nlayer: {us(total):.1f} us on the critical path; x {reps} = {us(total) * reps / 1000:.3f} ms")
    # Outside the layer block: the first launches and the tail (final norm, LM head, argmax).
    for name, idx in (("before", range(0, start)), ("after", range(start + reps * period, len(sigs)))):
        for i in idx:
            vals = [s[i]["critical"] for s in steps if [l["sig"] for l in s] == sigs and s[i]["critical"] is not None]
            if vals:
                sig = sigs[i]
                print(f"{name} launch {i}: grid {sig[0]}, threads {sig[1]}, smem {sig[2]}: "
                      f"{us(statistics.mean(vals)):.1f} us to the next wait return")
    returns = sorted({r["t_return"] for r in waits})
    steps_ns = [b - a_ for a_, b in zip(returns, returns[1:])]
    if steps_ns:
        print(f"smallest step between distinct wait returns (the timer's resolution at most): {min(steps_ns)} ns")


if __name__ == "__main__":
    main()
