#!/usr/bin/env python3
"""Joins `cuda_bench --gemm-clocks` blocks with nvidia-smi samples taken meanwhile.

    gemm_clocks.py BLOCKS.md SMI.csv [--sms 132]

BLOCKS.md: the bench's table (shape, kernel, start, end, calls, TFLOP/s, then the SM clock a spy
warp counted beside the kernel; start and end as nvidia-smi prints timestamps). SMI.csv: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,
temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader,nounits -lms 20`.
Prints per block the samples inside it, the mean SM clock, board power and temperature, how many
samples carry the software power cap flag (0x4), every throttle flag seen, and FLOPs per SM cycle against the bf16 dense peak of 4096 (a
Hopper SM: 989 TFLOP/s at 1830 MHz over 132 SMs): a kernel slower per cycle and one held at a lower
clock by the power cap look alike in TFLOP/s and apart here. Under the power cap nvidia-smi's clock is
not the effective one (cuBLAS measured above the peak per reported cycle), so the per-cycle columns
use the spy's clock where the table has it.
"""
import argparse
import datetime
import sys

PEAK_FLOP_PER_SM_CYCLE = 4096
POWER_CAP_FLAG = 0x4


def stamp(text):
    return datetime.datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f")


def read_blocks(path):
    blocks = []
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or not cells[4].isdigit():
            continue
        shape, kernel, start, end, calls, tflops = cells[:6]
        spy_mhz = float(cells[6]) if len(cells) > 6 else 0.0  # the bench's spy warp (clock_spy.h)
        blocks.append((shape, kernel, stamp(start), stamp(end), int(calls), float(tflops), spy_mhz))
    return blocks


def read_samples(path):
    samples = []
    for line in open(path):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 5:
            continue
        try:
            samples.append((stamp(cells[0]), float(cells[1]), float(cells[2]), int(cells[4], 16), float(cells[3])))
        except ValueError:
            continue  # a header, or a field the driver reports as N/A
    return samples


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("blocks")
    parser.add_argument("smi")
    parser.add_argument("--sms", type=int, default=132)
    args = parser.parse_args()
    blocks, samples = read_blocks(args.blocks), read_samples(args.smi)
    if not blocks:
        sys.exit(f"no blocks in {args.blocks}")
    print("| shape | kernel | TFLOP/s | samples | nvidia-smi SM MHz (mean) | spy SM MHz | board W (mean) | C (mean) | "
          "power-cap samples | flags seen | FLOP per SM cycle | of the bf16 peak |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, kernel, start, end, calls, tflops, spy_mhz in blocks:
        # The first 200 ms of a block are left out: the clock settles after a load change.
        inside = [s for s in samples if start + datetime.timedelta(milliseconds=200) <= s[0] <= end]
        if not inside:
            print(f"| {shape} | {kernel} | {tflops:.1f} | 0 | | {spy_mhz:.0f} | | | | | | |")
            continue
        mhz = sum(s[1] for s in inside) / len(inside)
        watts = sum(s[2] for s in inside) / len(inside)
        capped = sum(1 for s in inside if s[3] & POWER_CAP_FLAG)
        celsius = sum(s[4] for s in inside) / len(inside)
        flags = 0
        for s in inside:
            flags |= s[3]
        per_cycle = tflops * 1e12 / (args.sms * (spy_mhz or mhz) * 1e6)
        print(f"| {shape} | {kernel} | {tflops:.1f} | {len(inside)} | {mhz:.0f} | {spy_mhz:.0f} | {watts:.0f} | "
              f"{celsius:.0f} | {capped} | "
              f"{flags:#x} | "
              f"{per_cycle:.0f} | {100 * per_cycle / PEAK_FLOP_PER_SM_CYCLE:.1f}% |")


if __name__ == "__main__":
    main()
