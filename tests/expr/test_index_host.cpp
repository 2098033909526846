// Host tests of the index leaves (fusex::arange, fusex::iota): values against coordinates computed
// here, in every destination layout the planner reorders, broadcast, inside reductions, a causal
// mask with a softmax against a double reference, errors, the plan printer; and, through the
// evaluators the kernels use, the vector lanes and the launch in 32-bit pieces (each piece's index
// values continue where the previous piece's stopped).
#include <fusex/fusex.hpp>

#include "host_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace fxt;
using fusex::shape_t;

TEST_CASE("index: arange(n) is 0..n-1 in any destination dtype", "[eval][index]") {
  for (i64 n : {i64{0}, i64{1}, i64{7}, i64{1000}}) {
    INFO("n = " << n);
    host_array<i64> a(static_cast<std::size_t>(n));
    host_array<float> f(static_cast<std::size_t>(n));
    host_array<i32> k(static_cast<std::size_t>(n));
    poison(a);
    poison(f);
    poison(k);
    fusex::host::eval(a.view({n}), fusex::arange(n));
    fusex::host::eval(f.view({n}), fusex::arange(n) * 0.5f);
    fusex::host::eval(k.view({n}), fusex::arange(n) - 3);
    for (i64 i = 0; i < n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      CHECK(a[u] == i);
      CHECK(f[u] == 0.5f * static_cast<float>(i));
      CHECK(k[u] == static_cast<i32>(i - 3));
    }
  }
  STATIC_REQUIRE(std::is_same_v<fusex::result_t<decltype(fusex::arange(4))>, std::int64_t>);
}

TEST_CASE("index: iota(shape, axis) along every axis, into contiguous and permuted destinations",
          "[eval][index]") {
  const shape_t s{3, 4, 5};
  const i64 st[3] = {20, 5, 1};
  for (int axis = -3; axis < 3; ++axis) {
    const int a = axis < 0 ? axis + 3 : axis;
    INFO("axis " << axis);
    host_array<i64> y(60);
    poison(y);
    fusex::host::eval(y.view(s), fusex::iota(s, axis));
    for (i64 i = 0; i < 60; ++i) CHECK(y[static_cast<std::size_t>(i)] == (i / st[a]) % s[a]);
    // The destination's dimensions reversed in memory: the planner orders the index space by the
    // destination's strides, and the index leaf follows.
    host_array<double> t(60);
    poison(t);
    auto tv = fusex::make_view(t.data(), s, fusex::strides_t{1, 3, 12});
    fusex::host::eval(tv, fusex::iota(s, axis) * 1.0);
    for (i64 i = 0; i < 3; ++i)
      for (i64 j = 0; j < 4; ++j)
        for (i64 k = 0; k < 5; ++k) {
          const i64 coord[3] = {i, j, k};
          CHECK(t[static_cast<std::size_t>(i + 3 * j + 12 * k)] == static_cast<double>(coord[a]));
        }
  }
}

TEST_CASE("index: broadcasting, an index of an operand's shape, and a column-major view", "[eval][index]") {
  const i64 rows = 6, cols = 9;
  auto x = random_array<float>(static_cast<std::size_t>(rows * cols), -2, 2);
  const auto xv = x.cview({rows, cols});
  host_array<float> y(static_cast<std::size_t>(rows * cols));
  poison(y);
  // A [cols] index broadcast along the rows, and iota(x, 0) with x's own shape.
  fusex::host::eval(y.view({rows, cols}), xv + fusex::arange(cols) - fusex::iota(xv, 0) * 100);
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) {
      const auto u = static_cast<std::size_t>(r * cols + c);
      CHECK(y[u] == x[u] + static_cast<float>(c) - static_cast<float>(r * 100));
    }
  // The same through a transposed destination view.
  host_array<i64> z(static_cast<std::size_t>(rows * cols));
  poison(z);
  auto zt = fusex::make_view(z.data(), {cols, rows}, fusex::strides_t{1, cols});  // z^T
  fusex::host::eval(zt, fusex::iota(zt, 0) * 1000 + fusex::iota(zt, 1));
  for (i64 r = 0; r < rows; ++r)
    for (i64 c = 0; c < cols; ++c) CHECK(z[static_cast<std::size_t>(r * cols + c)] == c * 1000 + r);
}

