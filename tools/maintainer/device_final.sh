#!/usr/bin/env bash
# The final H200 call of a session, with everything built on the CPU machine (no build here):
# prebuilt/build.tar.xz is that machine's build folder (executables and CTest files only), made by
# tools/maintainer/pack_prebuilt.sh; it is unpacked at the same absolute path so CTest finds everything.
# Runs the GPU tests (label gpu; GATES=1 adds the stress and >2^31 tests), every benchmark, and
# fusex-tour; SANITIZE="test1 test2" runs those test programs under compute-sanitizer memcheck.
# Results: $OUT/final.tar.gz. Usage: tools/maintainer/device_final.sh COMMIT
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/out}
commit=${1:-unknown}
work=/tmp/final
mkdir -p "$work" /tmp/prefix "$OUT"
start=$(date +%s)
stamp() { echo "[+$(($(date +%s) - start))s] $*" | tee -a "$work/steps.log"; }
pack() { tar -czf "$OUT/final.tar.gz" -C "$work" . 2>/dev/null; }
trap pack EXIT
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
build=$(cat prebuilt/build_dir)
mkdir -p "$build" && tar -xJf prebuilt/build.tar.xz -C "$build" || { echo "unpack failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$work/gpu.txt"
stamp "unpacked"
(cd "$build" && timeout "${TEST_BUDGET:-180}" ctest -L gpu -j 4 --timeout 170 --output-on-failure > "$work/ctest.log" 2>&1)
echo "ctest exit $?"
grep -E "tests passed|tests failed|\(Failed\)|\(Not Run\)|\(Timeout\)|\*\*\*" "$work/ctest.log" | tail -30
cp "$build/Testing/Temporary/LastTest.log" "$work/" 2>/dev/null
stamp "gpu tests done"; pack
if [ -n "${GATES:-}" ]; then
  (cd "$build" && timeout 150 ctest -L "stress|large" --timeout 140 --output-on-failure > "$work/gates.log" 2>&1)
  echo "stress/large exit $?"; grep -E "tests passed|Failed|Passed|Not Run|\*\*\*" "$work/gates.log" | tail -10
  stamp "gates done"; pack
fi
stampd=$(date -u +%Y-%m-%d)
for exe in $(find "$build/bench" -maxdepth 2 -type f -name 'bench_*' -perm -u+x | sort); do
  name=$(basename "$exe")
  if [ -n "${BENCH_ONLY:-}" ] && ! [[ "$name" =~ ${BENCH_ONLY} ]]; then continue; fi
  timeout 150 "$exe" ${BENCH_ARGS:---benchmark_min_time=0.1} --benchmark_out="$work/$name-$stampd-$commit.json" \
    --benchmark_out_format=json --benchmark_context=commit="$commit" > "$work/$name.log" 2>&1
  echo "$name exit $?"
  pack
done
stamp "benchmarks done"
timeout 120 "$build/examples/fusex-tour" --json "$work/fusex_tour-$stampd-$commit.json" > "$work/tour.log" 2>&1
echo "tour exit $?"; tail -30 "$work/tour.log"
stamp "tour done"; pack
for t in ${SANITIZE:-}; do
  exe=$(find "$build/tests" -type f -name "$t" -perm -u+x | head -1)
  [ -n "$exe" ] || continue
  timeout "${SANITIZE_BUDGET:-90}" compute-sanitizer --tool memcheck --error-exitcode 3 "$exe" > "$work/memcheck-$t.log" 2>&1
  echo "memcheck $t exit $?"; tail -3 "$work/memcheck-$t.log"
done
if [ -n "${EXTRA_CMD:-}" ]; then
  (export build; timeout "${EXTRA_BUDGET:-90}" bash -c "$EXTRA_CMD") > "$work/extra.log" 2>&1
  echo "extra exit $?"; tail -5 "$work/extra.log"
fi
stamp "done"
