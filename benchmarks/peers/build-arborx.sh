#!/bin/sh
# Builds the peer's EMST driver (arborx_emst.cpp) against Kokkos (CUDA) and
# ArborX source trees, for benchmarks/gpu.py --reference.  No GPU is needed
# to build; the binary runs where the CUDA driver is.
#
#   sh benchmarks/peers/build-arborx.sh KOKKOS_SRC ARBORX_SRC BUILD_DIR
#
# The measured figures used Kokkos 4.6.01 and ArborX 2.1.99 (1112ce6e),
# built with CUDA 13.0 for sm_90: Kokkos 4.6.01 predates CUDA 13, so a copy
# of its tree gets kokkos-4.6.01-cuda13-sm90.patch (three runtime calls
# whose signatures CUDA 13 changed, and nvcc_wrapper's default sm_90).
# Where the build host has no driver library (no GPU), CUDA_DRIVER_STUB
# names a stand-in libcuda.so whose soname is libcuda.so.1 (the real one
# is loaded at run time).  JOBS: parallel compiles (default: all cores).
set -eu
kokkos_src=$(realpath "$1"); arborx_src=$(realpath "$2"); build=$(realpath -m "$3")
here=$(dirname "$(realpath "$0")")
jobs=${JOBS:-$(nproc)}
driver=""
if [ -n "${CUDA_DRIVER_STUB:-}" ]; then driver="-DCUDA_cuda_driver_LIBRARY=$CUDA_DRIVER_STUB"; fi
mkdir -p "$build"
rm -rf "$build/kokkos-src"
cp -r "$kokkos_src" "$build/kokkos-src"
if grep -q 'default_arch="sm_70"' "$build/kokkos-src/bin/nvcc_wrapper"; then
  (cd "$build/kokkos-src" && patch -p1 < "$here/kokkos-4.6.01-cuda13-sm90.patch")
fi
cxx="$build/kokkos-src/bin/nvcc_wrapper"
cmake -S "$build/kokkos-src" -B "$build/kokkos" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_SERIAL=ON \
  -DKokkos_ARCH_HOPPER90=ON -DBUILD_SHARED_LIBS=OFF \
  -DCMAKE_INSTALL_PREFIX="$build/install" $driver
cmake --build "$build/kokkos" -j "$jobs" --target install
cmake -S "$arborx_src" -B "$build/arborx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$build/install" -DCMAKE_INSTALL_PREFIX="$build/install" $driver
cmake --build "$build/arborx" -j "$jobs" --target install
cmake -S "$here" -B "$build/driver" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$build/install" $driver
cmake --build "$build/driver" -j "$jobs"
echo "$build/driver/arborx_emst"
