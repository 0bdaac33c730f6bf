# Sourced on the GPU machine. server_deps_unpack DEBS_DIR PREFIX unpacks the Debian packages that
# bench/cuda/stage_serving_assets.sh downloaded (dpkg-deb -x, nothing fetched) into PREFIX, points
# their pkg-config files at it, and sets SERVER_DEPS_CMAKE_ARGS: the prefix for CMake and pkg-config,
# and linker flags that make the binaries find those libraries on their own (DT_RPATH, which also
# serves libcurl's own dependencies), so no LD_LIBRARY_PATH leaks into the machine's Python or CUDA
# tools. The machine's own nlohmann-json is used (two copies would give two JSON ABIs).
server_deps_unpack() {
  local debs="$1" prefix="$2" f
  ls "$debs"/*.deb > /dev/null || return 1
  mkdir -p "$prefix"
  for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$prefix" || return 1; done
  rm -rf "$prefix/usr/include/nlohmann" "$prefix/usr/share/doc" "$prefix/usr/share/man"
  # Debian's .pc files name /usr; relative to each file, the prefix is three or two folders up.
  for f in "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
    [ -e "$f" ] && sed -i 's#=/usr\b#=${pcfiledir}/../../..#' "$f"
  done
  for f in "$prefix"/usr/share/pkgconfig/*.pc; do
    [ -e "$f" ] && sed -i 's#=/usr\b#=${pcfiledir}/../..#' "$f"
  done
  local libs="$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu"
  export PKG_CONFIG_PATH="$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  SERVER_DEPS_LIBS="$libs"
  SERVER_DEPS_CMAKE_ARGS=(
    "-DCMAKE_PREFIX_PATH=$prefix/usr"
    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags -Wl,-rpath,$libs -Wl,-rpath-link,$libs"
    "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags -Wl,-rpath,$libs -Wl,-rpath-link,$libs")
}
