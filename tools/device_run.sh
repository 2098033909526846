#!/usr/bin/env bash
# What the lead engineer runs on the lent H200 (device tool): unpack Catch2 and Google Benchmark
# from carried Debian packages, build everything (keep going past a broken target), run README's
# tests and then the benchmarks, logging under $OUT. Usage: tools/device_run.sh [tests|bench|all]
set -uo pipefail
what=${1:-all}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/prefix
for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_BENCHMARKS=ON > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
time cmake --build build/dev -- -k 0 >> "$OUT/build.log" 2>&1 || { echo "BUILD FAILURES:"; grep -E "FAILED|error" "$OUT/build.log" | head -40; }
if [ "$what" != bench ]; then
  (cd build/dev && ctest --output-on-failure -j4 ${CTEST_ARGS:-} > "$OUT/ctest.log" 2>&1); echo "ctest exit $?"
  grep -E "tests passed|Failed|Skipped|\*\*\*|Passed" "$OUT/ctest.log" | tail -40
fi
if [ "$what" != tests ]; then
  FUSEX_BENCH_OUT="$OUT" FUSEX_BENCH_ARGS="${BENCH_ARGS:-}" bench/run_all.sh build/dev > "$OUT/bench.log" 2>&1; echo "bench exit $?"
  grep -vE "^\s*$" "$OUT/bench.log" | tail -60
fi
