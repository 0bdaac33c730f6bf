#!/usr/bin/env python3
"""Medians per variant of an ab_patch.sh run, with their ratios to A.

    python3 bench/cuda/ab_summary.py ab.md

ab.md holds blocks "## <mode>, round <r>, <VARIANT>" of cuda_bench table rows "| <name> | <value> | ...".
For every mode, every row whose first cell is a number becomes a metric (in the attention mode's table, each
shape's time: "<kernel> <rows> rows, <context> keys (us)"); the decode host-time rows also
give "<batch> device wait (us)": the host's wait after issuing the step, the device's time for the step,
which (unlike tok/s) does not carry the process's host time per step. Prints one markdown table per mode:
the metric, A's median over the rounds, then each variant's median and its ratio to A's.
"""
import re
import statistics
import sys
from collections import defaultdict

BLOCK = re.compile(r"^## (\S+), round (\d+), (\S+)$")
ROW = re.compile(r"^\| ([^|]+?) \| ([-\d.]+)(?: us of [\d.]+)? \|(.*)$")
WAIT = re.compile(r"wait ([\d.]+) us")
NUMBER = re.compile(r"^-?[\d.]+$")


def collect(lines):
    """{mode: {metric: {variant: [values in round order]}}} and each mode's variants in order of appearance."""
    values = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    variants = defaultdict(list)
    mode = variant = None
    for line in lines:
        line = line.rstrip("\n")
        m = BLOCK.match(line)
        if m:
            mode, variant = m.group(1), m.group(3)
            if variant not in variants[mode]:
                variants[mode].append(variant)
            continue
        if mode is None or not line.startswith("| "):
            if line.startswith("#"):
                mode = None  # a heading that is not a run block ends the block
            continue
        m = ROW.match(line)
        if not m:
            continue
        name, value, rest = m.group(1), float(m.group(2)), m.group(3)
        cells = [c.strip() for c in rest.split("|")]
        if mode == "attention" and len(cells) >= 3 and all(NUMBER.match(c) for c in cells[:2]):
            # "| decode | rows | context | time us | ...": one metric per shape, its time
            name, value = f"{name} {value:g} rows, {cells[0]} keys (us)", float(cells[1])
        values[mode][name][variant].append(value)
        wait = WAIT.search(rest)
        if wait and "host time per step" in name:
            values[mode][name.replace("host time per step", "device wait (us)")][variant].append(float(wait.group(1)))
    return values, variants


def summary(values, variants):
    out = []
    for mode, metrics in values.items():
        names = variants[mode]
        if len(names) < 2 or "A" not in names:
            continue
        others = [v for v in names if v != "A"]
        out.append(f"## {mode}: medians over the rounds, ratio to A")
        out.append("| metric | A | " + " | ".join(others) + " |")
        out.append("|---|" + "---|" * (1 + len(others)))
        for name, per_variant in metrics.items():
            if "A" not in per_variant:
                continue
            a = statistics.median(per_variant["A"])
            digits = 3 if abs(a) < 10 else 1  # ratios (1.029) keep their digits
            cells = [f"{a:.{digits}f}"]
            for v in others:
                if v not in per_variant:
                    cells.append("")
                    continue
                b = statistics.median(per_variant[v])
                cells.append(f"{b:.{digits}f} ({b / a:.3f})" if a else f"{b:.{digits}f}")
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ab_summary.py ab.md")
    with open(sys.argv[1]) as f:
        values, variants = collect(f)
    print(summary(values, variants))


if __name__ == "__main__":
    main()
