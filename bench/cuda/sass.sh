#!/usr/bin/env bash
# The SASS of one CUDA source file for sm_90a, on a machine without a GPU: nvcc (CUDA 13) makes the
# cubin; the disassembler is Debian's (bookworm non-free nvidia-cuda-toolkit 11.8: nvdisasm knows
# sm_90's instructions but not the ELF header CUDA 12+ writes, so the copy it reads has the old ABI
# version and flags). Then bench/cuda/sass_waits.py reads where instructions wait.
#
#   bench/cuda/sass.sh src/kernels/cuda/matmul_stream.cu /tmp/stream.sass
#   bench/cuda/sass_waits.py /tmp/stream.sass matmul_stream_kernel --waits-on 5
#
# NVDISASM: the disassembler (default: the one extracted under /tmp/nvdisasm by this script);
# NVCC_FLAGS: more nvcc flags (e.g. -DTACHYON_ATTENTION_BF16=1).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
src="$1" out="$2"
nvdisasm="${NVDISASM:-/tmp/nvdisasm/usr/bin/nvdisasm}"
if [ ! -x "$nvdisasm" ]; then
  # apt-get download needs the non-free component in a sources list of its own, removed after.
  list=/etc/apt/sources.list.d/tachyon-nonfree.sources
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$list"
  apt-get update -qq -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- > /dev/null
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb /tmp/nvdisasm)
  rm -rf "$tmp" "$list"
fi
cubin=$(mktemp --suffix=.cubin)
nvcc -I "$root/src" -O3 -arch=sm_90a -std=c++20 ${NVCC_FLAGS:-} -cubin "$src" -o "$cubin"
python3 - "$cubin" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[8] = 7                                    # EI_ABIVERSION of CUDA 11's cubins
struct.pack_into('<I', d, 0x30, 0x5a055a)   # e_flags: sm_90, virtual sm_90, 64-bit, unified textures
open(sys.argv[1], 'wb').write(d)
EOF
"$nvdisasm" -hex "$cubin" > "$out"
rm -f "$cubin"
echo "$out: $(grep -c '^\.text\.' "$out") kernels and functions"
