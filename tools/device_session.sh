#!/usr/bin/env bash
# The lead's H200 session in two calls on one warm machine (device tool; see docs/performance.md):
#   tools/device_session.sh test    configure, build every GPU test, example and benchmark program
#                                   (not the header checks: CI compiles those), run ctest -L gpu
#   tools/device_session.sh bench   run every benchmark program (bench/run_all.sh) and fusex-tour
#                                   --json, then the stress and large gates if time allows
# Catch2 and Google Benchmark come from Debian packages carried in .debs/. Everything that must come
# back is packed into $OUT/<phase>.tar.gz (the device tool returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
phase=${1:-test}
OUT=${OUT:-/tmp/out}
work=/tmp/session/$phase
mkdir -p "$work" /tmp/prefix
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
commit=${FUSEX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
start=$(date +%s)
stamp() { echo "[+$(($(date +%s) - start))s] $*"; }
pack() { tar -czf "$OUT/$phase.tar.gz" -C "$work" . ; }
trap pack EXIT

if [ "$phase" = test ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$work/gpu.txt"
  cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_BENCHMARKS=ON -DFUSEX_GPU_GATES=ON \
    > "$work/configure.log" 2>&1 || { tail -40 "$work/configure.log"; exit 1; }
  targets=$(ninja -C build/dev -t targets all | grep -E '^[A-Za-z0-9_.+-]+: phony' | cut -d: -f1 |
    grep -vE '^(all|clean|help|edit_cache|rebuild_cache|install.*|list_install_components|test|docs|package.*|CMakeCache.txt|cmake_object_order.*|fusex_header_checks.*)$')
  stamp "building $(echo $targets | wc -w) targets"
  ninja -C build/dev -k 0 $targets > "$work/build.log" 2>&1 || { echo "BUILD FAILURES:"; grep -E "^FAILED|error" "$work/build.log" | head -30; }
  stamp "build done"
  (cd build/dev && ctest -L gpu -LE "stress|large" -j 4 --timeout 240 --output-on-failure > "$work/ctest.log" 2>&1)
  echo "ctest exit $?"
  cp build/dev/Testing/Temporary/LastTest.log "$work/" 2>/dev/null
  grep -E "tests passed|tests failed|\(Failed\)|\(Not Run\)|\(Timeout\)|Skipped|Exception|SEGFAULT" "$work/ctest.log" | tail -40
  stamp "tests done"
else
  stamp "benchmarks"
  FUSEX_BENCH_OUT="$work" FUSEX_COMMIT="$commit" FUSEX_BENCH_ARGS="${BENCH_ARGS:---benchmark_min_time=0.1}" \
    bench/run_all.sh build/dev > "$work/bench.log" 2>&1
  echo "bench exit $?"
  stamp "benchmarks done"
  ./build/dev/examples/fusex-tour --json "$work/fusex_tour-$(date -u +%Y-%m-%d)-$commit.json" > "$work/tour.log" 2>&1
  echo "tour exit $?"; tail -30 "$work/tour.log"
  stamp "tour done"
  if [ -n "${GATES:-}" ]; then
    (cd build/dev && ctest -L "stress|large" --timeout 200 --output-on-failure > "$work/gates.log" 2>&1)
    echo "stress/large exit $?"; grep -E "tests passed|Failed|Passed|Skipped" "$work/gates.log" | tail -10
    stamp "gates done"
  fi
fi
