#!/usr/bin/env bash
# A before/after GPU run for a change that must not slow any kernel (#28: "each case within 3%"),
# started detached (setsid) so that it outlives a device call:
#   1. builds this tree (build/ab-new: Release, sm_90, benchmarks on) for every program but
#      test_matmul_gpu, then `ctest -L gpu` (both launch paths) there;
#   2. builds the baseline's bench_elementwise, bench_reduce, bench_matmul and fusex-tour from
#      .ab/old (the baseline's sources: `git archive BASE | tar -x -C .ab/old`, with .ab/old/COMMIT
#      naming it; carry [".debs", ".ab"]) in build/ab-old, beside the tests;
#   3. runs each benchmark program and fusex-tour old, new, old, new (ROUNDS pairs, default 1),
#      with the GPU to itself, JSON named <program>-<commit>-{old,new}-r<round>.json;
#   test_matmul_gpu is built beside steps 1-2 at low priority within MATMUL_BUDGET seconds (default
#   900; its small-M TU ran past 20 minutes here before 5dfdcb2), stopped during step 3, and run
#   both ways at the end.
#   BENCHES (space-separated) picks the benchmark programs; TARGETS (space-separated) limits the
#   new build to those targets and CTEST_ARGS picks the tests (default -L gpu); TOUR=0 skips
#   fusex-tour and MATMUL_BUDGET=0 test_matmul_gpu (a short run on little device time); TOUR_ONE=1
#   also runs the new tour's chain with --chain-one-expression;
#   FILTER_<program> (e.g. FILTER_bench_reduce='bm_copy|bm_column') runs only the cases it matches.
# Logs and JSON: /tmp/ab, packed by `wait` as $OUT/ab.tar.gz.
# Usage: COMMIT=<new commit> tools/maintainer/device_ab.sh start | wait SECONDS
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
L=/tmp/ab
OUT=${OUT:-/tmp/out}
if [ "${1:-}" = start ]; then
  mkdir -p $L /tmp/prefix
  for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
  setsid bash "$0" run > $L/run.out 2>&1 < /dev/null &
  sleep 2; echo started
  exit 0
fi
if [ "${1:-}" = wait ]; then
  end=$(( $(date +%s) + ${2:-500} ))
  while [ "$(date +%s)" -lt "$end" ]; do
    grep -q "] end" $L/steps.log 2>/dev/null && break
    sleep 10
  done
  cat $L/steps.log
  grep -hE "FAILED:|error:" $L/build-*.log | head -10
  [ -f $L/ctest.log ] && grep -E "tests passed|\(Failed\)|\(Not Run\)|\(Timeout\)|\*\*\*" $L/ctest.log | tail -25
  mkdir -p "$OUT" && tar -czf "$OUT/ab.tar.gz" -C $L . 2>/dev/null; true
  exit 0
fi
[ "${1:-}" = run ] || { echo "usage: $0 start | wait SECONDS" >&2; exit 2; }
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64
stamp() { echo "[$(date +%T)] $*" >> "$L/steps.log"; }
new_commit=${COMMIT:-new}
old_commit=$(cat .ab/old/COMMIT 2>/dev/null || echo old)
# shellcheck disable=SC2206  # BENCHES is a space-separated list
benches=(${BENCHES:-bench_elementwise bench_reduce bench_matmul})
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv > "$L/gpu.txt" 2>&1
stamp "start: new $new_commit, old $old_commit"
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DFUSEX_BUILD_BENCHMARKS=ON > "$3" 2>&1; }
cfg . build/ab-new "$L/build-new.log"
targets=${TARGETS:-$(ninja -C build/ab-new -t targets all | grep -oE '^[a-z][a-z0-9_-]*: phony' | cut -d: -f1 |
  grep -vE '^(all|test|install|edit_cache|rebuild_cache|list_install_components|test_matmul_gpu|docs|cmake_.*)$')}
