// Shared by bench_elementwise's translation units (one program, split so that no TU compiles for
// long): the stream, buffers, sizes and the copy baseline that every case's copy_ratio divides by.
#pragma once

#include <fusex/fusex.hpp>

#include "fusex_bench.hpp"

#include <cstdint>
#include <map>

namespace ew_bench {

using fusex::bfloat16;

template <class T>
struct device_buffer {
  T* p = nullptr;
  explicit device_buffer(std::size_t n) {
    FUSEX_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    // Non-zero data: fill with a fusex expression of a constant.
    fusex::eval(fusex::make_view(p, {static_cast<std::int64_t>(n)}), 1.37f, fusex_bench::stream());
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(fusex_bench::stream()));
  }
  ~device_buffer() { cudaFree(p); }
};

// Copy bandwidth (bytes read + written per second) by size in bytes, measured in this run.
inline std::map<std::size_t, double>& copy_bandwidth() {
  static std::map<std::size_t, double> m;
  return m;
}

inline void bm_copy(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  device_buffer<std::uint8_t> a(bytes), b(bytes);
  const double secs = fusex_bench::time_steady(state, fusex_bench::stream(), [&] {
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, fusex_bench::stream()));
  });
  const double moved = 2.0 * static_cast<double>(bytes);
  fusex_bench::report_bandwidth(state, moved, secs, 0);
  copy_bandwidth()[bytes] = moved * static_cast<double>(state.iterations()) / secs;
}

inline double copy_bw_for(std::size_t bytes) {
  auto it = copy_bandwidth().find(bytes);
  return it == copy_bandwidth().end() ? 0 : it->second;
}

inline constexpr std::int64_t rows = 16384, cols = 4096;
inline constexpr std::int64_t chain_n = std::int64_t{1} << 26;  // same bytes as x for float: 2^28

// Registered from main after the cases of bench_elementwise.cu, so that bm_copy runs first.
void register_chain_benchmarks();   // bench_elementwise_chain.cu
void register_random_benchmarks();  // bench_elementwise_random.cu

}  // namespace ew_bench
