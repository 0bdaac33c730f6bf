#!/usr/bin/env bash
# On the device, first: restores what bench/cuda/device_pack.sh packed (the bulky folders at
# HEAD, and .deps from the extracted Debian packages). Uses tar's xz, or Python's where the
# image lacks xz.
set -euo pipefail
cd "$(dirname "$0")/../.."
extract() {  # archive destination
  mkdir -p "$2"
  if command -v xz >/dev/null; then tar -C "$2" -xJf "$1"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; fi
}
[ -f .dpack/bulk.tar.xz ] && extract .dpack/bulk.tar.xz .
if [ -f .dpack/deps.tar.xz ]; then rm -rf .deps; extract .dpack/deps.tar.xz .deps; fi
echo "unpacked: $(du -sh models tests/fixtures 2>/dev/null | tr '\n' ' ')"
