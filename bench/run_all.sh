#!/usr/bin/env bash
# Runs every fusex Google Benchmark program on the GPU of this machine and writes one JSON file per
# program under bench/results/ (or $FUSEX_BENCH_OUT). Usage: bench/run_all.sh [build-dir]
# Builds the `bench` preset first unless a build directory is given.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-}
if [ -z "$build" ]; then
  cmake --preset bench >/dev/null
  cmake --build --preset bench
  build=build/bench
fi
out=${FUSEX_BENCH_OUT:-bench/results}
mkdir -p "$out"
stamp=$(date -u +%Y-%m-%d)
commit=${FUSEX_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
status=0
for exe in $(find "$build/bench" -maxdepth 2 -type f -name 'bench_*' -perm -u+x | sort); do
  name=$(basename "$exe")
  # FUSEX_BENCH_ONLY: an extended regex of program names to run (default: all).
  if [ -n "${FUSEX_BENCH_ONLY:-}" ] && ! [[ "$name" =~ ${FUSEX_BENCH_ONLY} ]]; then continue; fi
  echo "=== $name"
  "$exe" --benchmark_out="$out/$name-$stamp-$commit.json" --benchmark_out_format=json \
    --benchmark_context=commit="$commit" ${FUSEX_BENCH_ARGS:-} || status=1
done
exit $status
