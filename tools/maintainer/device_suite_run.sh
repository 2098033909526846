#!/usr/bin/env bash
# The body of device_suite.sh (which starts it detached and waits for it); see there.
# Environment: L (log folder), OUT, STRESS_SECONDS (default 30), MUTATIONS (set: run them too).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64
stamp() { echo "[$(date +%T)] $*" >> "$L/steps.log"; }
# Every program but test_matmul_gpu: its small-M TU ran past 20 minutes on the device (gcc 13.3
# as nvcc's host compiler; about 2 minutes with gcc 12 on the CPU machine), so it builds on its
# own, timed per nvcc phase and watched with ps while the rest is gated.
targets() {
  ninja -C "$1" -t targets all | grep -oE '^[a-z][a-z0-9_-]*: phony' | cut -d: -f1 |
    grep -vE '^(all|test|install|edit_cache|rebuild_cache|list_install_components|test_matmul_gpu|docs|cmake_.*)$'
}
stamp start
cmake -S . -B build/gpu-gates -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_GPU_GATES=ON > "$L/build-rel.log" 2>&1
# shellcheck disable=SC2046
cmake --build build/gpu-gates -j 16 --target $(targets build/gpu-gates) -- -k 0 >> "$L/build-rel.log" 2>&1
stamp "rel build (all but test_matmul_gpu) exit $?"
(
  # The build itself is what is watched (no second compile of the TU): NVCC_APPEND_FLAGS adds
  # --time to each of test_matmul_gpu's nvcc runs (one CSV row per phase, named by source file).
  NVCC_APPEND_FLAGS="--time $L/matmul-phases.csv" timeout 1500 \
    cmake --build build/gpu-gates -j 4 --target test_matmul_gpu >> "$L/build-rel.log" 2>&1 &
  pid=$!
  while kill -0 $pid 2> /dev/null; do
    { date +%T; ps -eo etime,time,args --sort=-time | head -4 | cut -c1-300; } >> "$L/matmul-ps.log"
    sleep 30
  done
  wait $pid
  stamp "test_matmul_gpu build exit $?"
) &
matmul_build=$!
cmake -S . -B build/gpu-asserts -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS_RELEASE=-O3 \
  -DCMAKE_CXX_FLAGS_RELEASE=-O3 -DFUSEX_GPU_GATES=ON > "$L/build-asserts.log" 2>&1
# shellcheck disable=SC2046
(nice -n 10 cmake --build build/gpu-asserts -j 8 --target $(targets build/gpu-asserts) -- -k 0 \
  >> "$L/build-asserts.log" 2>&1; stamp "asserts build (all but test_matmul_gpu) exit $?") &
asserts_build=$!
BUILD_DIR=build/gpu-gates SKIP='^test_matmul_gpu' STRESS_SECONDS=${STRESS_SECONDS:-30} tools/ci/gpu_gates.sh \
  > "$L/gates.log" 2>&1
stamp "gates (all but test_matmul_gpu) exit $?"
wait $asserts_build
(cd build/gpu-gates && ctest -L gpu -E '^test_matmul_gpu' -j 4 --timeout 300 --output-on-failure > "$L/ctest-rel.log" 2>&1
  echo "ctest exit $?" >> "$L/ctest-rel.log")
stamp "ctest rel (all but test_matmul_gpu) done"
(cd build/gpu-asserts && ctest -L gpu -E '^test_matmul_gpu' -j 4 --timeout 300 --output-on-failure \
  > "$L/ctest-asserts.log" 2>&1; echo "ctest exit $?" >> "$L/ctest-asserts.log")
stamp "ctest asserts (all but test_matmul_gpu) done"
wait $matmul_build
if [ -x build/gpu-gates/tests/matmul/test_matmul_gpu ]; then
  (cd build/gpu-gates && ctest -R '^test_matmul_gpu' --timeout 300 --output-on-failure > "$L/ctest-rel-matmul.log" 2>&1
    echo "ctest exit $?" >> "$L/ctest-rel-matmul.log")
  OUT=$OUT/matmul BUILD_DIR=build/gpu-gates ONLY='^test_matmul_gpu' NO_STRESS=1 tools/ci/gpu_gates.sh \
    > "$L/gates-matmul.log" 2>&1
  stamp "ctest + gates test_matmul_gpu exit $?"
fi
if [ -n "${MUTATIONS:-}" ]; then
  rm -rf /tmp/mut && mkdir -p /tmp/mut
  tar --exclude=./build --exclude=./.debs --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
  cd /tmp/mut || exit 1
  sed -i 's/return exp(x - logsumexp(x, axis, keepdim));/return exp(x - logsumexp(x, axis, keepdim)) * 0;/' \
    include/fusex/expr/reduce.hpp
  sed -i 's/var(x, -1, 0.0, keepdim)/var(x, -1, 1.0, keepdim)/' include/fusex/expr/reduce.hpp
  sed -i '/struct isinf : predicate_op/,/^};/ s/if constexpr (std::is_floating_point_v<C>) return a == .*;/if constexpr (std::is_floating_point_v<C>) return true;/' \
    include/fusex/expr/ops.hpp
  diff -r "$root/include" include > "$L/mutations.txt"
  cmake -S . -B /tmp/b/mut -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_EXAMPLES=OFF > "$L/build-mut.log" 2>&1
  ninja -C /tmp/b/mut test_reduce_gpu test_elementwise_gpu >> "$L/build-mut.log" 2>&1
  (cd /tmp/b/mut && ctest -R '^test_(reduce|elementwise)_gpu' -j 4 --timeout 300 > "$L/ctest-mut.log" 2>&1
    echo "ctest exit $?" >> "$L/ctest-mut.log")
  stamp "mutations done"
fi
stamp end
