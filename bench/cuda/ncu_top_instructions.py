#!/usr/bin/env python3
"""The instructions with the most warp-state samples on an ncu source page (--page source --csv
--print-source sass), each with its three largest stall reasons.
Usage: ncu_top_instructions.py SOURCE_CSV [TOP [FLOOR_PERCENT]]"""
import csv, sys
rows = list(csv.reader(open(sys.argv[1], errors="replace")))
head = next(i for i, r in enumerate(rows) if "Source" in r and any("Sampling" in c for c in r))
cols, body = rows[head], rows[head + 1:]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
total_col = next(i for i, c in enumerate(cols) if c.startswith("Warp Stall Sampling (All"))
src = cols.index("Source")
# Each reason also has a "(Not Issued)" column, a subset of the same samples: listing both counted them twice.
reasons = [i for i, c in enumerate(cols) if (c.startswith("stall_") or c.startswith("Stall")) and "Not Issued" not in c]
total = sum(num(r[total_col]) for r in body if len(r) > total_col) or 1.0
print(f"instructions {len(body)}, samples {total:.0f}; columns: {', '.join(cols[i] for i in reasons) or 'no per-reason columns'}")
top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
for r in sorted((r for r in body if len(r) > total_col), key=lambda r: -num(r[total_col]))[:top]:
    why = sorted(((num(r[i]), cols[i]) for i in reasons if num(r[i]) > 0), reverse=True)[:3]
    print(f"{100 * num(r[total_col]) / total:5.1f}%  {r[src][:70]:70s}  " + ", ".join(f"{c} {v:.0f}" for v, c in why))
# With a third argument (a percentage): every instruction at or above it, in program order.
if len(sys.argv) > 3:
    floor = float(sys.argv[3])
    print(f"in program order, instructions with >= {floor}% of the samples:")
    for n, r in enumerate(body):
        share = 100 * num(r[total_col]) / total if len(r) > total_col else 0.0
        if share >= floor:
            print(f"{n:5d} {share:5.1f}%  {r[src][:90]}")
