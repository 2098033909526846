#!/usr/bin/env bash
# The lead's H200 session (device tool). Lessons of session 2: the device's 10-minute command limit
# kills everything, and a full build of the GPU tests takes longer than that; a carried path is
# replaced on every call (a build folder inside it is lost). So:
#   - the build folder lives outside the tree ($BUILD, default /tmp/fusex-dev): a second call on a
#     warm machine (within its 30 s idle window) continues the build instead of starting over;
#   - every step has its own time budget (timeout), and results are packed after each step into
#     $OUT/<phase>.tar.gz (the device tool returns at most 8 files);
#   - benchmarks and fusex-tour (a few fast translation units) build and run first.
# Usage: tools/device_session.sh [bench|test|all]   (env: BUILD_BUDGET, TEST_BUDGET, BENCH_ARGS,
#        BENCH_ONLY (regex of bench programs), GATES=1 for the stress and large tests, EXTRA_CMD: a
#        command run after the tour, output in extra.log)
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:-all}
OUT=${OUT:-/tmp/out}
BUILD=${BUILD:-/tmp/fusex-dev}
work=/tmp/session/$phase
mkdir -p "$work" /tmp/prefix "$OUT"
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
commit=${FUSEX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
start=$(date +%s)
stamp() { echo "[+$(($(date +%s) - start))s] $*" | tee -a "$work/steps.log"; }
pack() { tar -czf "$OUT/$phase.tar.gz" -C "$work" . 2>/dev/null; }
trap pack EXIT

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv > "$work/gpu.txt"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_BENCHMARKS=ON -DFUSEX_GPU_GATES=ON \
  > "$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
all_targets=$(ninja -C "$BUILD" -t targets all | grep -E '^[A-Za-z0-9_.+-]+: phony' | cut -d: -f1 |
  grep -vE '^(all|clean|help|edit_cache|rebuild_cache|install.*|list_install_components|test|docs|package.*|CMakeCache.txt|cmake_object_order.*|fusex_header_checks.*)$')
build() {  # build <budget seconds> <targets...>
  local budget=$1; shift
  stamp "building $# targets (budget ${budget}s)"
  timeout "$budget" ninja -C "$BUILD" -k 0 "$@" >> "$work/build.log" 2>&1
  local rc=$?
  [ $rc -eq 124 ] && stamp "build budget spent (ninja stopped; a later call continues)"
  grep -E "^FAILED" "$work/build.log" | sort -u | head -20
  stamp "build step done (rc $rc)"
}

if [ "$phase" != test ]; then
  build "${BUILD_BUDGET:-300}" $(echo "$all_targets" | grep -E '^(bench_|fusex-tour$)')
  stamp "benchmarks"
  FUSEX_BENCH_OUT="$work" FUSEX_COMMIT="$commit" FUSEX_BENCH_ONLY="${BENCH_ONLY:-}" \
    FUSEX_BENCH_ARGS="${BENCH_ARGS:---benchmark_min_time=0.1}" \
    timeout "${BENCH_BUDGET:-240}" bench/run_all.sh "$BUILD" > "$work/bench.log" 2>&1
  echo "bench exit $?"
  pack
  if [ -x "$BUILD/examples/fusex-tour" ]; then
    timeout 120 "$BUILD/examples/fusex-tour" --json "$work/fusex_tour-$(date -u +%Y-%m-%d)-$commit.json" > "$work/tour.log" 2>&1
    echo "tour exit $?"; tail -25 "$work/tour.log"
  fi
  pack
  if [ -n "${EXTRA_CMD:-}" ]; then  # e.g. an ncu profile; $BUILD is the build folder
    (export BUILD; timeout "${EXTRA_BUDGET:-120}" bash -c "$EXTRA_CMD") > "$work/extra.log" 2>&1
    echo "extra exit $?"; tail -5 "$work/extra.log"
    pack
  fi
  stamp "benchmarks and tour done"
fi
if [ "$phase" != bench ]; then
  build "${BUILD_BUDGET:-360}" $all_targets
  (cd "$BUILD" && timeout "${TEST_BUDGET:-200}" ctest -L gpu -j 4 --timeout 180 --output-on-failure > "$work/ctest.log" 2>&1)
  echo "ctest exit $?"
  cp "$BUILD/Testing/Temporary/LastTest.log" "$work/" 2>/dev/null
  grep -E "tests passed|tests failed|\(Failed\)|\(Not Run\)|\(Timeout\)|Skipped|Exception|SEGFAULT" "$work/ctest.log" | tail -40
  pack
  stamp "tests done"
  if [ -n "${GATES:-}" ]; then
    (cd "$BUILD" && timeout 200 ctest -L "stress|large" --timeout 180 --output-on-failure > "$work/gates.log" 2>&1)
    echo "stress/large exit $?"; grep -E "tests passed|Failed|Passed|Skipped" "$work/gates.log" | tail -10
    stamp "gates done"
  fi
fi
