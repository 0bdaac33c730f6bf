#!/usr/bin/env bash
# Regenerates src/tokenizer/unicode_compat.inc (see gen_unicode_compat.cpp) from the
# Hugging Face tokenizers npm package fetched by scripts/fetch_test_assets.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
node "$here/dump_onig_categories.js" "$root/.cache/npm-assets/node/node_modules" > "$tmp/onig_categories.txt"
g++ -O2 -std=c++20 "$here/gen_unicode_compat.cpp" -o "$tmp/gen" $(pkg-config --cflags --libs libpcre2-8)
"$tmp/gen" "$tmp/onig_categories.txt" > "$here/../unicode_compat.inc"
echo "wrote $here/../unicode_compat.inc"
