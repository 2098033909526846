// The double-precision reference of a fusex::layer_sequence chain, for its host and GPU tests, with
// a running bound on the float32 error each output may carry: per layer, a dot product of K terms
// in any order is off by at most gamma_K * sum |w| |a| (gamma_K = K u / (1 - K u), u = 2^-24), the
// input's own error is carried through |w| and the activation's slope (at most 1.13 for gelu and
// silu), and the bias add and the activation's last rounding add a few u of the result; in half
// or bfloat16 each layer's output is also rounded to T (u_T |v|: 2^-11 or 2^-8). A wrong column,
// row or layer is off by far more than these bounds.
#pragma once

#include <fusex/sequence.hpp>

#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace sequence_test {

/// The layers of a test chain in T: widths dims[0] -> dims[1] -> ... with an activation and a bias
/// flag per layer. Weights are drawn from U(-1/K, 1/K), so that each row's sum of |w| is at most 1
/// and the error bound does not grow from layer to layer (with torch.nn.Linear's 1/sqrt(K) it grows
/// about sqrt(K)/2 times per layer while the outputs do not, and a deep chain's bound would accept
/// nearly anything); biases from U(-0.5, 0.5), so that every layer's output moves.
template <class T>
struct chain {
  std::vector<std::int64_t> dims;
  std::vector<fusex::activation> acts;
  std::vector<bool> bias;
  std::vector<std::vector<T>> w, b;  // w[l]: [N, K] row-major; b[l]: [N]
  chain(std::vector<std::int64_t> d, std::vector<fusex::activation> a, std::vector<bool> has_bias, unsigned seed)
      : dims(std::move(d)), acts(std::move(a)), bias(std::move(has_bias)) {
    for (std::size_t l = 0; l + 1 < dims.size(); ++l) {
      const std::int64_t k = dims[l], n = dims[l + 1];
      const double r = 1.0 / static_cast<double>(k);
      w.push_back(fusex_test::random_values<T>(static_cast<std::size_t>(n * k), -r, r, seed + 2 * l));
      b.push_back(fusex_test::random_values<T>(static_cast<std::size_t>(n), -0.5, 0.5, seed + 2 * l + 1));
    }
  }
  std::size_t layers() const { return w.size(); }
};

inline double activate(double v, fusex::activation a) {
  switch (a) {
    case fusex::activation::relu: return v > 0 ? v : 0;
    case fusex::activation::gelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case fusex::activation::silu: return v / (1 + std::exp(-v));
    default: return v;
  }
}

struct result {
  std::vector<double> y, bound;  // [M, N_last]
};

/// The chain applied to x [M, dims[0]] in double, with each output's error bound.
template <class T>
result reference(const chain<T>& c, const std::vector<T>& x, std::int64_t m) {
  const double u = 0x1p-24;
  const double u_t = std::is_same_v<T, float> ? 0.0 : (std::is_same_v<T, fusex::half> ? 0x1p-11 : 0x1p-8);
  // Rounding to a subnormal half is off by up to 2^-25 whatever the value.
  const double abs_t = std::is_same_v<T, fusex::half> ? 0x1p-25 : 0.0;
  std::vector<double> a(x.size()), e(x.size(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) a[i] = fusex_test::to_double(x[i]);
  for (std::size_t l = 0; l < c.layers(); ++l) {
    const std::int64_t k = c.dims[l], n = c.dims[l + 1];
    const double gamma = static_cast<double>(k) * u / (1 - static_cast<double>(k) * u);
    const double slope = c.acts[l] == fusex::activation::none || c.acts[l] == fusex::activation::relu ? 1.0 : 1.13;
    std::vector<double> na(static_cast<std::size_t>(m * n)), ne(na.size());
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0, abs_s = 0, carried = 0;
        for (std::int64_t q = 0; q < k; ++q) {
          const double wv = fusex_test::to_double(c.w[l][static_cast<std::size_t>(j * k + q)]);
          const double av = a[static_cast<std::size_t>(i * k + q)];
          s += wv * av;
          abs_s += std::fabs(wv) * std::fabs(av);
          carried += std::fabs(wv) * e[static_cast<std::size_t>(i * k + q)];
        }
        const double bv = c.bias[l] ? fusex_test::to_double(c.b[l][static_cast<std::size_t>(j)]) : 0.0;
        const double v = activate(s + bv, c.acts[l]);
        na[static_cast<std::size_t>(i * n + j)] = v;
        ne[static_cast<std::size_t>(i * n + j)] = slope * (carried + gamma * abs_s + 2 * u * std::fabs(s + bv)) +
                                                  (4 * u + u_t) * std::fabs(v) + abs_t + 1e-30;
      }
    }
    a.swap(na);
    e.swap(ne);
  }
  return {a, e};
}

/// "" when every got[i] is within bound[i] of y[i] (NaN never is), else the first misses.
template <class T>
std::string check(const std::vector<T>& got, const result& r) {
  if (got.size() != r.y.size())
    return "size " + std::to_string(got.size()) + ", expected " + std::to_string(r.y.size());
  std::string out;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = fusex_test::to_double(got[i]);
    const double d = std::fabs(g - r.y[i]);
    if (!(d <= r.bound[i])) {
      if (bad < 4)
        out += "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " + std::to_string(r.y[i]) +
               " (bound " + std::to_string(r.bound[i]) + ")\n";
      ++bad;
    }
  }
  return bad == 0 ? std::string() : std::to_string(bad) + " outside the bound, first:\n" + out;
}

}  // namespace sequence_test
