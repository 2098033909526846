set -u
OUT=${OUT:-/tmp/out}; mkdir -p /tmp/prefix; for f in .debs/*.deb; do dpkg -x "$f" /tmp/prefix; done
export CMAKE_PREFIX_PATH=/tmp/prefix/usr PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build/q -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEX_BUILD_BENCHMARKS=ON >/dev/null 2>&1
cmake --build build/q --target test_reduce_gpu bench_reduce 2>&1 | grep -E "error|FAILED" | head -20
t=build/q/tests/reduce/test_reduce_gpu
FUSEX_TEST_DEFAULT_RESOURCE=async timeout 120 $t 2>&1 | tail -15
echo "=== with arena, cuda-gdb"
timeout 120 cuda-gdb -batch -ex run -ex bt --args $t "gpu: reductions over every axis set*" 2>&1 | grep -vE "^\[New Thread|^\[Thread" | tail -30
timeout 60 build/q/bench/reduce/bench_reduce --benchmark_filter="full_sum|column|copy/2684" 2>&1 | tail -6
FUSEX_BENCH_DEFAULT_RESOURCE=async timeout 60 build/q/bench/reduce/bench_reduce --benchmark_filter="full_sum|column|copy/2684" 2>&1 | tail -6
