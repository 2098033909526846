#!/usr/bin/env bash
# One iteration on the lent H200 (device tool), built there (16 cores; a few minutes where the CPU
# machine's two cores take forty): Catch2 and Google Benchmark unpacked from carried Debian packages
# (.debs/, `apt-get download catch2 libbenchmark-dev libbenchmark1debian`), then the named targets
# built (build/dev survives while the machine stays warm), the named tests, benchmark programs and
# fusex-tour run, logs and JSON under $OUT. Environment:
#   COMMIT   the commit the tree is (the copy has no .git)      TARGETS  build targets ("all")
#   TESTS    ctest arguments (e.g. "-L gpu"; empty: none)       BENCH    benchmark programs (regex)
#   BENCH_ARGS extra benchmark flags   BENCH_TIMEOUT seconds per program (150)
#   TOUR=1 runs fusex-tour (TOUR_ARGS: its extra flags)   EXTRA_CMD a last command (bash -c)
#   RUN_TAG  a suffix for the JSON and log names of this call's benchmark and tour runs
#   PREBUILT a folder whose files (built on the CPU machine for sm_90, e.g. test_matmul_gpu, whose
#            small-M translation unit has not finished building on the device) are copied into
#            build/dev at the same relative paths after configuring; leave their targets out of
#            TARGETS (and do not use "all"), or ninja rebuilds them there
# Everything lands in one archive, $OUT/iter.tar.gz (the tool returns at most 8 files).
set -uo pipefail
final_out=${OUT:-/tmp/out}
OUT=/tmp/iter-out
commit=${COMMIT:-unknown}
mkdir -p "$OUT" "$final_out" /tmp/prefix
pack() { tar -czf "$final_out/iter.tar.gz.part" -C "$OUT" . 2>/dev/null && mv "$final_out/iter.tar.gz.part" "$final_out/iter.tar.gz"; }
trap pack EXIT
start=$(date +%s)
stamp() { echo "[+$(($(date +%s) - start))s] $*" | tee -a "$OUT/steps.log"; pack; }  # packed after each step: a killed call still returns what it had
for f in .debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/tmp/prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt" 2>&1
if [ ! -f build/dev/build.ninja ]; then
  cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DFUSEX_BUILD_BENCHMARKS=ON -DFUSEX_GPU_GATES=ON > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
fi
stamp "configured"
if [ -n "${PREBUILT:-}" ]; then
  (cd "$PREBUILT" && find . -type f) | while read -r f; do
    mkdir -p "build/dev/$(dirname "$f")" && cp -p "$PREBUILT/$f" "build/dev/$f" && echo "prebuilt: $f"
  done
fi
timeout "${BUILD_BUDGET:-360}" cmake --build build/dev --target ${TARGETS:-all} -- -k 0 > "$OUT/build.log" 2>&1
echo "build exit $?"; grep -E "FAILED|error:" "$OUT/build.log" | head -20
stamp "built ${TARGETS:-all}"
if [ -n "${TESTS:-}" ]; then
  (cd build/dev && timeout "${TEST_BUDGET:-200}" ctest ${TESTS} -j 4 --timeout 190 --output-on-failure > "$OUT/ctest.log" 2>&1)
  echo "ctest exit $?"; grep -E "tests passed|tests failed|\(Failed\)|\(Not Run\)|\(Timeout\)|\*\*\*" "$OUT/ctest.log" | tail -20
  stamp "tests done"
fi
stampd=$(date -u +%Y-%m-%d)
for exe in $(find build/dev/bench -maxdepth 2 -type f -name 'bench_*' -perm -u+x 2>/dev/null | sort); do
  name=$(basename "$exe")
  [ -n "${BENCH:-}" ] && [[ "$name" =~ ${BENCH} ]] || continue
  timeout "${BENCH_TIMEOUT:-150}" "$exe" ${BENCH_ARGS:-} --benchmark_out="$OUT/$name-$stampd-$commit${RUN_TAG:-}.json" --benchmark_out_format=json \
    --benchmark_context=commit="$commit" > "$OUT/$name${RUN_TAG:-}.log" 2>&1
  echo "$name exit $?"
  stamp "$name done"
done
if [ -n "${TOUR:-}" ]; then
  timeout 120 build/dev/examples/fusex-tour ${TOUR_ARGS:-} --json "$OUT/fusex_tour-$stampd-$commit${RUN_TAG:-}.json" > "$OUT/tour${RUN_TAG:-}.log" 2>&1
  echo "tour exit $?"; tail -30 "$OUT/tour${RUN_TAG:-}.log"
  stamp "tour done"
fi
if [ -n "${EXTRA_CMD:-}" ]; then
  timeout "${EXTRA_BUDGET:-120}" bash -c "$EXTRA_CMD" > "$OUT/extra.log" 2>&1
  echo "extra exit $?"; tail -5 "$OUT/extra.log"
  stamp "extra done"
fi
