// GPU tests of shared values (issue #29 item 1) against double references computed here: a value
// used twice (h * sigmoid(h)) in float and in bf16 storage, and the ten-op chain of the issue
// (normalisations: test_share_norm_gpu.cu and test_share_rows_gpu.cu; repeated reductions:
// test_share_reduce_gpu.cu). A counting functor (an atomic add per
// call) shows on the device what the host tests show: each shared value computed once per element.
// Every checked evaluation goes through fusex_test::run (eager, and as test_elementwise_gpu.graph
// captured into a graph and replayed).
#include "share_gpu_support.hpp"

using namespace fusex_test;
using namespace fusex_test::share;
using fusex::shape_t;

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
    // Nested and different (p(x) + p(x2), p(v) = a(v) * a(v), a(v) = f(v) * f(v)): the form with
    // roles tested at run time, whose nested values are computed out of line (load_outlined):
    // f(x) once, f(x2) at each of its four uses (a scope keeps one value per type).
    for (std::size_t i = 0; i < n; ++i) ref[i] = 2 * std::pow(counted_ref(hx[i]), 4);
    const auto q = run_counted<float>(rows, cols, k, [&] {
      auto p = [&](const auto& V) {
        const auto a = fusex::map(dcounted{k.c.data()}, V) * fusex::map(dcounted{k.c.data()}, V);
        return a * a;
      };
      return p(X) + p(X2);
    });
    CHECK(q.second == 5 * n);
    CHECK(compare_rel(q.first, ref, 2e-6, 1e-6) == "");
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
