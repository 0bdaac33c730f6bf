#!/usr/bin/env bash
# Here, before a device call: the device tool copies the working tree (64 MiB at most), and the
# tracked tree outgrew that. The weight-heavy folders travel as one xz archive of HEAD's files
# (.dpack/bulk.tar.xz, ~30% smaller) and leave the working tree through the sparse checkout;
# bench/cuda/device_unpack.sh restores them there. Run in the checkout the device tool sends.
#   bench/cuda/device_pack.sh            pack HEAD's bulky folders, shrink the working tree
#   bench/cuda/device_pack.sh --gguf     pack the GGUF fixtures alone, every one of them (the
#                                        demo's Q4_K_M file too), for a call that runs only
#                                        GgufModelCuda.* and the kernel tests: the other bulky
#                                        folders stay behind (the hf goldens, the quant and
#                                        embedding tests and the demo-model tests cannot run)
#   bench/cuda/device_pack.sh --restore  full working tree again
# Measured (a clone of the tree at the change that added --gguf, with the deps; GGUF files
# compress ~12%): the default pack sends 60.8 MiB with the working tree (the demo's 10 MB GGUF file
# would take it past 64); --gguf sends 30.0 MiB. bench/cuda/run_cuda_tests.sh leaves the demo's
# GGUF test out where its file did not travel.
set -euo pipefail
cd "$(dirname "$0")/../.."
bulk=(models tests/fixtures/hf tests/fixtures/quant tests/fixtures/embedding)
# The GGUF fixtures the CUDA GGUF tests read.
gguf_fixtures=(tiny256-q4_0 tiny256-q6_k gemma3-q8_0 deepseek2-q4_k_m gpt-oss-mxfp4)
packed=("${bulk[@]}")  # what travels; every bulky folder leaves the working tree either way
if [ "${1:-}" = --gguf ]; then
  packed=()
  gguf_fixtures+=(demo-q4_k_m)
fi
git sparse-checkout init --no-cone >/dev/null 2>&1 || true
if [ "${1:-}" = --restore ]; then
  git sparse-checkout set --no-cone '/*' '!/tests/fixtures/gguf/*.gguf' '!/tests/fixtures/gguf/*.reference.safetensors'
  rm -rf .dpack
  exit 0
fi
mkdir -p .dpack
grep -qx '/.dpack/' .git/info/exclude 2>/dev/null || echo '/.dpack/' >> "$(git rev-parse --git-path info/exclude)"
gguf=()
for f in "${gguf_fixtures[@]}"; do
  gguf+=("tests/fixtures/gguf/$f.gguf" "tests/fixtures/gguf/$f.reference.safetensors")
done
git archive HEAD "${packed[@]}" "${gguf[@]}" | xz -6 -T2 > .dpack/bulk.tar.xz
# Extracted Debian build dependencies (docs/perf/cuda.md), when this checkout has them.
if [ -d .dslim ]; then tar -C .dslim -cf - . | xz -6 -T2 > .dpack/deps.tar.xz; fi
patterns=('/*' '!/tests/fixtures/gguf/*.gguf' '!/tests/fixtures/gguf/*.reference.safetensors')
for d in "${bulk[@]}"; do patterns+=("!/$d/"); done
git sparse-checkout set --no-cone "${patterns[@]}"
echo "packed: $(du -sh .dpack | cut -f1); carry .dpack (and .devpatch if used); on the device: bench/cuda/device_unpack.sh"
