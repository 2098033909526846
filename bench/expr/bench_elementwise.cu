// Elementwise fusion benchmarks (issue: elementwise fusion). Every bandwidth is counted as the
// minimal bytes (inputs read once, output written once) and compared with a device-to-device copy
// of the same size measured in the same run (counter copy_ratio).
#include <fusex/fusex.hpp>

#include "fusex_bench.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using fusex::bfloat16;

cudaStream_t bench_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

template <class T>
struct device_buffer {
  T* p = nullptr;
  explicit device_buffer(std::size_t n) {
    FUSEX_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    // Non-zero data: fill with a fusex expression of a constant.
    fusex::eval(fusex::make_view(p, {static_cast<std::int64_t>(n)}), 1.37f, bench_stream());
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  }
  ~device_buffer() { cudaFree(p); }
};

// Copy bandwidth (bytes read + written per second) by size in bytes, measured in this run.
std::map<std::size_t, double>& copy_bandwidth() {
  static std::map<std::size_t, double> m;
  return m;
}

void bm_copy(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  device_buffer<std::uint8_t> a(bytes), b(bytes);
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, bench_stream()));
  });
  const double moved = 2.0 * static_cast<double>(bytes);
  fusex_bench::report_bandwidth(state, moved, secs, 0);
  copy_bandwidth()[bytes] = moved * static_cast<double>(state.iterations()) / secs;
}

double copy_bw_for(std::size_t bytes) {
  auto it = copy_bandwidth().find(bytes);
  return it == copy_bandwidth().end() ? 0 : it->second;
}

constexpr std::int64_t rows = 16384, cols = 4096;
constexpr std::int64_t chain_n = std::int64_t{1} << 26;  // same bytes as x for float: 2^28

template <class T>
void bm_relu_bias_fused(benchmark::State& state) {
  // range(0): grid cap in waves (0: none), to show the launch-shape choice by measurement.
  fusex::detail::elementwise_tuning_state().waves = static_cast<int>(state.range(0));
  device_buffer<T> x(rows * cols), b(cols), y(rows * cols);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto bv = fusex::make_view(b.p, {cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const double secs =
      fusex_bench::time_steady(state, bench_stream(), [&] { fusex::eval(yv, fusex::relu(xv + bv), bench_stream()); });
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
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    const auto h = xv + bv;
    fusex::eval(yv, h * fusex::sigmoid(h), bench_stream());
  });
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
}

template <class T>
void bm_relu_bias_unfused(benchmark::State& state) {
  device_buffer<T> x(rows * cols), b(cols), t(rows * cols), y(rows * cols);
  auto xv = fusex::make_view(x.p, {rows, cols});
  auto bv = fusex::make_view(b.p, {cols});
  auto tv = fusex::make_view(t.p, {rows, cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    fusex::eval(tv, xv + bv, bench_stream());          // kernel 1: writes a temporary
    fusex::eval(yv, fusex::relu(tv), bench_stream());  // kernel 2: reads it back
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
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    // ten ops: mul, add, sin, sub, exp, mul, tanh, sub, relu, mul
    fusex::eval(yv, fusex::relu(fusex::tanh(fusex::exp(fusex::sin(xv * 1.5f + 0.25f) - 0.5f) * 0.3f) - 0.1f) * 2.0f,
                bench_stream());
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
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    raw_chain10<<<sms * 8, 256, 0, bench_stream()>>>(x.p, y.p, chain_n);
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
  fusex_bench::report_bandwidth(state, double(2 * chain_n * sizeof(float)), secs, copy_bw_for(chain_n * sizeof(float)));
}

// --- the issue's chain, written as users write it (issue #29): named steps, each used once or
// twice; fusex computes each shared step once (expr/detail/share.hpp). Compared with a hand-written
// kernel of the same math (sinf, expf, tanhf; 16-byte vectors, four per thread in flight) measured
// in the same run (counter hand_ratio), and with the copy.
__host__ __device__ inline float to_f(float x) { return x; }
__device__ inline float to_f(bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ inline T from_f(float x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return __float2bfloat16_rn(x);
}
__device__ inline float named_chain_math(float z) {
  const float c1 = z * 1.1f + 0.3f, c2 = c1 * z - 0.2f, c3 = sinf(c2), c4 = c3 * 0.5f + 1.0f;
  const float c5 = expf(-c4 * c4), c6 = c5 + z, c7 = c6 > 0.0f ? c6 : 0.0f, c8 = c7 * c7, c9 = tanhf(c8);
  return c9 * 2.0f - 1.0f;
}
template <class T>
__global__ void raw_named_chain(const T* __restrict__ x, T* __restrict__ y, long long n_vec) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vec; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < n_vec) v[u] = reinterpret_cast<const uint4*>(x)[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      T* e = reinterpret_cast<T*>(&v[u]);
#pragma unroll
      for (int l = 0; l < V; ++l) e[l] = from_f<T>(named_chain_math(to_f(e[l])));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < n_vec) reinterpret_cast<uint4*>(y)[i + u * stride] = v[u];
  }
}
std::map<std::string, double>& hand_bandwidth() {
  static std::map<std::string, double> m;
  return m;
}
template <class T>
void bm_named_chain_hand(benchmark::State& state) {
  device_buffer<T> x(chain_n), y(chain_n);
  int sms = 0, dev = 0;
  FUSEX_CUDA_CHECK(cudaGetDevice(&dev));
  FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const long long n_vec = chain_n / (16 / static_cast<long long>(sizeof(T)));
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    raw_named_chain<T><<<sms * 8, 256, 0, bench_stream()>>>(x.p, y.p, n_vec);
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
  const double bytes = double(2 * chain_n * sizeof(T));
  fusex_bench::report_bandwidth(state, bytes, secs, copy_bw_for(chain_n * sizeof(T)));
  hand_bandwidth()[fusex::dtype_name<T>()] = bytes * static_cast<double>(state.iterations()) / secs;
}
template <class T, class Z>
void named_chain_run(benchmark::State& state, device_buffer<T>& y, const Z& z) {
  auto yv = fusex::make_view(y.p, {chain_n});
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    auto c1 = z * 1.1f + 0.3f;
    auto c2 = c1 * z - 0.2f;
    auto c3 = fusex::sin(c2);
    auto c4 = c3 * 0.5f + 1.0f;
    auto c5 = fusex::exp(-c4 * c4);
    auto c6 = c5 + z;
    auto c7 = fusex::relu(c6);
    auto c8 = c7 * c7;
    auto c9 = fusex::tanh(c8);
    fusex::eval(yv, c9 * 2.0f - 1.0f, bench_stream());
  });
  const double bytes = double(2 * chain_n * sizeof(T));
  fusex_bench::report_bandwidth(state, bytes, secs, copy_bw_for(chain_n * sizeof(T)));
  const double hand = hand_bandwidth()[fusex::dtype_name<T>()];
  if (hand > 0) state.counters["hand_ratio"] = bytes * static_cast<double>(state.iterations()) / secs / hand;
}
// range(0) = 1: the input marked fusex::share(z) (a diagnostic: z is read once per element instead
// of at each of its three leaves, which the kernel would otherwise load separately).
template <class T>
void bm_named_chain(benchmark::State& state) {
  device_buffer<T> x(chain_n), y(chain_n);
  const auto z0 = fusex::make_view(static_cast<const T*>(x.p), {chain_n});
  if (state.range(0) != 0) return named_chain_run(state, y, fusex::share(z0));
  named_chain_run(state, y, z0);
}

