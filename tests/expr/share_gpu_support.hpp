// Helpers of the shared-value GPU tests (test_share_gpu.cu, test_share_norm_gpu.cu,
// test_share_rows_gpu.cu, test_share_reduce_gpu.cu: four TUs, so that none takes over 90 s to
// compile on two cores).
#pragma once
#include <fusex/fusex.hpp>

#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fusex_test::share {

// Counts its calls on the device (one atomic add per element it computes).
struct dcounted {
  unsigned long long* calls;
  FUSEX_HD float operator()(float x) const {
#ifdef __CUDA_ARCH__
    atomicAdd(calls, 1ull);
#endif
    return 0.5f * x + 0.25f;
  }
};
inline double counted_ref(double x) { return 0.5 * x + 0.25; }
inline double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

struct counter {
  device_array<unsigned long long> c{1};
  counter() { reset(); }
  void reset() {
    FUSEX_CUDA_CHECK(cudaMemset(c.data(), 0, sizeof(unsigned long long)));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  unsigned long long get() const { return c.download()[0]; }
};

// Evaluates make() into a poisoned [rows, cols] destination of type T through the run's launch
// path; returns the result and the counter's value (the graph path replays the capture once, so
// both paths count one evaluation).
template <class T, class Make>
std::pair<host_vector<T>, unsigned long long> run_counted(std::int64_t rows, std::int64_t cols, counter& k,
                                                          const Make& make) {
  device_array<T> y(static_cast<std::size_t>(rows * cols));
  y.poison();
  k.reset();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(fusex::make_view(y.data(), {rows, cols}), make(), s); });
  return {y.download(), k.get()};
}

// Per-row mean and population variance of f(x) (f = counted_ref).
inline void row_moments(const host_vector<float>& x, std::int64_t rows, std::int64_t cols, std::vector<double>& mean,
                 std::vector<double>& var) {
  mean.assign(static_cast<std::size_t>(rows), 0.0);
  var.assign(static_cast<std::size_t>(rows), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += counted_ref(x[static_cast<std::size_t>(r * cols + c)]);
    const double m = s / static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) q += std::pow(counted_ref(x[static_cast<std::size_t>(r * cols + c)]) - m, 2);
    mean[static_cast<std::size_t>(r)] = m;
    var[static_cast<std::size_t>(r)] = q / static_cast<double>(cols);
  }
}

// A layer norm's operands over [rows, cols] (x in [-3, 3], g in [0.5, 1.5], b in [-1, 1]; random
// with seeds seed, seed + 1, seed + 2), on the host and on the device, with float views of the latter.
struct norm_operands {
  host_vector<float> hx, hg, hb;
  device_array<float> x, g, b;
  fusex::view<const float> X, G, B;
  norm_operands(std::int64_t rows, std::int64_t cols, unsigned seed)
      : hx(random_values<float>(static_cast<std::size_t>(rows * cols), -3, 3, seed)),
        hg(random_values<float>(static_cast<std::size_t>(cols), 0.5, 1.5, seed + 1)),
        hb(random_values<float>(static_cast<std::size_t>(cols), -1, 1, seed + 2)),
        x(hx.size()),
        g(hg.size()),
        b(hb.size()),
        X(fusex::make_view(static_cast<const float*>(x.data()), {rows, cols})),
        G(fusex::make_view(static_cast<const float*>(g.data()), {cols})),
        B(fusex::make_view(static_cast<const float*>(b.data()), {cols})) {
    x.upload(hx);
    g.upload(hg);
    b.upload(hb);
  }
};
}  // namespace fusex_test::share
