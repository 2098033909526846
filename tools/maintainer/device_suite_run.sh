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
# as nvcc's host compiler; about 2 minutes with gcc 12 on the CPU machine), so test_matmul_gpu comes
# built from the CPU machine (.carry/) while that TU's compile here is diagnosed beside the gates.
targets() {
  ninja -C "$1" -t targets all | grep -oE '^[a-z][a-z0-9_-]*: phony' | cut -d: -f1 |
    grep -vE '^(all|test|install|edit_cache|rebuild_cache|list_install_components|test_matmul_gpu|docs|cmake_.*)$'
}
stamp start
cmake -S . -B build/gpu-gates -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_GPU_GATES=ON > "$L/build-rel.log" 2>&1
# shellcheck disable=SC2046
cmake --build build/gpu-gates -j 16 --target $(targets build/gpu-gates) -- -k 0 >> "$L/build-rel.log" 2>&1
stamp "rel build (all but test_matmul_gpu) exit $?"
# test_matmul_gpu built on the CPU machine from the same tree (tools/maintainer/build_carried_matmul.sh),
# carried in .carry/: the gates and ctest then cover it too.
carried() {  # carried CONFIG BUILD_DIR
  [ -x ".carry/$1/test_matmul_gpu" ] || return 1
  install -D -m 755 ".carry/$1/test_matmul_gpu" "$2/tests/matmul/test_matmul_gpu"
  stamp "test_matmul_gpu ($1) carried from the CPU machine: $(cat ".carry/$1/built-by" 2>/dev/null)"
}
skip='^test_matmul_gpu'
carried rel build/gpu-gates && skip=
(
  # Why the small-M TU compiles for 20+ minutes here (2 minutes with g++ 12 on the CPU machine):
  # the TU's own nvcc command with --time (one CSV row per phase) and -keep, and a ps snapshot of
  # nvcc's tools every 30 s (the longest-running first: this compile's, whatever builds beside it).
  obj=tests/matmul/CMakeFiles/test_matmul_gpu.dir/test_matmul_small_m_gpu.cu.o
  cmd=$(ninja -C build/gpu-gates -t commands "$obj" | tail -1 | sed "s# -o $obj\$##")
  mkdir -p /tmp/keep
  gcc --version | head -1 > "$L/small_m-gcc.txt"
  (cd build/gpu-gates && eval "timeout 1500 nice -n 5 $cmd -keep -keep-dir /tmp/keep --time $L/matmul-phases.csv -o /tmp/keep/x.o" \
    > "$L/small_m-nvcc.log" 2>&1; echo "nvcc exit $?" >> "$L/small_m-nvcc.log"; stamp "small_m nvcc done") &
  # Which of nvcc's tools is running, every 30 s (its --time row is written only when it ends):
  # at 363d0db the host compile never began within 12.5 minutes (no fatbin.c), so cudafe++ or cicc.
  sleep 5
  while pgrep -x nvcc > /dev/null; do
    { date +%T; ps -eo etime,time,rss,comm --sort=-time | grep -E 'cudafe|cicc|ptxas|cc1plus|fatbinary' | head -5; } \
      >> "$L/small_m-ps.log"
    sleep 30
  done
  wait
) &
diag=$!
cmake -S . -B build/gpu-asserts -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS_RELEASE=-O3 \
  -DCMAKE_CXX_FLAGS_RELEASE=-O3 -DFUSEX_GPU_GATES=ON > "$L/build-asserts.log" 2>&1
# shellcheck disable=SC2046
(nice -n 10 cmake --build build/gpu-asserts -j 8 --target $(targets build/gpu-asserts) -- -k 0 \
  >> "$L/build-asserts.log" 2>&1; stamp "asserts build (all but test_matmul_gpu) exit $?") &
asserts_build=$!
BUILD_DIR=build/gpu-gates SKIP=$skip STRESS_SECONDS=${STRESS_SECONDS:-30} tools/ci/gpu_gates.sh \
  > "$L/gates.log" 2>&1
stamp "gates exit $? (SKIP='$skip')"
wait $asserts_build
carried asserts build/gpu-asserts
for b in rel:gpu-gates asserts:gpu-asserts; do
  (cd "build/${b#*:}" && ctest -L gpu -j 4 --timeout 300 --output-on-failure > "$L/ctest-${b%%:*}.log" 2>&1
    echo "ctest exit $?" >> "$L/ctest-${b%%:*}.log")
  stamp "ctest ${b%%:*} done"
done
if [ -n "${MUTATIONS:-}" ]; then
  rm -rf /tmp/mut && mkdir -p /tmp/mut
  tar --exclude=./build --exclude=./.debs --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
  cd /tmp/mut || exit 1
  sed -i 's/return exp(x - logsumexp(x, axis, keepdim));/return exp(x - logsumexp(x, axis, keepdim)) * 0;/' \
    include/fusex/expr/reduce.hpp
  sed -i 's/var(x, -1, 0.0, keepdim)/var(x, -1, 1.0, keepdim)/' include/fusex/expr/reduce.hpp
  # (clang-format put isinf's floating-point return on a line of its own: ec6f459.)
  sed -i '/struct isinf : predicate_op/,/^};/ s/return a == .*;/return true;/' include/fusex/expr/ops.hpp
  diff -r "$root/include" include > "$L/mutations.txt"
  # Each mutation must have applied: a pattern that no longer matches would test nothing.
  n=$(grep -c '^>' "$L/mutations.txt")
  [ "$n" = 3 ] || echo "mutations: $n changed lines, expected 3: a pattern no longer matches" | tee -a "$L/mutations.txt"
  cmake -S . -B /tmp/b/mut -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_EXAMPLES=OFF > "$L/build-mut.log" 2>&1
  ninja -C /tmp/b/mut test_reduce_gpu test_elementwise_gpu >> "$L/build-mut.log" 2>&1
  (cd /tmp/b/mut && ctest -R '^test_(reduce|elementwise)_gpu' -j 4 --timeout 300 > "$L/ctest-mut.log" 2>&1
    echo "ctest exit $?" >> "$L/ctest-mut.log")
  stamp "mutations done"
fi
stamp "end (small_m diagnosis still running: $(kill -0 $diag 2>/dev/null && echo yes || echo no))"