// n * gelu(n) with n = layer_norm(x, g, b) (range(0) = 1) against layer_norm alone (0), one row
// kernel each: the shared normalisation costs its reductions once.
template <class T>
void bm_norm_gelu(benchmark::State& state) {
  device_buffer<T> x(rows * cols), g(cols), b(cols), y(rows * cols);
  auto xv = fusex::make_view(static_cast<const T*>(x.p), {rows, cols});
  auto gv = fusex::make_view(static_cast<const T*>(g.p), {cols});
  auto bv = fusex::make_view(static_cast<const T*>(b.p), {cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  const bool twice = state.range(0) != 0;
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    const auto n = fusex::layer_norm(xv, gv, bv);
    if (twice) fusex::eval(yv, n * fusex::gelu(n), bench_stream());
    else fusex::eval(yv, n, bench_stream());
  });
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + 2 * cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
}

// Dropout (p = 0.1): the mask is computed in the kernel from (seed, offset), never stored.
template <class T>
void bm_dropout(benchmark::State& state) {
  device_buffer<T> x(rows * cols), y(rows * cols);
  auto xv = fusex::make_view(static_cast<const T*>(x.p), {rows, cols});
  auto yv = fusex::make_view(y.p, {rows, cols});
  std::uint64_t offset = 0;
  const double secs = fusex_bench::time_steady(state, bench_stream(), [&] {
    fusex::eval(yv, fusex::dropout(xv, 0.1, 1234, offset), bench_stream());
    offset += static_cast<std::uint64_t>(rows * cols);
  });
  fusex_bench::report_bandwidth(state, double(2 * rows * cols * sizeof(T)), secs, copy_bw_for(rows * cols * sizeof(T)));
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
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_iteration; ++i) launch();
    const auto t1 = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(secs);  // host time to submit calls_per_iteration launches
    total += secs;
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));  // keep the queue short (not timed)
  }
  state.counters["host_us_per_call"] = total * 1e6 / (static_cast<double>(state.iterations()) * calls_per_iteration);
}

void bm_small_fusex(benchmark::State& state) {
  device_buffer<float> x(small_rows * small_cols), b(small_cols), y(small_rows * small_cols);
  auto xv = fusex::make_view(x.p, {small_rows, small_cols});
  auto bv = fusex::make_view(b.p, {small_cols});
  auto yv = fusex::make_view(y.p, {small_rows, small_cols});
  host_cost(state, [&] { fusex::eval(yv, fusex::relu(xv + bv), bench_stream()); });
}

void bm_small_raw(benchmark::State& state) {
  device_buffer<float> x(small_rows * small_cols), b(small_cols), y(small_rows * small_cols);
  const int n = static_cast<int>(small_rows * small_cols);
  host_cost(state, [&] {
    raw_relu_bias<<<(n + 255) / 256, 256, 0, bench_stream()>>>(x.p, b.p, y.p, n, static_cast<int>(small_cols));
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

BENCHMARK(bm_copy)->Arg(4 * rows * cols)->Arg(2 * rows * cols)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_fused<float>)->Arg(0)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_fused<bfloat16>)->Arg(0)->Arg(4)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_silu_bias<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_silu_bias<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_unfused<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_relu_bias_unfused<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain10_raw)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_named_chain_hand<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_named_chain<float>)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_named_chain_hand<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_named_chain<bfloat16>)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_norm_gelu<float>)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_norm_gelu<bfloat16>)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_dropout<float>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_dropout<bfloat16>)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_small_fusex)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_small_raw)->UseManualTime()->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
