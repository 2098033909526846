#!/usr/bin/env bash
# A short device run: build the elementwise and reduction suites and benchmarks, run them, keep
# JSON and logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/prefix; for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build/f -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_BENCHMARKS=ON > "$OUT/log.txt" 2>&1
cmake --build build/f --target test_elementwise_gpu test_reduce_gpu bench_elementwise bench_reduce >> "$OUT/log.txt" 2>&1 || grep -E "error|FAILED" "$OUT/log.txt" | head -20
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "${FUSEX_COMMIT:-unknown}")
for b in elementwise reduce; do
  build/f/bench/$b/bench_$b --benchmark_min_time=0.2 --benchmark_out="$OUT/bench_$b.json" --benchmark_out_format=json \
    --benchmark_context=commit="${FUSEX_COMMIT:-$commit}" >> "$OUT/bench.txt" 2>&1
done
grep -E "^bm_" "$OUT/bench.txt" | sed 's/ \+/ /g' | cut -c1-150
timeout 150 build/f/tests/expr/test_elementwise_gpu 2>&1 | tail -4
FUSEX_TEST_DEFAULT_RESOURCE=async timeout 60 build/f/tests/reduce/test_reduce_gpu 2>&1 | tail -4
timeout 40 build/f/tests/reduce/test_reduce_gpu 2>&1 | tail -3
