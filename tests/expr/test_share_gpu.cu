// GPU tests of shared values (issue #29 item 1) against double references computed here: a value
// used twice (h * sigmoid(h)) in float and in bf16 storage, the ten-op chain of the issue, a
// normalisation used twice (n * gelu(n)) through the row kernel with and without its register
// cache, repeated reductions in the row kernel and materialised, and equal-looking values over other
// operands. A counting functor (an atomic add per call) shows on the device what the host tests
// show: each shared value computed once per element, each repeated reduction's operand once. Every
// checked evaluation goes through fusex_test::run (eager, and as test_elementwise_gpu.graph captured
// into a graph and replayed).
#include <fusex/fusex.hpp>

#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace fusex_test;
using fusex::shape_t;

namespace {

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
double counted_ref(double x) { return 0.5 * x + 0.25; }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

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
void row_moments(const host_vector<float>& x, std::int64_t rows, std::int64_t cols, std::vector<double>& mean,
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

}  // namespace

TEST_CASE("gpu: h * sigmoid(h) computes h once per element (float and bf16 storage)", "[gpu][share]") {
  counter k;
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{256, 1000}, {37, 129}}) {
    INFO("[" << rows << ", " << cols << "], launch " << launch_path_name());
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    const auto hx = random_values<float>(n, -3, 3, 11);
    const auto hb = random_values<float>(static_cast<std::size_t>(cols), -1, 1, 12);
    device_array<float> x(n), b(static_cast<std::size_t>(cols));
    x.upload(hx);
    b.upload(hb);
    const auto X = fusex::make_view(static_cast<const float*>(x.data()), {rows, cols});
    const auto B = fusex::make_view(static_cast<const float*>(b.data()), {cols});
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double h = counted_ref(hx[i]) + hb[i % static_cast<std::size_t>(cols)];
      ref[i] = h * sigmoid_ref(h);
    }
    const auto f = run_counted<float>(rows, cols, k, [&] {
      const auto h = fusex::map(dcounted{k.c.data()}, X) + B;
      return h * fusex::sigmoid(h);
    });
    CHECK(f.second == n);
    CHECK(compare_rel(f.first, ref, 2e-6, 1e-6) == "");
    const auto g = run_counted<fusex::bfloat16>(rows, cols, k, [&] {
      const auto h = fusex::map(dcounted{k.c.data()}, X) + B;
      return h * fusex::sigmoid(h);
    });
    CHECK(g.second == n);
    CHECK(compare_rel(g.first, ref, tolerance<fusex::bfloat16>(), 1e-6) == "");
    // The same types over another operand (the same values in other memory): both computed.
    device_array<float> x2(n);
    x2.upload(hx);
    const auto X2 = fusex::make_view(static_cast<const float*>(x2.data()), {rows, cols});
    for (std::size_t i = 0; i < n; ++i) ref[i] = counted_ref(hx[i]) * counted_ref(hx[i]);
    const auto z = run_counted<float>(rows, cols, k, [&] {
      return fusex::map(dcounted{k.c.data()}, X) * fusex::map(dcounted{k.c.data()}, X2);
    });
    CHECK(z.second == 2 * n);
    CHECK(compare_rel(z.first, ref, 2e-6, 1e-6) == "");
  }
}

TEST_CASE("gpu: the issue's ten-op chain against a double reference", "[gpu][share]") {
  const std::int64_t n = (1 << 20) + 5;
  const auto hz = random_values<float>(static_cast<std::size_t>(n), -2, 2, 21);
  device_array<float> z(static_cast<std::size_t>(n));
  z.upload(hz);
  const auto Z = fusex::make_view(static_cast<const float*>(z.data()), {n});
  auto chain = [&] {
    auto c1 = Z * 1.1f + 0.3f;
    auto c2 = c1 * Z - 0.2f;
    auto c3 = fusex::sin(c2);
    auto c4 = c3 * 0.5f + 1.0f;
    auto c5 = fusex::exp(-c4 * c4);
    auto c6 = c5 + Z;
    auto c7 = fusex::relu(c6);
    auto c8 = c7 * c7;
    auto c9 = fusex::tanh(c8);
    return c9 * 2.0f - 1.0f;
  };
  std::vector<double> ref(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double zz = hz[i];
    const double c4 = std::sin((zz * 1.1 + 0.3) * zz - 0.2) * 0.5 + 1.0;
    const double c7 = std::max(std::exp(-c4 * c4) + zz, 0.0);
    ref[i] = std::tanh(c7 * c7) * 2.0 - 1.0;
  }
  device_array<float> y(static_cast<std::size_t>(n));
  y.poison();
  stream_guard sg;
  INFO("launch " << launch_path_name());
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(fusex::make_view(y.data(), {n}), chain(), s); });
  CHECK(compare_rel(y.download(), ref, 1e-5, 1e-6) == "");
  const std::string text = fusex::explain(fusex::make_view(y.data(), {n}), chain());
  INFO(text);
  CHECK(text.find("sin -> float32 [shared") == std::string::npos);  // sin is inside the shared c4
  CHECK(text.find("relu -> float32 [shared: computed once, 2 uses]") != std::string::npos);
}

