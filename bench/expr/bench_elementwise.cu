// Elementwise fusion benchmarks (issue: elementwise fusion). Every bandwidth is counted as the
// minimal bytes (inputs read once, output written once) and compared with a device-to-device copy
// of the same size measured in the same run (counter copy_ratio). The issue's named chain and
// n * gelu(n) are in bench_elementwise_chain.cu, dropout in bench_elementwise_random.cu.
#include "elementwise_bench.hpp"

#include <chrono>
#include <cstdint>

namespace {

using namespace ew_bench;
using ew_bench::bm_copy;  // registered as "bm_copy", the name the tables look up

template <class T>
void bm_relu_bias_fused(benchmark::State& state) {
  // range(0): grid cap in waves (0: none), to show the launch-shape choice by measurement.
  fusex::detail::elementwise_tuning_state().waves = static_cast<int>(state.range(0));
  device_buffer<T> x(rows * cols), b(cols), y(rows * cols);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto bv = fusex::make_view(b.p, {cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const double secs =
      fusex_bench::time_steady(state, fusex_bench::stream(), [&] { fusex::eval(yv, fusex::relu(xv + bv), fusex_bench::stream()); });
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
  fusex::detail::elementwise_tuning_state().waves = 0;
}

// SiLU of a biased input as users write it, h = x + b; h * sigmoid(h): h is computed once, and of
// the two float leaves (x, b) the lazy kernel keeps x's first read and reads b at its use.
template <class T>
void bm_silu_bias(benchmark::State& state) {
  device_buffer<T> x(rows * cols), b(cols), y(rows * cols);
  auto xv = fusex::make_view(static_cast<const T*>(x.p), {rows, cols});
  auto bv = fusex::make_view(static_cast<const T*>(b.p), {cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    const auto h = xv + bv;
    fusex::eval(yv, h * fusex::sigmoid(h), fusex_bench::stream());
  });
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
}

// Operands that fold to more than two dimensions take the kernel's general path (any rank; the
// two-dimension path covers the rest). range(0) = 3: a per-channel bias on NCHW activations,
// x[N, C, H, W] + b[C, 1, 1] (folds to [N, C, H*W]); range(0) = 4: x[A, B, C, D] + b[A, 1, C, 1]
// (no dimensions fold). Same element count as bm_relu_bias_fused.
template <class T>
void bm_relu_bias_general(benchmark::State& state) {
  const bool four = state.range(0) == 4;
  const fusex::shape_t xs = four ? fusex::shape_t{16, 64, 256, 256} : fusex::shape_t{16, 256, 64, 256};
  const fusex::shape_t bs = four ? fusex::shape_t{16, 1, 256, 1} : fusex::shape_t{256, 1, 1};
  const std::int64_t n = rows * cols, nb = fusex::numel(bs);
  device_buffer<T> x(n), b(nb), y(n);
  auto xv = fusex::make_view(static_cast<const T*>(x.p), xs);
  auto bv = fusex::make_view(static_cast<const T*>(b.p), bs);
  auto yv = fusex::make_view(y.p, xs);
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(),
                                               [&] { fusex::eval(yv, fusex::relu(xv + bv), fusex_bench::stream()); });
  fusex_bench::report_bandwidth(state, double((2 * n + nb) * sizeof(T)), secs, copy_bw_for(n * sizeof(T)));
}

template <class T>
void bm_relu_bias_unfused(benchmark::State& state) {
  device_buffer<T> x(rows * cols), b(cols), t(rows * cols), y(rows * cols);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto bv = fusex::make_view(b.p, {cols});
  auto tv = fusex::make_view(t.p, {rows, cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    fusex::eval(tv, xv + bv, fusex_bench::stream());          // kernel 1: writes a temporary
    fusex::eval(yv, fusex::relu(tv), fusex_bench::stream());  // kernel 2: reads it back
  });
  // Minimal bytes, as for the fused version, so the ratio shows the cost of not fusing.
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
}

template <class T>
void bm_chain10(benchmark::State& state) {
  device_buffer<T> x(chain_n), y(chain_n);
  auto xv = fusex::make_view(x.p, {chain_n});
  auto yv = fusex::make_view(y.p, {chain_n});
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    // ten ops: mul, add, sin, sub, exp, mul, tanh, sub, relu, mul
    fusex::eval(yv, fusex::relu(fusex::tanh(fusex::exp(fusex::sin(xv * 1.5f + 0.25f) - 0.5f) * 0.3f) - 0.1f) * 2.0f,
                fusex_bench::stream());
  });
  fusex_bench::report_bandwidth(state, double(2 * chain_n * sizeof(T)), secs, copy_bw_for(chain_n * sizeof(T)));
}

