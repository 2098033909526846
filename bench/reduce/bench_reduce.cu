// Reduction benchmarks (issue: reductions fused with their consumers). Bytes are the minimum: every
// input read once, every output written once; each case reports copy_ratio against a
// device-to-device copy of the same input size measured in the same run.
#include <fusex/fusex.hpp>

#include <cub/device/device_reduce.cuh>

#include "fusex_bench.hpp"

#include <cstdint>
#include <map>

namespace {

using fusex::bfloat16;

__global__ void fill_kernel(float* t, std::int64_t n, float lo, float hi) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    t[i] = lo + (hi - lo) * (0.5f + 0.5f * __sinf(static_cast<float>(i % 100003) * 0.37f));
}

template <class T>
struct device_buffer {
  T* p = nullptr;
  std::int64_t n;
  explicit device_buffer(std::int64_t count, float lo = -2, float hi = 2) : n(count) {
    FUSEX_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(n) * sizeof(T)));
    // Varying, non-constant data (a sine of the index), converted to T by fusex.
    float* tmp = nullptr;
    FUSEX_CUDA_CHECK(cudaMalloc(&tmp, static_cast<std::size_t>(n) * sizeof(float)));
    fill_kernel<<<1024, 256, 0, fusex_bench::stream()>>>(tmp, n, lo, hi);
    FUSEX_CUDA_CHECK(cudaGetLastError());
    fusex::eval(fusex::make_view(p, {n}), fusex::make_view(tmp, {n}), fusex_bench::stream());
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(fusex_bench::stream()));
    FUSEX_CUDA_CHECK(cudaFree(tmp));
  }
  ~device_buffer() { cudaFree(p); }
};

std::map<std::int64_t, double>& copy_bw() {
  static std::map<std::int64_t, double> m;
  return m;
}

void bm_copy(benchmark::State& state) {
  const std::int64_t bytes = state.range(0);
  device_buffer<std::uint8_t> a(bytes, 1, 200), b(bytes, 1, 200);
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    FUSEX_CUDA_CHECK(
        cudaMemcpyAsync(b.p, a.p, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, fusex_bench::stream()));
  });
  fusex_bench::report_bandwidth(state, 2.0 * double(bytes), secs, 0);
  copy_bw()[bytes] = 2.0 * double(bytes) * double(state.iterations()) / secs;
}
double copy_for(std::int64_t bytes) { return copy_bw().count(bytes) ? copy_bw()[bytes] : 0; }

enum which { softmax_k, layer_norm_k, rms_norm_k, layer_norm_residual_k };

template <class T, which W>
void bm_rows(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  // range(2): the row kernel's register cache on (1), on with the L1 prefetch of the epilogue's
  // leaves read from memory (2), on with few rows spread over more blocks (3), on without the
  // static path (4: roles tested at run time), or off (0: each pass re-reads the row), to
  // compare the strategies in one run.
  auto& tuning = fusex::detail::row_tuning_state();
  tuning.cache = state.range(2) != 0;
  tuning.prefetch = state.range(2) == 2;
  tuning.spread_small = state.range(2) == 3;
  tuning.static_path = state.range(2) != 4;
  device_buffer<T> x(rows * cols), y(rows * cols), g(cols, 0.5f, 1.5f), b(cols, -0.5f, 0.5f);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  auto gv = fusex::make_view(g.p, {cols});
  auto bv = fusex::make_view(b.p, {cols});
  double bytes = 2.0 * double(rows * cols * sizeof(T));
  if (W != softmax_k) bytes += double(cols * sizeof(T)) * (W == rms_norm_k ? 1 : 2);
  // layer_norm(x + residual): the residual is read too.
  device_buffer<T> r(W == layer_norm_residual_k ? rows * cols : 1);
  auto rv = fusex::make_view(r.p, {W == layer_norm_residual_k ? rows : 1, W == layer_norm_residual_k ? cols : 1});
  if (W == layer_norm_residual_k) bytes += double(rows * cols * sizeof(T));
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    if constexpr (W == softmax_k) fusex::eval(yv, fusex::softmax(xv), fusex_bench::stream());
    else if constexpr (W == layer_norm_k) fusex::eval(yv, fusex::layer_norm(xv, gv, bv), fusex_bench::stream());
    else if constexpr (W == layer_norm_residual_k) fusex::eval(yv, fusex::layer_norm(xv + rv, gv, bv), fusex_bench::stream());
    else fusex::eval(yv, fusex::rms_norm(xv, gv), fusex_bench::stream());
  });
  fusex_bench::report_bandwidth(state, bytes, secs, copy_for(rows * cols * std::int64_t(sizeof(T))));
  tuning = fusex::detail::row_tuning{};
}

