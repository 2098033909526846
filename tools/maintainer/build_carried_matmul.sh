#!/usr/bin/env bash
# Builds test_matmul_gpu on the CPU machine, Release and Release-without-NDEBUG as device_suite
# configures them, into .carry/{rel,asserts}/ (ignored) for device_suite.sh to carry: its small-M
# TU compiles for 20+ minutes with the device's g++ 13 as nvcc's host compiler (2 with g++ 12).
# About 12 minutes on 2 cores. Usage: tools/maintainer/build_carried_matmul.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_GPU_GATES=ON -DFUSEX_BUILD_EXAMPLES=OFF -DFUSEX_BUILD_BENCHMARKS=OFF)
cmake -S . -B build/carry-rel "${common[@]}" > /dev/null
cmake -S . -B build/carry-asserts "${common[@]}" -DCMAKE_CUDA_FLAGS_RELEASE=-O3 -DCMAKE_CXX_FLAGS_RELEASE=-O3 > /dev/null
for c in rel asserts; do
  flock /tmp/fusex-build.lock ninja -C "build/carry-$c" test_matmul_gpu
  mkdir -p ".carry/$c"
  cp "build/carry-$c/tests/matmul/test_matmul_gpu" ".carry/$c/"
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include tests || echo ' + local changes')," \
    "$(g++ --version | head -1), $("$NVCC" --version | tail -1)" > ".carry/$c/built-by"
done
ls -la .carry/*