TEST_CASE("gpu: n * gelu(n) with a normalisation n computes n's reductions once per row", "[gpu][share][reduce]") {
  counter k;
  // 1024 columns: the row kernel's cached path; 6000: rows read per pass (past the register cache).
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 1024}, {16, 6000}}) {
    INFO("[" << rows << ", " << cols << "], launch " << launch_path_name());
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    const auto hx = random_values<float>(n, -3, 3, 31);
    const auto hg = random_values<float>(static_cast<std::size_t>(cols), 0.5, 1.5, 32);
    const auto hb = random_values<float>(static_cast<std::size_t>(cols), -1, 1, 33);
    device_array<float> x(n), g(static_cast<std::size_t>(cols)), b(static_cast<std::size_t>(cols));
    x.upload(hx);
    g.upload(hg);
    b.upload(hb);
    const auto X = fusex::make_view(static_cast<const float*>(x.data()), {rows, cols});
    const auto G = fusex::make_view(static_cast<const float*>(g.data()), {cols});
    const auto B = fusex::make_view(static_cast<const float*>(b.data()), {cols});
    auto norm = [&] { return fusex::layer_norm(fusex::map(dcounted{k.c.data()}, X), G, B); };
    std::vector<double> mean, var;
    row_moments(hx, rows, cols, mean, var);
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t r = i / static_cast<std::size_t>(cols), c = i % static_cast<std::size_t>(cols);
      const double v = (counted_ref(hx[i]) - mean[r]) / std::sqrt(var[r] + 1e-5) * hg[c] + hb[c];
      ref[i] = v * gelu_ref(v);
    }
    const auto alone = run_counted<float>(rows, cols, k, [&] { return norm(); });
    const auto twice = run_counted<float>(rows, cols, k, [&] {
      const auto m = norm();
      return m * fusex::gelu(m);
    });
    CHECK((alone.second == 3 * n || alone.second == 4 * n));  // (var's two sweeps over the cached row: 4)
    CHECK(twice.second == alone.second);
    CHECK(compare_rel(twice.first, ref, 2e-5, 2e-5) == "");
    device_array<float> y(n);
    const std::string text = fusex::explain(fusex::make_view(y.data(), {rows, cols}), norm() * fusex::gelu(norm()));
    INFO(text);
    CHECK(text.find("row reduction with epilogue") != std::string::npos);
    CHECK(text.find("(the shared value above, not computed again)") != std::string::npos);
  }
}

