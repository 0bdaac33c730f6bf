#!/usr/bin/env python3
"""Where a kernel's instructions wait, read from `nvdisasm -hex` output (bench/cuda/sass.sh makes it).

Every Volta+ instruction carries its scheduling controls in bits 105-127 of its 128-bit word: the
stall count, the scoreboard it sets when its result arrives late (loads, atomics, MUFU: 0-5, 7 none),
the one it sets when its sources may be overwritten, and the mask of scoreboards it waits on before it
issues. nvdisasm prints the words but not the controls; this prints them per instruction, so one can
see where a load's or an atomic's result is actually waited for (for one, ptxas waited for an
atomic's result at the next join, and aggregated the producer's n-tile atomics over the warp with a
shuffle right after them).

  bench/cuda/sass_waits.py FILE.sass KERNEL_SUBSTRING [FROM_HEX TO_HEX] [--waits-on N]
"""
import re
import sys


def instructions(lines, kernel):
    """(address, text, stall, write_sb, read_sb, wait_mask) of the kernel whose .text label holds `kernel`."""
    inside = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('.text.'):
            if inside:
                return
            inside = kernel in line
        m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);\s+/\* (0x[0-9a-f]+) \*/', line) if inside else None
        if m and i + 1 < len(lines):
            hi = re.search(r'/\* (0x[0-9a-f]+) \*/', lines[i + 1])
            if hi:
                ctrl = int(hi.group(1), 16) >> 41
                yield (int(m.group(1), 16), m.group(2).strip(), ctrl & 0xf, (ctrl >> 5) & 7, (ctrl >> 8) & 7,
                       (ctrl >> 11) & 0x3f)
                i += 2
                continue
        i += 1


def main():
    args = sys.argv[1:]
    waits_on = None
    if '--waits-on' in args:  # the flag and its value out of the positional arguments
        at = args.index('--waits-on')
        waits_on = int(args[at + 1])
        args = args[:at] + args[at + 2:]
    if len(args) < 2:
        sys.exit(__doc__)
    lines = open(args[0]).read().split('\n')
    lo = int(args[2], 16) if len(args) > 2 else 0
    hi = int(args[3], 16) if len(args) > 3 else 1 << 40
    count = 0
    for addr, text, stall, wsb, rsb, wait in instructions(lines, args[1]):
        if not lo <= addr <= hi:
            continue
        count += 1
        if waits_on is not None and not (wait >> waits_on) & 1 and wsb != waits_on:
            continue
        sets = f'sets {wsb}' if wsb != 7 else '     '
        waits = ','.join(str(b) for b in range(6) if (wait >> b) & 1)
        print(f'{addr:06x}  {text[:72]:72s} stall {stall:2d}  {sets}  waits [{waits}]')
    print(f'{count} instructions', file=sys.stderr)


if __name__ == '__main__':
    main()
