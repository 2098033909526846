#!/usr/bin/env bash
# One device session's GPU evidence for a commit, started in the background (setsid) so that it
# outlives a call:
#   1. builds build/gpu-gates: Release (NDEBUG), everything the gates need (FUSEX_GPU_GATES=ON);
#   2. runs tools/ci/gpu_gates.sh on it (compute-sanitizer memcheck, racecheck, synccheck, initcheck
#      over every GPU test in both launch paths, then the stress and >2^31-element tests) while
#      build/gpu-asserts (Release flags without -DNDEBUG: the arena's thorough checks on, as in
#      CMake's default build type) builds beside it at a lower priority;
#   3. then, with the GPU to itself, `ctest -L gpu` (both launch paths) in each build.
# With MUTATIONS=1 it also builds a copy of the tree with three deliberate bugs (softmax * 0,
# layer_norm with the sample variance, isinf always true) and runs test_reduce_gpu and
# test_elementwise_gpu there: each must fail.
# Logs: /tmp/suite (ctest-*.log, build-*.log, steps.log) and $OUT/gpu_gates.
# Usage: tools/maintainer/device_suite.sh start | wait SECONDS (prints progress, packs $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$(pwd)
L=/tmp/suite
OUT=${OUT:-/tmp/out}
if [ "${1:-}" = start ]; then
  mkdir -p $L /tmp/prefix "$OUT"
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
  cat > $L/run.sh <<EOF
set -uo pipefail
cd $root
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:\$PATH OUT=$OUT
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64
stamp() { echo "[\$(date +%T)] \$*" >> $L/steps.log; }
stamp start
cmake -S . -B build/gpu-gates -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_GPU_GATES=ON > $L/build-rel.log 2>&1
cmake --build build/gpu-gates -j 16 -- -k 0 >> $L/build-rel.log 2>&1; stamp "rel build exit \$?"
cmake -S . -B build/gpu-asserts -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS_RELEASE=-O3 \
  -DCMAKE_CXX_FLAGS_RELEASE=-O3 -DFUSEX_GPU_GATES=ON > $L/build-asserts.log 2>&1
( nice -n 10 cmake --build build/gpu-asserts -j 8 -- -k 0 >> $L/build-asserts.log 2>&1; stamp "asserts build exit \$?" ) &
BUILD_DIR=build/gpu-gates STRESS_SECONDS=\${STRESS_SECONDS:-30} tools/ci/gpu_gates.sh > $L/gates.log 2>&1
stamp "gates exit \$?"
wait
(cd build/gpu-gates && ctest -L gpu -j 4 --timeout 300 --output-on-failure > $L/ctest-rel.log 2>&1; echo "ctest exit \$?" >> $L/ctest-rel.log)
stamp "ctest rel done"
(cd build/gpu-asserts && ctest -L gpu -j 4 --timeout 300 --output-on-failure > $L/ctest-asserts.log 2>&1; echo "ctest exit \$?" >> $L/ctest-asserts.log)
stamp "ctest asserts done"
if [ -n "${MUTATIONS:-}" ]; then
  rm -rf /tmp/mut && mkdir -p /tmp/mut && tar --exclude=./build --exclude=./.debs --exclude=./.git -cf - . | tar -xf - -C /tmp/mut
  cd /tmp/mut
  sed -i 's/return exp(x - logsumexp(x, axis, keepdim));/return exp(x - logsumexp(x, axis, keepdim)) * 0;/' include/fusex/expr/reduce.hpp
  sed -i 's/var(x, -1, 0.0, keepdim)/var(x, -1, 1.0, keepdim)/' include/fusex/expr/reduce.hpp
  sed -i '/struct isinf : predicate_op/,/^};/ s/if constexpr (std::is_floating_point_v<C>) return a == .*;/if constexpr (std::is_floating_point_v<C>) return true;/' include/fusex/expr/ops.hpp
  diff -r $root/include include > $L/mutations.txt
  cmake -S . -B /tmp/b/mut -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_EXAMPLES=OFF > $L/build-mut.log 2>&1
  ninja -C /tmp/b/mut test_reduce_gpu test_elementwise_gpu >> $L/build-mut.log 2>&1
  (cd /tmp/b/mut && ctest -R '^test_(reduce|elementwise)_gpu' -j 4 --timeout 300 > $L/ctest-mut.log 2>&1; echo "ctest exit \$?" >> $L/ctest-mut.log)
  stamp "mutations done"
fi
stamp end
EOF
  setsid bash $L/run.sh > $L/run.out 2>&1 < /dev/null &
  sleep 2; echo started
fi
if [ "${1:-}" = wait ]; then
  end=$(( $(date +%s) + ${2:-500} ))
  while [ $(date +%s) -lt $end ]; do
    grep -q "] end" $L/steps.log 2>/dev/null && break
    sleep 10
  done
  cat $L/steps.log
  grep -E "FAILED:|error:" $L/build-*.log | head -10
  tail -n 30 "$OUT/gpu_gates/summary.txt" 2>/dev/null
  for f in $L/ctest-*.log; do [ -e "$f" ] && { echo "== $f"; grep -E "tests passed|Failed|\*\*\*|Not Run|exit" "$f" | tail -25; }; done
  tar -czf "$OUT/suite.tar.gz" -C $L . 2>/dev/null; true
fi
