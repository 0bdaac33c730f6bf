#!/usr/bin/env python3
"""Writes the fuzzing ledger's tables (markdown) from bench/results/fuzz-ledger.tsv.

    tests/fuzz/fuzz_ledger.py [--ledger FILE] [--goal 3600] > tables.md

Table 1: per day, commit and target, the slices summed (CPU-seconds of the fuzzer processes,
executions, crashes, corpus size at the last slice). Table 2: cumulative per target over every
session, and how far each is from the goal (the issue's 1 CPU-hour per target, 0 crashes open).
"""
import argparse
import os


def main():
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ledger", default=os.path.join(root, "bench/results/fuzz-ledger.tsv"))
    p.add_argument("--goal", type=float, default=3600.0, help="CPU-seconds wanted per target")
    args = p.parse_args()

    rows = []
    with open(args.ledger) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if line.strip() and not line.startswith("#"):
                rows.append(dict(zip(header, line.rstrip("\n").split("\t"))))

    sessions, order = {}, []
    for r in rows:
        key = (r["date_utc"][:10], r["commit"], r["target"])
        if key not in sessions:
            sessions[key] = {"slices": 0, "cpu": 0.0, "execs": 0, "crashes": 0, "corpus": 0}
            order.append(key)
        s = sessions[key]
        s["slices"] += 1
        s["cpu"] += float(r["cpu_s"])
        s["execs"] += int(r["execs"])
        s["crashes"] += int(r["crashes"])
        s["corpus"] = int(r["corpus_files"])

    print("| date | commit | target | slices | CPU s | executions | crashes | corpus files |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for key in sorted(order, key=lambda k: (k[0], order.index(k))):
        s = sessions[key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {s['slices']} | {s['cpu']:.0f} | {s['execs']:,} | "
              f"{s['crashes']} | {s['corpus']:,} |")

    totals, targets = {}, []
    for (_, _, target), s in ((k, sessions[k]) for k in order):
        if target not in totals:
            totals[target] = {"cpu": 0.0, "execs": 0, "crashes": 0, "corpus": 0}
            targets.append(target)
        t = totals[target]
        t["cpu"] += s["cpu"]
        t["execs"] += s["execs"]
        t["crashes"] += s["crashes"]
        t["corpus"] = s["corpus"]
    print()
    print(f"| target | CPU s, all sessions | of {args.goal:.0f} s | CPU s still to go | executions | "
          "crashes found | corpus files now |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for target in targets:
        t = totals[target]
        print(f"| {target} | {t['cpu']:.0f} | {100 * t['cpu'] / args.goal:.1f}% | "
              f"{max(0.0, args.goal - t['cpu']):.0f} | {t['execs']:,} | {t['crashes']} | {t['corpus']:,} |")


if __name__ == "__main__":
    main()
