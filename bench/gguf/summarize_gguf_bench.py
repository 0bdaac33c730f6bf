#!/usr/bin/env python3
"""Ratios table of a bench/gguf/run_gguf_bench.sh record: tachyon / llama.cpp decode and prefill per file.

usage: summarize_gguf_bench.py RECORD.md   (prints a markdown table; run_gguf_bench.sh appends it)

Reads each "## FILE" section: llama-bench's markdown rows (pp512, tgN; the t/s column) and
cpu_bench's result rows (decode tok/s, prefill tok/s); where a section holds several interleaved
rounds, each figure is the median of its rounds. File sizes and bits per weight come from the
section header and the 596.05 M parameters llama-bench prints.
"""
import re
import statistics
import sys


def sections(text):
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    for part in parts:
        header, _, body = part.partition("\n")
        yield header.strip(), body


def main():
    text = open(sys.argv[1]).read()
    rows = []
    for header, body in sections(text):
        name = header.split(" ")[0]
        if not name.endswith(".gguf"):
            continue
        llama = {"pp512": [], "tg": []}
        for m in re.finditer(r"\|\s*(pp512|tg\d+)\s*\|\s*([\d.]+)", body):
            llama["tg" if m.group(1).startswith("tg") else m.group(1)].append(float(m.group(2)))
        size = re.search(r"\|\s*([\d.]+) (MiB|GiB)\s*\|\s*([\d.]+) M\s*\|", body)
        bpw = None
        if size:
            mib = float(size.group(1)) * (1024 if size.group(2) == "GiB" else 1)
            bpw = mib * 1024 * 1024 * 8 / (float(size.group(3)) * 1e6)
        ours = re.findall(r"^\| \S+\.gguf(?: \([^)]*\))? \| ([\d.]+) \|[^|]*\|[^|]*\|[^|]*\| ([\d.]+) \|", body, flags=re.M)
        if not ours or not llama["tg"] or not llama["pp512"]:
            rows.append(f"| {name} | not measured | | | |")
            continue
        dec = statistics.median(float(d) for d, _ in ours)
        pre = statistics.median(float(p) for _, p in ours)
        tg, pp = statistics.median(llama["tg"]), statistics.median(llama["pp512"])
        rows.append(
            f"| {name} | {bpw:.2f} | {min(len(ours), len(llama['tg']))} | {dec:.2f} / {tg:.2f} = **{dec / tg:.2f}x** "
            f"| {pre:.1f} / {pp:.1f} = **{pre / pp:.2f}x** |")
    print("| file | file bits/weight (llama-bench size) | rounds | decode tok/s tachyon / llama.cpp (medians) | "
          "prefill 512 tok/s tachyon / llama.cpp (medians) |")
    print("|---|---|---:|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
