// bench_elementwise's random-number case: dropout, its mask drawn in the kernel.
#include "elementwise_bench.hpp"

#include <cstdint>

namespace {

using namespace ew_bench;

// Dropout (p = 0.1): the mask is computed in the kernel from (seed, offset), never stored.
template <class T>
void bm_dropout(benchmark::State& state) {
  device_buffer<T> x(rows * cols), y(rows * cols);
  auto xv = fusex::make_view(static_cast<const T*>(x.p), {rows, cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  std::uint64_t offset = 0;
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    fusex::eval(yv, fusex::dropout(xv, 0.1, 1234, offset), fusex_bench::stream());
    offset += static_cast<std::uint64_t>(rows * cols);
  });
  fusex_bench::report_bandwidth(state, double(2 * rows * cols * sizeof(T)), secs, copy_bw_for(rows * cols * sizeof(T)));
}

}  // namespace

void ew_bench::register_random_benchmarks() {
  benchmark::RegisterBenchmark("bm_dropout<float>", bm_dropout<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("bm_dropout<bfloat16>", bm_dropout<bfloat16>)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}
