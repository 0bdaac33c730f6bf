#!/usr/bin/env bash
# Here, before a device call: the device tool copies the working tree (64 MiB at most), and the
# tracked tree outgrew that. The weight-heavy folders travel as one xz archive of HEAD's files
# (.dpack/bulk.tar.xz, ~30% smaller) and leave the working tree through the sparse checkout;
# bench/cuda/device_unpack.sh restores them there. Run in the checkout the device tool sends.
#   bench/cuda/device_pack.sh            pack HEAD's bulky folders, shrink the working tree
#   bench/cuda/device_pack.sh --restore  full working tree again
set -euo pipefail
cd "$(dirname "$0")/../.."
bulk=(models tests/fixtures/hf tests/fixtures/quant tests/fixtures/embedding)
git sparse-checkout init --no-cone >/dev/null 2>&1 || true
if [ "${1:-}" = --restore ]; then
  git sparse-checkout set --no-cone '/*' '!/tests/fixtures/gguf/*.gguf' '!/tests/fixtures/gguf/*.reference.safetensors'
  rm -rf .dpack
  exit 0
fi
mkdir -p .dpack
grep -qx '/.dpack/' .git/info/exclude 2>/dev/null || echo '/.dpack/' >> "$(git rev-parse --git-path info/exclude)"
# The GGUF fixtures the CUDA GGUF tests read (the demo's Q4_K_M file, 10 MB, does not fit).
gguf=()
for f in tiny256-q4_0 tiny256-q6_k gemma3-q8_0 deepseek2-q4_k_m gpt-oss-mxfp4; do
  gguf+=("tests/fixtures/gguf/$f.gguf" "tests/fixtures/gguf/$f.reference.safetensors")
done
git archive HEAD "${bulk[@]}" "${gguf[@]}" | xz -6 -T2 > .dpack/bulk.tar.xz
# Extracted Debian build dependencies (docs/perf/cuda.md), when this checkout has them.
if [ -d .dslim ]; then tar -C .dslim -cf - . | xz -6 -T2 > .dpack/deps.tar.xz; fi
patterns=('/*' '!/tests/fixtures/gguf/*.gguf' '!/tests/fixtures/gguf/*.reference.safetensors')
for d in "${bulk[@]}"; do patterns+=("!/$d/"); done
git sparse-checkout set --no-cone "${patterns[@]}"
echo "packed: $(du -sh .dpack | cut -f1); carry .dpack (and .devpatch if used); on the device: bench/cuda/device_unpack.sh"
