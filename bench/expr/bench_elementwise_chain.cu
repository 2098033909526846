// bench_elementwise's cases for issue #29: the issue's chain written as users write it, against a
// hand-written kernel of the same math, and n * gelu(n) against layer_norm alone.
#include "elementwise_bench.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>

namespace {

using namespace ew_bench;

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
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    raw_named_chain<T><<<sms * 8, 256, 0, fusex_bench::stream()>>>(x.p, y.p, n_vec);
    FUSEX_CUDA_CHECK(cudaGetLastError());
  });
  const double bytes = double(2 * chain_n * sizeof(T));
  fusex_bench::report_bandwidth(state, bytes, secs, copy_bw_for(chain_n * sizeof(T)));
  hand_bandwidth()[fusex::dtype_name<T>()] = bytes * static_cast<double>(state.iterations()) / secs;
}
template <class T, class Z>
void named_chain_run(benchmark::State& state, device_buffer<T>& y, const Z& z) {
  auto yv = fusex::make_view(y.p, {chain_n});
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    auto c1 = z * 1.1f + 0.3f;
    auto c2 = c1 * z - 0.2f;
    auto c3 = fusex::sin(c2);
    auto c4 = c3 * 0.5f + 1.0f;
    auto c5 = fusex::exp(-c4 * c4);
    auto c6 = c5 + z;
    auto c7 = fusex::relu(c6);
    auto c8 = c7 * c7;
    auto c9 = fusex::tanh(c8);
    fusex::eval(yv, c9 * 2.0f - 1.0f, fusex_bench::stream());
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
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    const auto n = fusex::layer_norm(xv, gv, bv);
    if (twice) fusex::eval(yv, n * fusex::gelu(n), fusex_bench::stream());
    else fusex::eval(yv, n, fusex_bench::stream());
  });
  fusex_bench::report_bandwidth(state, double((2 * rows * cols + 2 * cols) * sizeof(T)), secs,
                                copy_bw_for(rows * cols * sizeof(T)));
}

}  // namespace

void ew_bench::register_chain_benchmarks() {
  // The fusex cases take Arg 0 and 1 (the two variants each compares); the hand kernels none.
  const auto reg = [](const char* name, void (*fn)(benchmark::State&), bool variants) {
    auto* b = benchmark::RegisterBenchmark(name, fn);
    if (variants) b->Arg(0)->Arg(1);
    b->UseManualTime()->Unit(benchmark::kMicrosecond);
  };
  reg("bm_named_chain_hand<float>", bm_named_chain_hand<float>, false);
  reg("bm_named_chain<float>", bm_named_chain<float>, true);
  reg("bm_named_chain_hand<bfloat16>", bm_named_chain_hand<bfloat16>, false);
  reg("bm_named_chain<bfloat16>", bm_named_chain<bfloat16>, true);
  reg("bm_norm_gelu<float>", bm_norm_gelu<float>, true);
  reg("bm_norm_gelu<bfloat16>", bm_norm_gelu<bfloat16>, true);
}