TEST_CASE("index: inside reductions", "[eval][index][reduce]") {
  const i64 n = 1000;
  host_array<i64> s(1);
  poison(s);
  fusex::host::eval(s.view({}), fusex::sum(fusex::arange(n)));
  CHECK(s[0] == n * (n - 1) / 2);
  // The mean of the row index over each column of [5, 3] is 2; the max column index of each row 2.
  host_array<float> m(3);
  host_array<i64> mx(5);
  poison(m);
  poison(mx);
  fusex::host::eval(m.view({3}), fusex::mean(fusex::iota(shape_t{5, 3}, 0), 0));
  fusex::host::eval(mx.view({5}), fusex::amax(fusex::iota(shape_t{5, 3}, 1), 1));
  for (std::size_t j = 0; j < 3; ++j) CHECK(m[j] == 2.0f);
  for (std::size_t i = 0; i < 5; ++i) CHECK(mx[i] == 2);
  // An index times a view, reduced over the other axis: sum over rows of x[r, c] * c.
  const i64 rows = 9, cols = 40;
  auto x = random_array<float>(static_cast<std::size_t>(rows * cols), -2, 2);
  host_array<float> cs(static_cast<std::size_t>(cols));
  poison(cs);
  fusex::host::eval(cs.view({cols}), fusex::sum(x.cview({rows, cols}) * fusex::arange(cols), 0));
  for (i64 c = 0; c < cols; ++c) {
    double want = 0;
    for (i64 r = 0; r < rows; ++r) want += double(x[static_cast<std::size_t>(r * cols + c)]) * double(c);
    CHECK(std::fabs(double(cs[static_cast<std::size_t>(c)]) - want) <= 1e-5 * (1 + std::fabs(want)));
  }
}

TEST_CASE("index: a causal mask with a softmax, against a double reference; explain shows one row kernel",
          "[eval][index][reduce]") {
  const i64 L = 37;
  auto x = random_array<float>(static_cast<std::size_t>(L * L), -3, 3);
  const auto s = x.cview({L, L});
  host_array<float> y(static_cast<std::size_t>(L * L));
  poison(y);
  const float ninf = -std::numeric_limits<float>::infinity();
  auto masked = fusex::where(fusex::iota(s, 1) > fusex::iota(s, 0), ninf, s);
  fusex::host::eval(y.view({L, L}), fusex::softmax(masked, -1));
  for (i64 i = 0; i < L; ++i) {
    double m = -INFINITY, sum = 0;
    for (i64 j = 0; j <= i; ++j) m = std::fmax(m, double(x[static_cast<std::size_t>(i * L + j)]));
    for (i64 j = 0; j <= i; ++j) sum += std::exp(double(x[static_cast<std::size_t>(i * L + j)]) - m);
    for (i64 j = 0; j < L; ++j) {
      const double want = j > i ? 0.0 : std::exp(double(x[static_cast<std::size_t>(i * L + j)]) - m) / sum;
      const float got = y[static_cast<std::size_t>(i * L + j)];
      INFO("row " << i << " column " << j << ": got " << got << ", expected " << want);
      CHECK(std::fabs(double(got) - want) <= 1e-6 + 1e-5 * want);
    }
  }
  auto yv = y.view({L, L});
  const std::string plan = fusex::explain(yv, fusex::softmax(masked, -1));
  INFO(plan);
  CHECK(contains(plan, "1 kernel (row reduction with epilogue, rule 1)"));
  CHECK(contains(plan, "index along axis 1 of [37, 37] (int64, computed)"));
  CHECK(contains(plan, "index along axis 0 of [37, 37] (int64, computed)"));
}

TEST_CASE("index: explain of an elementwise expression names the index leaf and keeps the vector path",
          "[eval][index][explain]") {
  host_array<float> y(64 * 32), b(32);
  auto yv = y.view({64, 32});
  const std::string plan = fusex::explain(yv, b.cview({32}) + fusex::arange(32));
  INFO(plan);
  CHECK(contains(plan, "vector width 4"));
  CHECK(contains(plan, "index along axis 0 of [32] (int64, computed) (broadcast)"));
}

TEST_CASE("index: bad axes and extents throw shape_error naming the shape", "[eval][index][errors]") {
  CHECK_THROWS_AS(fusex::arange(-1), fusex::shape_error);
  // (thrown_message, not Catch's Contains matcher: Catch2 v3 renamed it.)
  const std::string bad_axis = thrown_message<fusex::shape_error>([] { (void)fusex::iota(shape_t{3, 4}, 2); });
  CHECK(contains(bad_axis, "axis 2"));
  CHECK(contains(bad_axis, "[3, 4]"));
  CHECK(contains(thrown_message<fusex::shape_error>([] { (void)fusex::iota(shape_t{3, 4}, -3); }), "[3, 4]"));
  CHECK_THROWS_AS(fusex::iota(shape_t{}, 0), fusex::shape_error);
  host_array<i64> y(12);
  // An index of one shape into a destination it does not broadcast to.
  CHECK_THROWS_AS(fusex::host::eval(y.view({3, 4}), fusex::iota(shape_t{4, 3}, 0)), fusex::shape_error);
}

// Through the kernels' own evaluators and planner: the vector lanes of an index leaf, and a plan
// split into 32-bit pieces (a small limit stands in for 2^31), where each piece's index leaf
// starts at the piece's first element.
TEST_CASE("index: vector lanes and 32-bit pieces through the evaluators", "[eval][index][index32]") {
  const i64 rows = 6, cols = 12;
  host_array<float> y(static_cast<std::size_t>(rows * cols));
  const auto e = fusex::as_expr(fusex::iota(shape_t{rows, cols}, 1) + fusex::iota(shape_t{rows, cols}, 0) * 100);
  check_through_evaluators(e, y, rows, cols, [&](i64 elem) { return elem % cols + elem / cols * 100; });
}
