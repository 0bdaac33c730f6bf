"""Where a process's resident memory is, by kind, from /proc/PID/smaps: the soak records it next to
the RSS so that growth can be told apart (heap arenas, thread stacks, file pages, large mmaps).

    from memory_map import rss_by_kind
    rss_by_kind(pid)  # {"heap": KiB, "arenas": KiB, "stacks": KiB, "files": KiB, "anon mmaps": KiB}

Kinds:
  heap        glibc's main arena ([heap], grown with brk)
  arenas      glibc's per-thread arenas: anonymous mappings inside a 64 MiB-aligned reservation
  stacks      thread stacks (an anonymous mapping right above its guard page) and the main [stack]
  files       file-backed pages: the executable, shared libraries, mmapped model weights
  anon mmaps  every other anonymous mapping: allocations above malloc's mmap threshold (the KV
              pool, weight copies, big buffers)
"""

ARENA_ALIGN = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: every non-main arena heap starts on it
KINDS = ["heap", "arenas", "stacks", "files", "anon mmaps"]


def _mappings(pid):
    """(start, end, perms, path, rss_kib) of every mapping."""
    out = []
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 5)
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                start, end = (int(x, 16) for x in head[0].split("-"))
                path = head[5].strip() if len(head) > 5 else ""
                current = [start, end, head[1], path, 0]
                out.append(current)
            elif line.startswith("Rss:") and current is not None:
                current[4] = int(line.split()[1])
    return out


def rss_by_kind(pid):
    totals = dict.fromkeys(KINDS, 0)
    maps = _mappings(pid)
    for i, (start, end, perms, path, rss) in enumerate(maps):
        if path == "[heap]":
            kind = "heap"
        elif path == "[stack]":
            kind = "stacks"
        elif path.startswith("/"):
            kind = "files"
        elif path.startswith("["):
            kind = "files"  # [vdso], [vvar]: the kernel's, a few pages
        elif start % ARENA_ALIGN == 0 and "rw" in perms and i + 1 < len(maps) and maps[i + 1][0] == end \
                and maps[i + 1][2].startswith("---") and (maps[i + 1][1] - start) == ARENA_ALIGN:
            kind = "arenas"
        elif start % ARENA_ALIGN == 0 and "rw" in perms and (end - start) == ARENA_ALIGN:
            kind = "arenas"  # an arena heap grown to its whole reservation
        elif "rw" in perms and i > 0 and maps[i - 1][1] == start and maps[i - 1][2].startswith("---") \
                and not maps[i - 1][3]:
            kind = "stacks"  # pthread stacks sit right above their guard page (merged with a neighbour's, at times)
        else:
            kind = "anon mmaps"
        totals[kind] += rss
    return totals