// The same ten ops as a hand-written kernel with the same math functions: the compute-bound
// ceiling that bm_chain10 is compared against (its bytes/s alone cannot reach the copy's).
__global__ void raw_chain10(const float* __restrict__ x, float* __restrict__ y, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float t = tanhf(expf(sinf(x[i] * 1.5f + 0.25f) - 0.5f) * 0.3f) - 0.1f;
    y[i] = (t > 0.0f ? t : 0.0f) * 2.0f;
  }
}

void bm_chain10_raw(benchmark::State& state) {
  device_buffer<float> x(chain_n), y(chain_n);
  int sms = 0, dev = 0;
  FUSEX_CUDA_CHECK(cudaGetDevice(&dev));
  FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    raw_chain10<<<sms * 8, 256, 0, fusex_bench::stream()>>>(x.p, y.p, chain_n);
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
  fusex_bench::report_bandwidth(state, double(2 * chain_n * sizeof(float)), secs, copy_bw_for(chain_n * sizeof(float)));
}

// --- launch-bound regime: host cost per call ---------------------------------------------------
__global__ void raw_relu_bias(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, int n,
                              int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + b[i % cols];
    y[i] = v > 0 ? v : 0;
  }
}

constexpr std::int64_t small_rows = 16, small_cols = 784;
constexpr int calls_per_iteration = 200;

template <class Launch>
void host_cost(benchmark::State& state, Launch&& launch) {
  launch();
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(fusex_bench::stream()));
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_iteration; ++i) launch();
    const auto t1 = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(secs);  // host time to submit calls_per_iteration launches
    total += secs;
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(fusex_bench::stream()));  // keep the queue short (not timed)
  }
  state.counters["host_us_per_call"] = total * 1e6 / (static_cast<double>(state.iterations()) * calls_per_iteration);
}

void bm_small_fusex(benchmark::State& state) {
  device_buffer<float> x(small_rows * small_cols), b(small_cols), y(small_rows * small_cols);
  auto xv = fusex::make_view(x.p, {small_rows, small_cols});
  auto bv = fusex::make_view(b.p, {small_cols});
  auto yv = fusex::make_view(y.p, {small_rows, small_cols});
  host_cost(state, [&] { fusex::eval(yv, fusex::relu(xv + bv), fusex_bench::stream()); });
}

void bm_small_raw(benchmark::State& state) {
  device_buffer<float> x(small_rows * small_cols), b(small_cols), y(small_rows * small_cols);
  const int n = static_cast<int>(small_rows * small_cols);
  host_cost(state, [&] {
    raw_relu_bias<<<(n + 255) / 256, 256, 0, fusex_bench::stream()>>>(x.p, b.p, y.p, n, static_cast<int>(small_cols));
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

BENCHMARK(bm_copy)->Arg(4 * rows * cols)->Arg(2 * rows * cols)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_fused<float>)->Arg(0)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_fused<bfloat16>)->Arg(0)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_general<float>)->Arg(3)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_general<bfloat16>)->Arg(3)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_silu_bias<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_silu_bias<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_unfused<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_unfused<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10_raw)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_small_fusex)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_small_raw)->UseManualTime()->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!fusex_bench::report_device()) return 0;
  fusex_bench::apply_resource_override();
  ew_bench::register_chain_benchmarks();
  ew_bench::register_random_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
