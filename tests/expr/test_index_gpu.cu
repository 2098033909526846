// GPU tests of the index leaves (fusex::arange, fusex::iota) against coordinates and a double
// reference computed here: arange in several dtypes and lengths (vector path and scalar tail),
// index along each axis into a permuted destination, a causal-mask softmax as one kernel, and an
// index inside a reduction. Every checked evaluation goes through fusex_test::run (eager, and
// captured into a graph and replayed as test_elementwise_gpu.graph).
#include <fusex/fusex.hpp>

#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace fusex_test;
using fusex::shape_t;

TEST_CASE("gpu: arange(n) is 0..n-1 (vector path, tail and scalar path)", "[gpu][elementwise][index]") {
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{4099}, std::int64_t{1} << 20}) {
    INFO("n = " << n << ", launch " << launch_path_name());
    device_array<std::int64_t> a(static_cast<std::size_t>(n));
    device_array<float> f(static_cast<std::size_t>(n));
    a.poison();
    f.poison();
    stream_guard sg;
    fusex_test::run(sg.s, [&](cudaStream_t s) {
      fusex::eval(fusex::make_view(a.data(), {n}), fusex::arange(n), s);
      fusex::eval(fusex::make_view(f.data(), {n}), fusex::arange(n) * 0.25f - 1.0f, s);
    });
    const auto ha = a.download();
    const auto hf = f.download();
    std::size_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      bad += ha[u] != i;
      bad += hf[u] != static_cast<float>(i) * 0.25f - 1.0f;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("gpu: iota(shape, axis) along every axis into a permuted destination", "[gpu][elementwise][index]") {
  const shape_t s{5, 64, 33};
  const std::int64_t n = 5 * 64 * 33;
  for (int axis = 0; axis < 3; ++axis) {
    INFO("axis " << axis << ", launch " << launch_path_name());
    device_array<double> y(static_cast<std::size_t>(n));
    y.poison();
    // Dimensions reversed in memory: strides {1, 5, 320}.
    auto yv = fusex::make_view(y.data(), s, fusex::strides_t{1, 5, 320});
    stream_guard sg;
    fusex_test::run(sg.s, [&](cudaStream_t st) { fusex::eval(yv, fusex::iota(s, axis) * 2.0 + 1.0, st); });
    const auto h = y.download();
    std::size_t bad = 0;
    for (std::int64_t i = 0; i < 5; ++i)
      for (std::int64_t j = 0; j < 64; ++j)
        for (std::int64_t k = 0; k < 33; ++k) {
          const std::int64_t c[3] = {i, j, k};
          bad += h[static_cast<std::size_t>(i + 5 * j + 320 * k)] != static_cast<double>(c[axis]) * 2.0 + 1.0;
        }
    CHECK(bad == 0);
  }
}

TEST_CASE("gpu: a causal-mask softmax is one kernel and matches a double reference", "[gpu][reduce][index]") {
  for (std::int64_t L : {std::int64_t{64}, std::int64_t{129}, std::int64_t{1024}}) {
    INFO("L = " << L << ", launch " << launch_path_name());
    const auto hx = random_values<float>(static_cast<std::size_t>(L * L), -3, 3, 31);
    device_array<float> x(static_cast<std::size_t>(L * L)), y(static_cast<std::size_t>(L * L));
    x.upload(hx);
    y.poison();
    const auto s = fusex::make_view<const float>(x.data(), {L, L});
    const float ninf = -std::numeric_limits<float>::infinity();
    const auto e = fusex::softmax(fusex::where(fusex::iota(s, 1) > fusex::iota(s, 0), ninf, s), -1);
    auto yv = fusex::make_view(y.data(), {L, L});
    stream_guard sg;
    fusex_test::run(sg.s, [&](cudaStream_t st) { fusex::eval(yv, e, st); });
    const auto hy = y.download();
    std::vector<double> want(static_cast<std::size_t>(L * L));
    for (std::int64_t i = 0; i < L; ++i) {
      double m = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) m = std::fmax(m, double(hx[static_cast<std::size_t>(i * L + j)]));
      for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(double(hx[static_cast<std::size_t>(i * L + j)]) - m);
      for (std::int64_t j = 0; j < L; ++j)
        want[static_cast<std::size_t>(i * L + j)] =
            j > i ? 0.0 : std::exp(double(hx[static_cast<std::size_t>(i * L + j)]) - m) / sum;
    }
    const std::string err = compare(hy, want, 2e-6);
    INFO(err);
    CHECK(err.empty());
    // One kernel node in a raw capture.
    cudaGraph_t g;
    FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
    fusex::eval(yv, e, sg.s);
    FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &g));
    CHECK(count_kernel_nodes(g) == 1);
    FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  }
}