# shellcheck disable=SC2086  # one target per word
cmake --build build/ab-new -j 16 --target $targets -- -k 0 >> "$L/build-new.log" 2>&1
stamp "new build (all but test_matmul_gpu) exit $?"
# test_matmul_gpu beside the rest, at low priority and with a time limit: its small-M TU ran past
# 20 minutes here before 5dfdcb2. Run at the end if it was built.
# It runs in its own process group, stopped (SIGSTOP) while the benchmarks run so that they do not
# share the CPU with nvcc, and continued after them.
matmul_pid=
if [ "${MATMUL_BUDGET:-900}" != 0 ]; then
  setsid bash -c '
    t0=$(date +%s)
    timeout "${MATMUL_BUDGET:-900}" nice -n 10 cmake --build build/ab-new -j 6 --target test_matmul_gpu > "$0/build-matmul.log" 2>&1
    rc=$?  # (before the echo: its $(date) would reset $?)
    echo "[$(date +%T)] test_matmul_gpu build exit $rc after $(($(date +%s) - t0)) s (its clock ran while it was stopped; 124: out of time)" >> "$0/steps.log"
  ' "$L" < /dev/null &
  matmul_pid=$!
fi
(
  cfg .ab/old build/ab-old "$L/build-old.log"
  tour_target=fusex-tour; [ "${TOUR:-1}" = 0 ] && tour_target=
  # shellcheck disable=SC2086  # tour_target may be empty
  cmake --build build/ab-old -j 12 --target "${benches[@]}" $tour_target >> "$L/build-old.log" 2>&1
  stamp "old build (benchmarks, fusex-tour) exit $?"
) &
old_pid=$!
# shellcheck disable=SC2086  # several arguments
(cd build/ab-new && timeout 420 ctest ${CTEST_ARGS:--L gpu} -j 4 --timeout 300 --output-on-failure > "$L/ctest.log" 2>&1)
stamp "ctest -L gpu (new) exit $?"
wait $old_pid
[ -n "$matmul_pid" ] && kill -STOP -- -"$matmul_pid" 2>/dev/null && stamp "test_matmul_gpu build stopped for the benchmarks"
for ((r = 1; r <= ${ROUNDS:-1}; ++r)); do
  for b in "${benches[@]}"; do
    for side in old new; do
      c=$old_commit; [ $side = new ] && c=$new_commit
      exe=$(find "build/ab-$side/bench" -name "$b" -type f | head -1)
      filter_var="FILTER_$b"
      filter=()
      [ -n "${!filter_var:-}" ] && filter=(--benchmark_filter="${!filter_var}")
      timeout "${BENCH_TIMEOUT:-240}" "$exe" --benchmark_out="$L/$b-$c-$side-r$r.json" "${filter[@]}" \
        --benchmark_out_format=json --benchmark_context=commit="$c" > "$L/$b-$side-r$r.log" 2>&1
      stamp "$b $side r$r exit $?"
    done
  done
  for side in old new; do
    [ "${TOUR:-1}" = 0 ] && break
    c=$old_commit; [ $side = new ] && c=$new_commit
    timeout 180 "build/ab-$side/examples/fusex-tour" --json "$L/fusex_tour-$c-$side-r$r.json" > "$L/tour-$side-r$r.log" 2>&1
    stamp "fusex-tour $side r$r exit $?"
  done
  # TOUR_ONE=1: the new tour's chain again with each block written as one expression.
  if [ "${TOUR:-1}" != 0 ] && [ "${TOUR_ONE:-0}" = 1 ]; then
    timeout 120 build/ab-new/examples/fusex-tour --workload chain --chain-one-expression \
      --json "$L/fusex_tour-$new_commit-new-one-expression-r$r.json" > "$L/tour-new-one-r$r.log" 2>&1
    stamp "fusex-tour (chain, one expression) new r$r exit $?"
  fi
done
[ -n "$matmul_pid" ] && kill -CONT -- -"$matmul_pid" 2>/dev/null && stamp "test_matmul_gpu build continued"
[ -n "$matmul_pid" ] && wait "$matmul_pid"
if [ -x build/ab-new/tests/matmul/test_matmul_gpu ]; then
  (cd build/ab-new && ctest -R '^test_matmul_gpu' --timeout 300 --output-on-failure > "$L/ctest-matmul.log" 2>&1)
  stamp "ctest test_matmul_gpu (both launch paths) exit $?"
fi
stamp end
