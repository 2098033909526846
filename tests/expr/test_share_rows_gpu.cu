// GPU tests of shared values, part three (the others: test_share_gpu.cu, test_share_norm_gpu.cu,
// test_share_reduce_gpu.cu; helpers in share_gpu_support.hpp; four TUs so that none takes over 90 s
// to compile on two cores): a shared normalisation on the row kernel's static path in its lazy form,
// and two values of one type (the path that tests roles). Against double references, eager and
// replayed from a graph.
#include "share_gpu_support.hpp"

using namespace fusex_test;
using namespace fusex_test::share;
using fusex::shape_t;

TEST_CASE("gpu: a shared normalisation on the row kernel's static path (lazy form), and two of one type", "[gpu][share][reduce]") {
  // Plain float operands: the register-cached row with its roles known at compile time, whose shared
  // values take the lazy form (computed once, before the epilogue). n * n2 has two different values
  // of one type (other eps) over the same operands: the roles match the prediction, but the lazy
  // form would give n2 n's value, so it runs the path that tests roles.
  constexpr std::int64_t rows = 64, cols = 1024;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  INFO("launch " << launch_path_name());
  const norm_operands op(rows, cols, 41);
  const auto &hx = op.hx, &hg = op.hg, &hb = op.hb;
  const auto &X = op.X, &G = op.G, &B = op.B;
  device_array<float> y(n);
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
