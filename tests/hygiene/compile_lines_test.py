#!/usr/bin/env python3
"""No object's compile line holds the checkout's path, except the few that must.

ccache hashes the compile line: a definition holding the absolute source folder makes every object
of a clean clone in another folder (CI's) a miss, which turned a build of minutes into 20 on two
cores. Tests take the path from tests/source_dir.h (one small library); the files below keep it.

    compile_lines_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import sys

ALLOWED = {"src/cli/default_model.cpp", "tests/source_dir.cpp", "bench/pflash/pflash_bench.cpp"}

build, source = sys.argv[1], os.path.realpath(sys.argv[2])
entries = json.load(open(os.path.join(build, "compile_commands.json")))
if not entries:
    sys.exit("compile_commands.json lists no sources")
definition = re.compile(r"-D\w+=(\S+)")
offending = set()
for e in entries:
    rel = os.path.relpath(os.path.realpath(e["file"]), source)
    if rel in ALLOWED:
        continue
    if any(source in value for value in definition.findall(e.get("command") or " ".join(e.get("arguments", [])))):
        offending.add(rel)
if offending:
    print(f"{len(offending)} sources define a macro holding {source} on their compile line, e.g.:")
    for rel in sorted(offending)[:10]:
        print("  " + rel)
    print("use TACHYON_SOURCE_DIR from tests/source_dir.h (tachyon_use_test_source_dir) instead")
    sys.exit(1)
print(f"{len(entries)} compile lines checked, none holds the checkout's path outside {len(ALLOWED)} allowed sources")
