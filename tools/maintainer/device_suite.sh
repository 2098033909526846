#!/usr/bin/env bash
# One device session's GPU evidence for a commit, started in the background (setsid) so that it
# outlives a call:
#   1. builds build/gpu-gates: Release (NDEBUG), everything the gates need (FUSEX_GPU_GATES=ON)
#      but test_matmul_gpu, which comes built from the CPU machine in .carry/
#      (tools/maintainer/build_carried_matmul.sh; carry [".debs", ".carry"]), while its small-M TU,
#      20+ minutes with the device's g++ 13, is compiled beside the gates with its phases timed;
#   2. runs tools/ci/gpu_gates.sh on it (compute-sanitizer memcheck, racecheck, synccheck, initcheck
#      over every GPU test in both launch paths, then the stress and >2^31-element tests) while
#      build/gpu-asserts (Release flags without -DNDEBUG: the arena's thorough checks on, as in
#      CMake's default build type) builds beside it at a lower priority;
#   3. then, with the GPU to itself, `ctest -L gpu` (both launch paths) in each build.
# The steps are tools/maintainer/device_suite_run.sh.
# With MUTATIONS=1 it also builds a copy of the tree with three deliberate bugs (softmax * 0,
# layer_norm with the sample variance, isinf always true) and runs test_reduce_gpu and
# test_elementwise_gpu there: each must fail.
# Logs: /tmp/suite (ctest-*.log, build-*.log, steps.log, out/gpu_gates, and the small-M compile's
# matmul-phases.csv, small_m-*.log/txt),
# packed by `wait` as $OUT/suite.tar.gz.
# Usage: tools/maintainer/device_suite.sh start | wait SECONDS (prints progress, packs $OUT)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
L=/tmp/suite
OUT=${OUT:-/tmp/out}
if [ "${1:-}" = start ]; then
  mkdir -p $L/out /tmp/prefix
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
  # The gates write under /tmp/suite/out: each device call has an $OUT of its own, so `wait` packs
  # the whole of /tmp/suite into the $OUT of its call.
  # shellcheck disable=SC2097,SC2098  # OUT is meant to be the outer $L/out
  L=$L OUT=$L/out setsid bash tools/maintainer/device_suite_run.sh > $L/run.out 2>&1 < /dev/null &
  sleep 2; echo started
fi
if [ "${1:-}" = wait ]; then
  end=$(( $(date +%s) + ${2:-500} ))
  while [ "$(date +%s)" -lt "$end" ]; do
    grep -q "] end" $L/steps.log 2>/dev/null && break
    sleep 10
  done
  cat $L/steps.log
  grep -E "FAILED:|error:" $L/build-*.log | head -10
  tail -n 30 $L/out/gpu_gates/summary.txt $L/out/matmul/gpu_gates/summary.txt 2>/dev/null
  cat $L/matmul-phases.csv $L/small_m-gcc.txt 2>/dev/null | cut -c1-200
  tail -n 12 $L/small_m-ps.log 2>/dev/null
  for f in $L/ctest-*.log; do [ -e "$f" ] && { echo "== $f"; grep -E "tests passed|Failed|\*\*\*|Not Run|exit" "$f" | tail -25; }; done
  mkdir -p "$OUT" && tar -czf "$OUT/suite.tar.gz" -C $L . 2>/dev/null; true
fi
