#!/usr/bin/env bash
# Runs binaries built on the CPU machine (carried in prebuilt/, built there for sm_90) on the device
# machine: no build there, so a short call measures. Usage: tools/device_probe.sh [commit]
# Env: PROBE_BENCH_ARGS (Google Benchmark flags), EXTRA_CMD (run last, in prebuilt/).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
commit=${1:-unknown}
work=/tmp/probe
mkdir -p "$work" /tmp/prefix "$OUT"
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
trap 'tar -czf "$OUT/probe.tar.gz" -C "$work" .' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$work/gpu.txt"
stamp=$(date -u +%Y-%m-%d)
cd prebuilt
for b in bench_*; do
  [ -x "$b" ] || continue
  echo "=== $b"
  timeout 150 "./$b" ${PROBE_BENCH_ARGS:---benchmark_min_time=0.1} --benchmark_out="$work/$b-$stamp-$commit.json" \
    --benchmark_out_format=json --benchmark_context=commit="$commit" > "$work/$b.log" 2>&1
  echo "$b exit $?"
done
if [ -x fusex-tour ]; then
  timeout 120 ./fusex-tour --json "$work/fusex_tour-$stamp-$commit.json" > "$work/tour.log" 2>&1
  echo "tour exit $?"; tail -22 "$work/tour.log"
fi
if [ -n "${EXTRA_CMD:-}" ]; then
  timeout "${EXTRA_BUDGET:-120}" bash -c "$EXTRA_CMD" > "$work/extra.log" 2>&1
  echo "extra exit $?"; tail -5 "$work/extra.log"
fi
