// GPU tests of shared values, part four (the others: test_share_gpu.cu, test_share_norm_gpu.cu,
// test_share_rows_gpu.cu): repeated reductions, in the row kernel and materialised, computed once.
// Against double references, eager and replayed from a graph.
#include "share_gpu_support.hpp"

using namespace fusex_test;
using namespace fusex_test::share;
using fusex::shape_t;

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
