#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with the project's packages, scripts/bootstrap.sh): gathers what the
# GPU machine lacks to build and run the full `tachyon serve` and its e2e SDK tests, for
# bench/cuda/run_serving.sh to unpack there (nothing is fetched there: it reaches no network).
#
#   bench/cuda/stage_serving_assets.sh DIR [debs|node|node_modules|llama|tokenizer|fixtures]...
#
#   DIR/debs/*.deb           `apt-get download` of the C++ build and runtime dependencies (the server's
#                            cpp-httplib, CLI11, libcurl and OpenSSL with their shared-library closure,
#                            fmt, spdlog, gtest, pcre2, utf8proc); unpacked there with `dpkg-deb -x`
#   DIR/node.tar.xz          the node binary (>= 20: the e2e runner uses `node --test --test-concurrency`;
#                            Debian 12's nodejs is 18) from the installed NodeSource package, which is
#                            self-contained (libc and libstdc++ only); its .deb is not downloadable here
#                            (the NodeSource source is off), so the installed binary is packed
#   DIR/node_modules.tar.xz  the e2e tests' SDKs (.cache/npm-assets/node) without type declarations,
#                            source maps and other platforms' native tokenizers
#   DIR/llama.tar.xz         llama.cpp's source (the peer, ../shared/peers/README.md) for llama-server
#                            with CUDA: CMake files, ggml (CPU and CUDA backends), src, common, tools,
#                            vendor, gguf-py and convert_hf_to_gguf.py
#   DIR/fixtures/            the GGUF fixture the e2e tests serve (tests/fixtures/gguf/demo-q4_k_m.*) and the
#                            embedding model with its goldens (tests/fixtures/embedding), which
#                            the device copy of the tree leaves out
#   DIR/qwen3-tokenizer.tar.xz  Qwen3's tokenizer.json and tokenizer_config.json (the random 8B
#                            checkpoint's tokenizer, from .cache/npm-assets/tokenizers/qwen3)
# Everything travels within the 64 MiB a device call carries only when split over calls: see
# run_serving.sh for which call needs which part.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: stage_serving_assets.sh DIR [PART]...}"
shift
parts=("$@")
((${#parts[@]})) || parts=(debs node llama tokenizer fixtures)
mkdir -p "$out"
out="$(cd "$out" && pwd)"
assets="$root/.cache/npm-assets"
llama_src="${LLAMA_SRC:-/work/peers/llama.cpp}"

# Build: headers, static config and .so links. Runtime: the shared libraries tachyon loads, with
# libcurl's whole closure (the GPU image may lack any of it) but not libc, libgcc, libstdc++ or zlib.
build_debs=(libcpp-httplib-dev libcli11-dev libcurl4-openssl-dev libssl-dev libbrotli-dev zlib1g-dev
  libfmt-dev libspdlog-dev libgtest-dev libgmock-dev libpcre2-dev libutf8proc-dev)
runtime_debs=(libcpp-httplib0.11 libcurl4 libssl3 libbrotli1 libfmt9 libspdlog1.10 libpcre2-8-0
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libutf8proc2
  libcom-err2 libdb5.3 libffi8 libgmp10 libgnutls30 libgssapi-krb5-2 libhogweed6 libidn2-0 libk5crypto3
  libkeyutils1 libkrb5-3 libkrb5support0 libldap-2.5-0 libnettle8 libnghttp2-14 libp11-kit0 libpsl5
  librtmp1 libsasl2-2 libsasl2-modules-db libssh2-1 libtasn1-6 libunistring2 libzstd1)

stage_debs() {
  rm -rf "$out/debs" && mkdir -p "$out/debs"
  (cd "$out/debs" && apt-get download -q "${build_debs[@]}" "${runtime_debs[@]}" > /dev/null)
  echo "debs: $(ls "$out/debs" | wc -l) packages, $(du -sh "$out/debs" | cut -f1)"
}

stage_node() {
  local node version
  node="$(command -v node)"
  version="$("$node" --version)"
  [[ "${version#v}" =~ ^(2[0-9]|[3-9][0-9])\. ]] || { echo "node $version: the e2e runner needs >= 20" >&2; exit 1; }
  if ldd "$node" | grep -v -E 'linux-vdso|ld-linux|lib(c|m|dl|pthread|stdc\+\+|gcc_s)\.so' | grep -q '=>'; then
    echo "$node links more than libc and libstdc++: not self-contained" >&2; exit 1
  fi
  tar -C "$(dirname "$node")" -cf - "$(basename "$node")" | xz -T0 -9 > "$out/node.tar.xz"
  echo "node $version: $(du -sh "$out/node.tar.xz" | cut -f1)"
}

stage_node_modules() {
  local nm="$assets/node/node_modules"
  [[ -d "$nm/openai" ]] || { echo "$nm lacks the SDKs: run scripts/fetch_test_assets.sh" >&2; exit 1; }
  local tmp="$out/node_modules.tar"
  tar -C "$assets/node" -cf "$tmp" \
    --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts' --exclude='*.map' --exclude='*.md' \
    --exclude='node_modules/*/src' --exclude='node_modules/@*/*/src' --exclude='tokenizers.*.node' node_modules
  tar -C "$assets/node" -rf "$tmp" node_modules/tokenizers/tokenizers.linux-x64-gnu.node
  xz -T0 -9 -c "$tmp" > "$out/node_modules.tar.xz" && rm "$tmp"
  echo "node_modules: $(du -sh "$out/node_modules.tar.xz" | cut -f1)"
}

stage_llama() {
  [[ -f "$llama_src/convert_hf_to_gguf.py" && -f "$llama_src/tools/ui/ui.h" ]] || {
    echo "$llama_src: no llama.cpp source with the llama-ui stub (../shared/peers/README.md)" >&2; exit 1; }
  local skip=()
  for b in "$llama_src"/ggml/src/ggml-*/; do
    case "$(basename "$b")" in ggml-cpu|ggml-cuda) ;; *) skip+=(--exclude="ggml/src/$(basename "$b")/*");; esac
  done
  tar -C "$llama_src" -cf - --exclude=build --exclude=tools/ui.orig --exclude='*.gguf' --exclude=.git "${skip[@]}" \
    CMakeLists.txt cmake common ggml include src tools vendor gguf-py convert_hf_to_gguf.py conversion licenses \
    LICENSE app | xz -T0 -6 > "$out/llama.tar.xz"
  echo "llama.cpp source: $(du -sh "$out/llama.tar.xz" | cut -f1)"
}

stage_fixtures() {
  rm -rf "$out/fixtures" && mkdir -p "$out/fixtures"
  cp "$root"/tests/fixtures/gguf/demo-q4_k_m.gguf "$root"/tests/fixtures/gguf/demo-q4_k_m.reference.safetensors "$out/fixtures/"
  cp -r "$root"/tests/fixtures/embedding "$out/fixtures/"  # embeddings.test.mjs's model and goldens
  echo "fixtures: $(du -sh "$out/fixtures" | cut -f1)"
}

stage_tokenizer() {
  local dir="$assets/tokenizers/qwen3"
  tar -C "$dir" -cf - tokenizer.json tokenizer_config.json | xz -T0 -9 > "$out/qwen3-tokenizer.tar.xz"
  echo "qwen3 tokenizer: $(du -sh "$out/qwen3-tokenizer.tar.xz" | cut -f1)"
}

for p in "${parts[@]}"; do
  case "$p" in
    debs) stage_debs ;;
    node) stage_node; stage_node_modules ;;
    node_modules) stage_node_modules ;;
    llama) stage_llama ;;
    tokenizer) stage_tokenizer ;;
    fixtures) stage_fixtures ;;
    *) echo "unknown part $p (debs, node, node_modules, llama, tokenizer, fixtures)" >&2; exit 1 ;;
  esac
done
