// GPU tests of shared values, part two (the others: test_share_gpu.cu, test_share_rows_gpu.cu,
// test_share_reduce_gpu.cu; helpers in share_gpu_support.hpp): a normalisation used twice
// (n * gelu(n)) through the row kernel with and without its register cache. Against double
// references, eager and replayed from a graph.
#include "share_gpu_support.hpp"

using namespace fusex_test;
using namespace fusex_test::share;
using fusex::shape_t;

TEST_CASE("gpu: n * gelu(n) with a normalisation n computes n's reductions once per row", "[gpu][share][reduce]") {
  counter k;
  // 1024 columns: the row kernel's cached path; 6000: rows read per pass (past the register cache).
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 1024}, {16, 6000}}) {
    INFO("[" << rows << ", " << cols << "], launch " << launch_path_name());
    const std::size_t n = static_cast<std::size_t>(rows * cols);
    const norm_operands op(rows, cols, 31);
    const auto &hx = op.hx, &hg = op.hg, &hb = op.hb;
    const auto &X = op.X, &G = op.G, &B = op.B;
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