TEST_CASE("gpu: an index inside reductions", "[gpu][reduce][index]") {
  const std::int64_t n = 100000;
  device_array<std::int64_t> s(1);
  device_array<float> m(37);
  s.poison();
  m.poison();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(s.data(), {}), fusex::sum(fusex::arange(n)), st);
    fusex::eval(fusex::make_view(m.data(), {37}), fusex::mean(fusex::iota(shape_t{1001, 37}, 0), 0), st);
  });
  CHECK(s.download()[0] == n * (n - 1) / 2);
  for (float v : m.download()) CHECK(v == 500.0f);
}

TEST_CASE("gpu: an index in the row kernel with no other leaf, and with a view in the 2-D reduction",
          "[gpu][reduce][index]") {
  // amax over a row of column indices: the row kernel (rule 1) with only a computed leaf.
  const std::int64_t rows = 300, cols = 1000;
  device_array<std::int64_t> mx(rows);
  mx.poison();
  // sum over rows of x[r, c] * c: the two-dimensional column reduction with an index leaf.
  const auto hx = random_values<float>(static_cast<std::size_t>(rows * cols), -2, 2, 41);
  device_array<float> x(static_cast<std::size_t>(rows * cols)), cs(static_cast<std::size_t>(cols));
  x.upload(hx);
  cs.poison();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(mx.data(), {rows}), fusex::amax(fusex::iota(shape_t{rows, cols}, 1), 1), st);
    fusex::eval(fusex::make_view(cs.data(), {cols}),
                fusex::sum(fusex::make_view<const float>(x.data(), {rows, cols}) * fusex::arange(cols), 0), st);
  });
  for (std::int64_t v : mx.download()) CHECK(v == cols - 1);
  // A float32 sum of 300 terms that cancel (|sum| ~ 30 from terms up to 2000) is held to the
  // recursive-summation bound, rows * FLT_EPSILON * sum|terms| (about 0.011 c), not to a relative
  // error of the result: the H200 run at db6915a gave -34.606445 for -34.605923 (5e-4) and failed a
  // 1e-5 relative check. A wrong index (c - 1, c + 1) moves a sum by sum_r x[r, c], about 20.
  std::vector<double> want(static_cast<std::size_t>(cols)), mag(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double t = double(hx[static_cast<std::size_t>(r * cols + c)]) * double(c);
      want[static_cast<std::size_t>(c)] += t;
      mag[static_cast<std::size_t>(c)] += t < 0 ? -t : t;
    }
  const auto got = cs.download();
  std::int64_t bad = 0;
  std::string first;
  for (std::int64_t c = 0; c < cols; ++c) {
    const std::size_t i = static_cast<std::size_t>(c);
    const double tol = double(rows) * 1.1920929e-7 * mag[i];
    if (!(std::fabs(double(got[i]) - want[i]) <= tol) && bad++ == 0) {
      first = "column " + std::to_string(c) + ": got " + std::to_string(got[i]) + ", expected " +
              std::to_string(want[i]) + " within " + std::to_string(tol);
    }
  }
  INFO(first);
  CHECK(bad == 0);
}
