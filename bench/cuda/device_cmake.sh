# Sourced by the GPU machine's scripts. device_cmake SRC BUILD [CMAKE ARGS...] configures a build of
# the CUDA tests and benchmarks without the server's dependencies, for sm_90a alone
# (TACHYON_CUDA_SM90A_ONLY: the code an H200 runs; both targets would double the CUDA compile, which
# device time pays for).
device_cmake() {
  local src="$1" dir="$2"
  shift 2
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTACHYON_SERVER=OFF -DTACHYON_TESTS=ON \
    -DTACHYON_CUDA=ON -DTACHYON_CUDA_SM90A_ONLY=ON "$@"
}

# use_device_deps [ROOT]: the Debian packages extracted under ROOT/.deps/root (bench/cuda/device_unpack.sh; ROOT
# defaults to the current folder) on the compiler's, the linker's and pkg-config's paths, where present.
use_device_deps() {
  local deps="${1:-$PWD}/.deps/root/usr"
  [ -d "$deps" ] || return 0
  export CMAKE_PREFIX_PATH="$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$deps/lib/x86_64-linux-gnu/pkgconfig:$deps/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
}
