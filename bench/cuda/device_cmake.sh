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