// Short rows as a model's step has them ([16, 256]: latency-bound kernels), 100 launches of
// layer_norm (or rms_norm) replayed from a CUDA graph, so the time is the kernels' and not the
// host's: us_per_kernel. range(0): 0 layer_norm, 1 rms_norm; range(1): the row kernel's variant,
// 0 default (one vector per thread at this size), 1 with the L1 prefetch, 2 few rows spread one
// per block, 3 four vectors per thread (fewer threads per row), 4
// without the static path.
void bm_rows_graph(benchmark::State& state) {
  constexpr std::int64_t rows = 16, cols = 256;
  constexpr int kernels = 100;
  const bool rms = state.range(0) != 0;
  const int variant = static_cast<int>(state.range(1));
  auto& tuning = fusex::detail::row_tuning_state();
  tuning.prefetch = variant == 1;
  tuning.spread_small = variant == 2;
  tuning.vectors_per_thread = variant == 3 ? 4 : 0;
  tuning.static_path = variant != 4;
  device_buffer<float> a(rows * cols), b(rows * cols), g(cols, 0.5f, 1.5f), be(cols, -0.5f, 0.5f);
  auto av = fusex::make_view(a.p, {rows, cols});
  auto bv = fusex::make_view(b.p, {rows, cols});
  auto gv = fusex::make_view(g.p, {cols});
  auto bev = fusex::make_view(be.p, {cols});
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(fusex_bench::stream(), cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kernels; ++k) {
    const auto& in = k % 2 ? bv : av;
    const auto& out = k % 2 ? av : bv;
    if (rms) fusex::eval(out, fusex::rms_norm(in, gv), fusex_bench::stream());
    else fusex::eval(out, fusex::layer_norm(in, gv, bev), fusex_bench::stream());
  }
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(fusex_bench::stream(), &graph));
  FUSEX_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  tuning = fusex::detail::row_tuning{};
  const double secs = fusex_bench::time_with_events(state, fusex_bench::stream(),
                                                    [&] { FUSEX_CUDA_CHECK(cudaGraphLaunch(exec, fusex_bench::stream())); });
  state.counters["us_per_kernel"] = secs * 1e6 / (double(state.iterations()) * kernels);
  FUSEX_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FUSEX_CUDA_CHECK(cudaGraphDestroy(graph));
}

void bm_column_sum(benchmark::State& state) {
  const std::int64_t rows = 4096, cols = 16384;
  device_buffer<float> x(rows * cols), y(cols);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto yv = fusex::make_view(y.p, {cols});
  const double secs =
      fusex_bench::time_steady(state, fusex_bench::stream(), [&] { fusex::eval(yv, fusex::sum(xv, 0), fusex_bench::stream()); });
  // Against the copy's bytes/s (read + write), like every other case.
  fusex_bench::report_bandwidth(state, double((rows * cols + cols) * 4), secs, copy_for(rows * cols * 4));
}

constexpr std::int64_t full_n = std::int64_t{1} << 28;

void bm_full_sum_fusex(benchmark::State& state) {
  device_buffer<float> x(full_n), y(1);
  auto xv = fusex::make_view(x.p, {full_n});
  auto yv = fusex::make_view(y.p, {});
  const double secs =
      fusex_bench::time_steady(state, fusex_bench::stream(), [&] { fusex::eval(yv, fusex::sum(xv), fusex_bench::stream()); });
  // A reduction only reads: its bytes/s (bytes read) against the bytes/s (read + written) of a copy
  // of the same input, measured by bm_copy at full_n * 4 bytes earlier in this run.
  fusex_bench::report_bandwidth(state, double(full_n * 4), secs, copy_for(full_n * 4));
}

void bm_full_sum_cub(benchmark::State& state) {
  device_buffer<float> x(full_n), y(1);
  std::size_t temp_bytes = 0;
  FUSEX_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, x.p, y.p, full_n, fusex_bench::stream()));
  void* temp = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&temp, temp_bytes));
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    FUSEX_CUDA_CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, x.p, y.p, full_n, fusex_bench::stream()));
  });
  fusex_bench::report_bandwidth(state, double(full_n * 4), secs, copy_for(full_n * 4));
  FUSEX_CUDA_CHECK(cudaFree(temp));
}

}  // namespace

// One copy size per input size below, registered first so that each copy_ratio compares with a
// copy measured in the same run (64 x 2^20 floats are as many bytes as 16384 x 4096: one copy
// serves both; full_n * 4 bytes is the full sums' input).
BENCHMARK(bm_copy)
    ->Arg(16384LL * 4096 * 4)
    ->Arg(16384LL * 4096 * 2)
    ->Arg(65536LL * 128 * 4)
    ->Arg(16LL * 256 * 4)
    ->Arg(full_n * 4)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<float, softmax_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->Args({65536, 128, 1})
    ->Args({65536, 128, 4})
    ->Args({65536, 128, 0})
    ->Args({64, 1 << 20, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<bfloat16, softmax_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<float, layer_norm_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->Args({16384, 4096, 2})
    ->Args({16, 256, 1})
    ->Args({16, 256, 2})
    ->Args({16, 256, 3})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<bfloat16, layer_norm_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->Args({16384, 4096, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<float, rms_norm_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->Args({16384, 4096, 2})
    ->Args({16, 256, 1})
    ->Args({16, 256, 2})
    ->Args({16, 256, 3})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<bfloat16, rms_norm_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 4})
    ->Args({16384, 4096, 0})
    ->Args({16384, 4096, 2})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows<float, layer_norm_residual_k>)
    ->Args({16384, 4096, 1})
    ->Args({16384, 4096, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_rows_graph)
    ->ArgNames({"rms", "variant"})
    ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_column_sum)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_full_sum_fusex)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_full_sum_cub)->UseManualTime()->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