TEST_CASE("gpu: a shared normalisation on the row kernel's static path (lazy form), and two of one type", "[gpu][share][reduce]") {
  // Plain float operands: the register-cached row with its roles known at compile time, whose shared
  // values take the lazy form (computed once, before the epilogue). n * n2 has two different values
  // of one type (other eps) over the same operands: the roles match the prediction, but the lazy
  // form would give n2 n's value, so it runs the path that tests roles.
  constexpr std::int64_t rows = 64, cols = 1024;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  INFO("launch " << launch_path_name());
  const auto hx = random_values<float>(n, -3, 3, 41);
  const auto hg = random_values<float>(static_cast<std::size_t>(cols), 0.5, 1.5, 42);
  const auto hb = random_values<float>(static_cast<std::size_t>(cols), -1, 1, 43);
  device_array<float> x(n), g(static_cast<std::size_t>(cols)), b(static_cast<std::size_t>(cols)), y(n);
  x.upload(hx);
  g.upload(hg);
  b.upload(hb);
  const auto X = fusex::make_view(static_cast<const float*>(x.data()), {rows, cols});
  const auto G = fusex::make_view(static_cast<const float*>(g.data()), {cols});
  const auto B = fusex::make_view(static_cast<const float*>(b.data()), {cols});
  const auto Y = fusex::make_view(y.data(), {rows, cols});
  std::vector<double> mean(rows, 0.0), var(rows, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += hx[static_cast<std::size_t>(r * cols + c)];
    mean[static_cast<std::size_t>(r)] = s / cols;
    for (std::int64_t c = 0; c < cols; ++c) q += std::pow(hx[static_cast<std::size_t>(r * cols + c)] - mean[static_cast<std::size_t>(r)], 2);
    var[static_cast<std::size_t>(r)] = q / cols;
  }
  auto norm_ref = [&](std::size_t i, double eps) {
    const std::size_t r = i / static_cast<std::size_t>(cols), c = i % static_cast<std::size_t>(cols);
    return (hx[i] - mean[r]) / std::sqrt(var[r] + eps) * hg[c] + hb[c];
  };
  std::vector<double> ref(n), ref2(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = norm_ref(i, 1e-5);
    ref[i] = v * gelu_ref(v);
    ref2[i] = v * norm_ref(i, 1e-1);
  }
  const auto nn = fusex::layer_norm(X, G, B);
  const auto n2 = fusex::layer_norm(X, G, B, 1e-1);
  const std::string text = fusex::explain(Y, nn * fusex::gelu(nn));
  const std::string text2 = fusex::explain(Y, nn * n2);
  INFO(text << "\n" << text2);
  CHECK(text.find("static path") != std::string::npos);
  CHECK(text2.find("row kept in registers") != std::string::npos);
  CHECK(text2.find("static path") == std::string::npos);
  stream_guard sg;
  y.poison();
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(Y, nn * fusex::gelu(nn), s); });
  CHECK(compare_rel(y.download(), ref, 2e-5, 2e-5) == "");
  y.poison();
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(Y, nn * n2, s); });
  CHECK(compare_rel(y.download(), ref2, 2e-5, 2e-5) == "");
}

TEST_CASE("gpu: repeated reductions, in the row kernel and materialised, are computed once", "[gpu][share][reduce]") {
  counter k;
  const std::int64_t rows = 96, cols = 512;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const auto hx = random_values<float>(n, -2, 2, 41);
  device_array<float> x(n);
  x.upload(hx);
  const auto X = fusex::make_view(static_cast<const float*>(x.data()), {rows, cols});
  std::vector<double> mean, var;
  row_moments(hx, rows, cols, mean, var);
  // Row kernel: sum over the row twice, as two written-out reductions; one evaluation of f per
  // element for the reduction, one for the epilogue.
  std::vector<double> ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double s = mean[i / static_cast<std::size_t>(cols)] * static_cast<double>(cols);
    ref[i] = s * counted_ref(hx[i]) + s;
  }
  const auto rowk = run_counted<float>(rows, cols, k, [&] {
    const auto f = fusex::map(dcounted{k.c.data()}, X);
    return fusex::sum(f, -1, fusex::keepdim) * f + fusex::sum(fusex::map(dcounted{k.c.data()}, X), -1, fusex::keepdim);
  });
  CHECK(rowk.second == 2 * n);
  CHECK(compare_rel(rowk.first, ref, 1e-5, 1e-3) == "");
  // Materialised: column sums (axis 0) twice, by the generic kernels, then one elementwise kernel.
  std::vector<double> col(static_cast<std::size_t>(cols), 0.0);
  for (std::size_t i = 0; i < n; ++i) col[i % static_cast<std::size_t>(cols)] += counted_ref(hx[i]);
  for (std::size_t i = 0; i < n; ++i) {
    const double s = col[i % static_cast<std::size_t>(cols)];
    ref[i] = s * s + hx[i];
  }
  const auto gen = run_counted<float>(rows, cols, k, [&] {
    const auto s = fusex::sum(fusex::map(dcounted{k.c.data()}, X), 0, fusex::keepdim);
    return s * s + X;
  });
  CHECK(gen.second == n);
  CHECK(compare_rel(gen.first, ref, 1e-5, 1e-3) == "");
}
