// Host tests of elementwise evaluation as a whole: broadcasting, strided / transposed / sliced /
// permuted views as inputs and destinations, ranks 0 to 8, in-place updates, overlap and shape
// errors, empty tensors, multiple outputs, fusex::map, deep expressions, conversion at the store,
// and the plan printer. References are plain loops over the raw buffers.
#include "host_test_support.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace fxt;
using fusex::shape_t;

namespace {

constexpr i64 M = 6, NN = 10;

// Row-major coordinates of flat index i in `shape`.
std::vector<i64> unravel(i64 i, const std::vector<i64>& shape) {
  std::vector<i64> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}
// Row-major flat index of coordinates `idx` in `shape`.
i64 ravel(const std::vector<i64>& idx, const std::vector<i64>& shape) {
  i64 f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

shape_t to_shape(const std::vector<i64>& v) {
  shape_t s;
  for (i64 e : v) s.push_back(e);
  return s;
}

// Small whole numbers as T: sums and products of them are exact in every type.
template <class T>
host_array<T> small_values(std::size_t n, double lo = -9, double hi = 9) {
  host_array<T> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = from_double<T>(std::round(to_double(random_value<double>(lo, hi, false))));
  return a;
}

template <class T>
bool all_poisoned(const host_array<T>& a) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!is_poisoned(a[i])) return false;
  return true;
}

}  // namespace

// --- broadcasting ----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("broadcasting: NumPy rules for operands of different shapes", "[eval][broadcast]", float,
                   fusex::half, std::int32_t) {
  using T = TestType;
  const auto a = random_default<T>(M * NN), b = random_default<T>(NN), c = random_default<T>(M),
             d = random_default<T>(NN), s = random_default<T>(1), a3 = random_default<T>(2 * M * NN);
  const auto A = a.cview({M, NN}), B = b.cview({NN}), C = c.cview({M, 1}), D = d.cview({1, NN}), Sc = s.cview({}),
             A3 = a3.cview({2, M, NN});
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };

  check_expr("[M, N] + [N]", A + B, {M, NN}, [&](std::size_t i) { return v(a, i) + v(b, i % NN); });
  check_expr("[N] + [M, N]", B + A, {M, NN}, [&](std::size_t i) { return v(b, i % NN) + v(a, i); });
  check_expr("[M, 1] * [1, N]", C * D, {M, NN}, [&](std::size_t i) { return v(c, i / NN) * v(d, i % NN); });
  check_expr("[M, 1] - [N]", C - B, {M, NN}, [&](std::size_t i) { return v(c, i / NN) - v(b, i % NN); });
  check_expr("[M, N] - rank 0", A - Sc, {M, NN}, [&](std::size_t i) { return v(a, i) - v(s, 0); });
  check_expr("rank 0 * [N] + 2", Sc * B + 2, {NN}, [&](std::size_t i) { return v(s, 0) * v(b, i) + 2; });
  check_expr("rank 0 + rank 0", Sc + Sc, {}, [&](std::size_t) { return v(s, 0) + v(s, 0); });
  check_expr("[2, M, N] + [N] - [M, 1]", A3 + B - C, {2, M, NN},
             [&](std::size_t i) { return v(a3, i) + v(b, i % NN) - v(c, (i / NN) % M); });
  check_expr("[M, N] * [2, M, N] (missing leading dimension)", A * A3, {2, M, NN},
             [&](std::size_t i) { return v(a, i % (M * NN)) * v(a3, i); });
  check_expr("[1, N] + [M, 1] + rank 0 + scalar", D + C + Sc + 1, {M, NN},
             [&](std::size_t i) { return v(d, i % NN) + v(c, i / NN) + v(s, 0) + 1; });

  SECTION("an expression smaller than the destination is broadcast to it") {
    host_array<T> out(2 * M * NN);
    poison(out);
    fusex::host::eval(out.view({2, M, NN}), A + B);
    check_values<T>("[M, N] + [N] into [2, M, N]", out, 2 * M * NN,
                    [&](std::size_t i) { return v(a, i % (M * NN)) + v(b, i % NN); });
    poison(out);
    fusex::host::eval(out.view({2, M, NN}), B);
    check_values<T>("[N] into [2, M, N]", out, 2 * M * NN, [&](std::size_t i) { return v(b, i % NN); });
  }
  SECTION("a scalar or rank-0 expression fills the destination") {
    host_array<T> out(M * NN);
    poison(out);
    fusex::host::eval(out.view({M, NN}), 7);
    check_values<T>("fill 7", out, M * NN, [](std::size_t) { return 7; });
    fusex::host::eval(out.view({M, NN}), Sc);
    check_values<T>("fill rank 0", out, M * NN, [&](std::size_t) { return v(s, 0); });
    fusex::host::eval(out.view({M, NN}), Sc * 2);
    check_values<T>("fill rank 0 * 2", out, M * NN, [&](std::size_t) { return v(s, 0) * 2; });
  }
}

// --- views as inputs -------------------------------------------------------------------------------

TEST_CASE("non-contiguous views as inputs", "[eval][views]") {
  const auto a = small_values<float>(M * NN), b = small_values<float>(NN);
  const auto A = a.cview({M, NN}), B = b.cview({NN});
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };

  SECTION("transposed") {
    const auto t = small_values<float>(NN * M);  // stored [N, M]; viewed as [M, N]
    const auto T = t.cview({NN, M}).t();
    REQUIRE(T.strides() == fusex::strides_t{1, M});
    check_expr("t() + [N]", T + B, {M, NN}, [&](std::size_t i) { return v(t, (i % NN) * M + i / NN) + v(b, i % NN); });
    check_expr("t() * [M, N]", T * A, {M, NN}, [&](std::size_t i) { return v(t, (i % NN) * M + i / NN) * v(a, i); });
  }
  SECTION("sliced with a step, and with negative bounds") {
    const i64 W = 2 * NN + 1;
    const auto big = small_values<float>(M * W);
    const auto X = big.cview({M, W}).slice(1, 1, W, 2);  // odd columns
    REQUIRE(X.shape() == shape_t{M, NN});
    check_expr("slice(step 2) + [M, N]", X + A, {M, NN},
               [&](std::size_t i) { return v(big, (i / NN) * W + 1 + 2 * (i % NN)) + v(a, i); });
    const auto Y = big.cview({M, W}).slice(0, -4, -1).slice(1, -NN - 1, -1);  // rows 2..4, columns 10..19
    REQUIRE(Y.shape() == shape_t{3, NN});
    check_expr("slice(negative bounds) - [N]", Y - B, {3, NN},
               [&](std::size_t i) { return v(big, (2 + i / NN) * W + NN + i % NN) - v(b, i % NN); });
  }
  SECTION("permuted rank 4") {
    const auto p = small_values<float>(2 * 3 * 4 * 5);           // stored [2, 3, 4, 5]
    const auto P = p.cview({2, 3, 4, 5}).permute({3, 1, 0, 2});  // [5, 3, 2, 4]
    const auto q = small_values<float>(5 * 3 * 2 * 4);
    check_expr("permute * 2 + [5, 3, 2, 4]", P * 2 + q.cview({5, 3, 2, 4}), {5, 3, 2, 4}, [&](std::size_t i) {
      const auto idx = unravel(static_cast<i64>(i), {5, 3, 2, 4});
      return 2 * v(p, ravel({idx[2], idx[1], idx[3], idx[0]}, {2, 3, 4, 5})) + v(q, i);
    });
  }
  SECTION("explicit strides: 0 (broadcast), column, every third element") {
    const auto buf = small_values<float>(3 * M * NN);
    const auto R = fusex::make_view(buf.data(), {M, NN}, {0, 1});  // row 0 repeated
    check_expr("stride 0 + [M, N]", R + A, {M, NN}, [&](std::size_t i) { return v(buf, i % NN) + v(a, i); });
    const auto Col = fusex::make_view(buf.data() + 2, {M, 1}, {NN, 1});  // column 2
    check_expr("column * [M, N]", Col * A, {M, NN}, [&](std::size_t i) { return v(buf, (i / NN) * NN + 2) * v(a, i); });
    const auto E3 = fusex::make_view(buf.data(), {M, NN}, {3 * NN, 3});
    check_expr("strided [3N, 3]", E3 - A, {M, NN},
               [&](std::size_t i) { return v(buf, (i / NN) * 3 * NN + 3 * (i % NN)) - v(a, i); });
  }
  SECTION("broadcast_to, expand_dims, squeeze, reshape") {
    check_expr("broadcast_to", B.broadcast_to({M, NN}) + A, {M, NN},
               [&](std::size_t i) { return v(b, i % NN) + v(a, i); });
    const auto c = small_values<float>(M);
    check_expr("expand_dims(1) + [N] (outer sum)", c.cview({M}).expand_dims(1) + B, {M, NN},
               [&](std::size_t i) { return v(c, i / NN) + v(b, i % NN); });
    check_expr("expand_dims(0) * [M, 1]", B.expand_dims(0) * c.cview({M, 1}), {M, NN},
               [&](std::size_t i) { return v(b, i % NN) * v(c, i / NN); });
    check_expr("squeeze", c.cview({M, 1}).squeeze(1) + c.cview({M}), {M}, [&](std::size_t i) { return 2 * v(c, i); });
    check_expr("reshape(-1)", a.cview({M * NN}).reshape({M, -1}) - A, {M, NN}, [](std::size_t) { return 0; });
    check_expr("reshape to rank 3", a.cview({M, NN}).reshape({2, 3, NN}) + B, {2, 3, NN},
               [&](std::size_t i) { return v(a, i) + v(b, i % NN); });
  }
  SECTION("views of containers, const views, mixed layouts in one expression") {
    std::vector<float> vec(NN);
    const std::vector<float> cvec(NN, 0.5f);
    for (i64 j = 0; j < NN; ++j) vec[static_cast<std::size_t>(j)] = static_cast<float>(j);
    check_expr("vector + const vector", fusex::make_view(vec) + fusex::make_view(cvec), {NN},
               [](std::size_t i) { return static_cast<double>(i) + 0.5; });
    const auto t = small_values<float>(NN * M);
    const auto T = t.cview({NN, M}).t();
    const auto big = small_values<float>(M * 2 * NN);
    const auto X = big.cview({M, 2 * NN}).slice(1, 0, 2 * NN, 2);
    // Each leaf has its own layout; a mix-up of leaf strides would show.
    check_expr("where(t > 0, slice, [N]) * [M, N] - t", fusex::where(T > 0, X, B) * A - T, {M, NN}, [&](std::size_t i) {
      const double tv = v(t, (i % NN) * M + i / NN);
      const double xv = v(big, (i / NN) * 2 * NN + 2 * (i % NN));
      return (tv > 0 ? xv : v(b, i % NN)) * v(a, i) - tv;
    });
  }
}

// --- views as destinations -------------------------------------------------------------------------

TEST_CASE("non-contiguous views as destinations", "[eval][views]") {
  const auto a = small_values<float>(M * NN), b = small_values<float>(NN);
  const auto A = a.cview({M, NN}), B = b.cview({NN});
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };

  SECTION("transposed") {
    host_array<float> out(NN * M);
    poison(out);
    fusex::host::eval(out.view({NN, M}).t(), A + B);  // out stored [N, M]
    check_values<float>("into t()", out, NN * M, [&](std::size_t k) {
      const i64 j = static_cast<i64>(k) / M, i = static_cast<i64>(k) % M;
      return v(a, i * NN + j) + v(b, j);
    });
  }
  SECTION("sliced with a step: the elements in between stay untouched") {
    host_array<float> out(M * 2 * NN);
    poison(out);
    fusex::host::eval(out.view({M, 2 * NN}).slice(1, 1, 2 * NN, 2), A * 2);
    mismatch_report rep("into slice(1, 1, 2N, 2)");
    for (i64 k = 0; k < M * 2 * NN; ++k) {
      const i64 i = k / (2 * NN), j = k % (2 * NN);
      const float got = out[static_cast<std::size_t>(k)];
      if (j % 2 == 1) {
        if (to_double(got) != 2 * v(a, i * NN + j / 2))
          rep.add(static_cast<std::size_t>(k), got, 2 * v(a, i * NN + j / 2));
      } else if (!is_poisoned(got)) {
        rep.add(static_cast<std::size_t>(k), got, "poison");
      }
    }
    INFO(rep.text());
    CHECK(rep.count() == 0);
  }
  SECTION("a column and a row of a larger buffer") {
    host_array<float> out(M * NN);
    poison(out);
    fusex::host::eval(out.view({M, NN}).slice(1, 3, 4), A.slice(1, 0, 1) + 1);  // column 3 <- column 0 + 1
    fusex::host::eval(out.view({M, NN}).slice(0, M - 1, M), B);                 // last row <- b
    for (i64 i = 0; i < M; ++i)
      for (i64 j = 0; j < NN; ++j) {
        const float got = out[static_cast<std::size_t>(i * NN + j)];
        INFO("(" << i << ", " << j << ")");
        if (i == M - 1) CHECK(to_double(got) == v(b, j));
        else if (j == 3) CHECK(to_double(got) == v(a, i * NN) + 1);
        else CHECK(is_poisoned(got));
      }
  }
  SECTION("permuted rank 3 destination, permuted input") {
    const auto p = small_values<float>(4 * 3 * 2);  // stored [4, 3, 2], viewed [2, 4, 3]
    const auto P = p.cview({4, 3, 2}).permute({2, 0, 1});
    host_array<float> out(3 * 2 * 4);  // stored [3, 2, 4], viewed [2, 4, 3]
    poison(out);
    fusex::host::eval(out.view({3, 2, 4}).permute({1, 2, 0}), P * 3 - 1);
    check_values<float>("into permute", out, 24, [&](std::size_t k) {
      const auto o = unravel(static_cast<i64>(k), {3, 2, 4});  // out stored (c, a, b) = element (a, b, c)
      return 3 * v(p, ravel({o[2], o[0], o[1]}, {4, 3, 2})) - 1;
    });
  }
  SECTION("size-1 dimensions with arbitrary strides, and a stride-0 size-1 dimension") {
    host_array<float> out(NN);
    poison(out);
    fusex::host::eval(fusex::make_view(out.data(), {1, NN, 1}, {0, 1, 1000}), B.expand_dims(-1) * 2);
    check_values<float>("into [1, N, 1]", out, NN, [&](std::size_t j) { return 2 * v(b, static_cast<i64>(j)); });
  }
}

// --- ranks 0 to 8 ----------------------------------------------------------------------------------

TEST_CASE("ranks 0 to 8 with permuted and broadcast operands", "[eval][rank]") {
  const std::vector<i64> extents = {2, 3, 1, 2, 2, 1, 3, 2};
  for (int r = 0; r <= fusex::max_rank; ++r) {
    INFO("rank " << r);
    const std::vector<i64> shape(extents.begin(), extents.begin() + r);
    std::vector<i64> rev(shape.rbegin(), shape.rend());
    const i64 n = [&] {
      i64 k = 1;
      for (i64 e : shape) k *= e;
      return k;
    }();
    const i64 last = r > 0 ? shape.back() : 1;
    const auto a = small_values<float>(static_cast<std::size_t>(n));
    const auto b = small_values<float>(static_cast<std::size_t>(n));  // stored reversed, viewed permuted
    const auto c = small_values<float>(static_cast<std::size_t>(last));
    fusex::dims order;
    for (int d = r - 1; d >= 0; --d) order.push_back(d);
    const auto A = a.cview(to_shape(shape));
    const auto Bv = b.cview(to_shape(rev)).permute(order);
    REQUIRE(Bv.shape() == to_shape(shape));
    const auto Cv = c.cview(r > 0 ? shape_t{last} : shape_t{});
    auto want = [&](i64 i) {
      const auto idx = unravel(i, shape);
      const std::vector<i64> ridx(idx.rbegin(), idx.rend());
      return value_of(a[static_cast<std::size_t>(i)]) + 2 * value_of(b[static_cast<std::size_t>(ravel(ridx, rev))]) -
             value_of(c[static_cast<std::size_t>(r > 0 ? idx.back() : 0)]);
    };
    // A contiguous destination.
    check_expr("a + 2 * permuted(b) - c", A + 2 * Bv - Cv, to_shape(shape),
               [&](std::size_t i) { return want(static_cast<i64>(i)); });
    // A permuted destination (stored reversed).
    host_array<float> out(static_cast<std::size_t>(n));
    poison(out);
    fusex::host::eval(out.view(to_shape(rev)).permute(order), A + 2 * Bv - Cv);
    check_values<float>("into a permuted destination", out, static_cast<std::size_t>(n), [&](std::size_t k) {
      const auto ridx = unravel(static_cast<i64>(k), rev);
      const std::vector<i64> idx(ridx.rbegin(), ridx.rend());
      return want(ravel(idx, shape));
    });
  }
}

// --- in-place updates and overlap ------------------------------------------------------------------

TEST_CASE("in-place updates: an input may be the destination, element for element", "[eval][overlap]") {
  const auto orig = small_values<float>(M * NN);
  const auto b = small_values<float>(NN);
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };
  host_array<float> y(M * NN);
  auto reset = [&] {
    for (i64 i = 0; i < M * NN; ++i) y[static_cast<std::size_t>(i)] = orig[static_cast<std::size_t>(i)];
  };

  reset();
  const auto Y = y.view({M, NN});
  fusex::host::eval(Y, Y * 2 + 1);
  check_values<float>("y = y * 2 + 1", y, M * NN, [&](std::size_t i) { return 2 * v(orig, i) + 1; });

  reset();
  fusex::host::eval(Y, fusex::relu(Y) - Y + b.cview({NN}));
  check_values<float>("y = relu(y) - y + b", y, M * NN,
                      [&](std::size_t i) { return std::max(v(orig, i), 0.0) - v(orig, i) + v(b, i % NN); });

  reset();  // the same memory through a transposed view on both sides
  fusex::host::eval(Y.t(), Y.t() * Y.t());
  check_values<float>("y.t() = y.t() * y.t()", y, M * NN, [&](std::size_t i) { return v(orig, i) * v(orig, i); });

  reset();  // two views made separately over the same memory
  fusex::host::eval(fusex::make_view(y.data(), {M, NN}), fusex::make_view<const float>(y.data(), {M, NN}) - 1);
  check_values<float>("separately made views", y, M * NN, [&](std::size_t i) { return v(orig, i) - 1; });

  reset();  // the destination has leading or size-1 dimensions the input lacks, or strides differ on them
  fusex::host::eval(Y.expand_dims(0), Y * 2);
  fusex::host::eval(Y.slice(0, 2, 3), Y.slice(0, 2, 3).squeeze(0) + 1);
  fusex::host::eval(fusex::make_view(y.data(), {M, NN, 1}, {NN, 1, 12345}), Y.expand_dims(-1) * 3);
  check_values<float>("in place with size-1 dimensions", y, M * NN, [&](std::size_t i) {
    const double twice = 2 * v(orig, i);
    return 3 * (i / NN == 2 ? twice + 1 : twice);
  });
  float s = 3;
  fusex::host::eval(fusex::make_view(&s, {1}), fusex::make_view(&s, {}) * 2);
  CHECK(s == 6.0f);

  reset();  // a slice updated in place; the rest untouched
  fusex::host::eval(Y.slice(0, 1, 3), Y.slice(0, 1, 3) * 10);
  check_values<float>("slice in place", y, M * NN, [&](std::size_t i) {
    const bool in = i / NN >= 1 && i / NN < 3;
    return in ? 10 * v(orig, i) : v(orig, i);
  });
}

TEST_CASE("a destination overlapping an input other than element for element is rejected", "[eval][overlap][errors]") {
  const i64 n = 7;
  host_array<float> buf(n + 1);
  for (i64 i = 0; i <= n; ++i) buf[static_cast<std::size_t>(i)] = static_cast<float>(i);
  auto unchanged = [&] {
    for (i64 i = 0; i <= n; ++i)
      if (to_double(buf[static_cast<std::size_t>(i)]) != static_cast<double>(i)) return false;
    return true;
  };

  SECTION("shifted by one element") {
    const auto dst = fusex::make_view(buf.data() + 1, {n});
    const auto src = fusex::make_view<const float>(buf.data(), {n});
    const std::string m = thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(dst, src + 1); });
    INFO(m);
    CHECK(contains(m, "[7]"));
    CHECK(contains(m, "overlaps"));
    CHECK(unchanged());
    CHECK_THROWS_AS(
        fusex::host::eval(fusex::make_view(buf.data(), {n}), fusex::make_view<const float>(buf.data() + 1, {n}) * 2),
        fusex::invalid_argument);
    CHECK_THROWS_AS(fusex::explain(dst, src + 1), fusex::invalid_argument);
    CHECK(unchanged());
  }
  SECTION("2-D: rows shifted by one") {
    host_array<float> grid(M * NN);
    const auto G = grid.view({M, NN});
    const std::string m =
        thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(G.slice(0, 1, M), G.slice(0, 0, M - 1) + 1); });
    INFO(m);
    CHECK(contains(m, "[5, 10]"));
  }
  SECTION("transposed onto itself, and a broadcast row of the destination") {
    host_array<float> sq(16);
    const auto Q = sq.view({4, 4});
    CHECK_THROWS_AS(fusex::host::eval(Q, Q.t() + 0), fusex::invalid_argument);
    // Row 0 is read by every row while row 0 is being written.
    const std::string m = thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(Q, Q.slice(0, 0, 1) + 1); });
    INFO(m);
    CHECK(contains(m, "[4, 4]"));
    CHECK(contains(m, "[1, 4]"));
  }
  SECTION("adjacent buffers do not overlap") {
    host_array<float> two(2 * n);
    for (i64 i = 0; i < 2 * n; ++i) two[static_cast<std::size_t>(i)] = static_cast<float>(i);
    CHECK_NOTHROW(
        fusex::host::eval(fusex::make_view(two.data(), {n}), fusex::make_view<const float>(two.data() + n, {n}) * 2));
    CHECK(to_double(two[0]) == 2.0 * static_cast<double>(n));
    CHECK_NOTHROW(
        fusex::host::eval(fusex::make_view(two.data() + n, {n}), fusex::make_view<const float>(two.data(), {n}) + 1));
  }
}

TEST_CASE("a destination sharing a buffer with an input, but no element, does not race and is accepted",
          "[eval][overlap]") {
  // Column 0 of an [8, 2] matrix from column 1 (e.g. the real and imaginary parts of complex data),
  // and the even elements of a vector from the odd ones: the address ranges interleave, but no
  // element is both written and read, so nothing can race.
  host_array<float> buf(16);
  for (std::size_t i = 0; i < 16; ++i) buf[i] = static_cast<float>(i);
  const auto mat = buf.view({8, 2});
  bool evaluated = false;
  CHECK_NOTHROW((fusex::host::eval(mat.slice(1, 0, 1), mat.slice(1, 1, 2) * 2), evaluated = true));
  if (evaluated) {
    check_values<float>("column 0 = column 1 * 2", buf, 16, [](std::size_t i) {
      return i % 2 == 0 ? 2.0 * static_cast<double>(i + 1) : static_cast<double>(i);
    });
  }
  const auto all = buf.view({16});
  CHECK_NOTHROW(fusex::host::eval(all.slice(0, 0, 16, 2), all.slice(0, 1, 16, 2) + 1));
  CHECK_NOTHROW(fusex::host::eval(fusex::tie(all.slice(0, 0, 16, 2), all.slice(0, 1, 16, 2)), 1.0f, 2.0f));
}

TEST_CASE("a destination whose elements share memory is rejected", "[eval][overlap][errors]") {
  host_array<float> buf(16);
  poison(buf);
  const auto x = filled<float>(9, 1.0);
  // Stride 0 over 4 elements.
  const std::string m = thrown_message<fusex::invalid_argument>(
      [&] { fusex::host::eval(fusex::make_view(buf.data(), {4}, {0}), x.cview({4})); });
  INFO(m);
  CHECK(contains(m, "[4]"));
  CHECK(contains(m, "strides [0]"));
  // Strides that make (0, 1) and (1, 0) the same element.
  CHECK_THROWS_AS(fusex::host::eval(fusex::make_view(buf.data(), {3, 3}, {1, 1}), x.cview({3, 3})),
                  fusex::invalid_argument);
  CHECK_THROWS_AS(fusex::host::eval(fusex::make_view(buf.data(), {2, 3}, {2, 1}), 1.0f), fusex::invalid_argument);
  CHECK(all_poisoned(buf));
  // A broadcast input is fine; so is a stride-0 dimension of extent 1 in the destination.
  CHECK_NOTHROW(fusex::host::eval(fusex::make_view(buf.data(), {1, 4}, {0, 1}), x.cview({1})));
  CHECK(to_double(buf[3]) == 1.0);
}

// --- shape errors ----------------------------------------------------------------------------------

TEST_CASE("shapes that do not broadcast and wrong destination shapes throw shape_error", "[eval][errors]") {
  const auto a = small_values<float>(12), b = small_values<float>(5), c = small_values<float>(4);
  const auto A = a.cview({3, 4}), B = b.cview({5});
  host_array<float> out(12);
  poison(out);

  SECTION("operands that do not broadcast") {
    const auto e = A + B;  // building the expression is fine; evaluating it is not
    const std::string m = thrown_message<fusex::shape_error>([&] { fusex::host::eval(out.view({3, 4}), e); });
    INFO(m);
    CHECK(contains(m, "[3, 4]"));
    CHECK(contains(m, "[5]"));
    CHECK_THROWS_AS(fusex::explain(out.view({3, 4}), e), fusex::shape_error);
    // Deeper in the tree, under other ops.
    const std::string m2 = thrown_message<fusex::shape_error>([&] {
      fusex::host::eval(out.view({3, 4}), fusex::exp(A * 2) + fusex::relu(c.cview({2, 2})));
    });
    INFO(m2);
    CHECK(contains(m2, "[3, 4]"));
    CHECK(contains(m2, "[2, 2]"));
    CHECK_THROWS_AS(fusex::host::eval(out.view({3, 4}), fusex::where(A > 0, B, 1.0f)), fusex::shape_error);
    CHECK_THROWS_AS(fusex::host::eval(out.view({3, 4}), fusex::map([](float p, float q) { return p + q; }, A, B)),
                    fusex::shape_error);
  }
  SECTION("a destination of the wrong shape") {
    const std::string m = thrown_message<fusex::shape_error>([&] { fusex::host::eval(out.view({4, 3}), A + 1); });
    INFO(m);
    CHECK(contains(m, "[3, 4]"));
    CHECK(contains(m, "[4, 3]"));
    const std::string m2 = thrown_message<fusex::shape_error>([&] { fusex::host::eval(out.view({4}), A); });
    INFO(m2);
    CHECK(contains(m2, "[3, 4]"));
    CHECK(contains(m2, "[4]"));
    CHECK_THROWS_AS(fusex::host::eval(out.view({12}), A), fusex::shape_error);  // same size, other shape
    CHECK_THROWS_AS(fusex::host::eval(out.view({3, 4}), c.cview({4, 1})), fusex::shape_error);
    CHECK_THROWS_AS(fusex::host::eval(out.view({}), A), fusex::shape_error);
  }
  SECTION("shape errors are fusex::error") {
    CHECK_THROWS_AS(fusex::host::eval(out.view({3, 4}), A + B), fusex::error);
  }
  SECTION("a null pointer with a non-zero size is rejected when the view is made") {
    float* null = nullptr;
    const std::string m = thrown_message<fusex::invalid_argument>([&] {
      fusex::host::eval(fusex::make_view(null, {3, 4}), A);
    });
    INFO(m);
    CHECK(contains(m, "[3, 4]"));
  }
  CHECK(all_poisoned(out));  // nothing was written
}

// --- empty tensors ---------------------------------------------------------------------------------

TEST_CASE("empty tensors are valid and compute nothing", "[eval][empty]") {
  host_array<float> buf(16);
  poison(buf);
  const auto b = small_values<float>(4);
  float* null = nullptr;
  const float* cnull = nullptr;

  CHECK_NOTHROW(fusex::host::eval(fusex::make_view(null, {0}), fusex::make_view(cnull, {0}) + 1));
  CHECK_NOTHROW(fusex::host::eval(buf.view({0, 4}), fusex::make_view(cnull, {0, 4}) * b.cview({4})));
  CHECK_NOTHROW(fusex::host::eval(buf.view({3, 0}), b.cview({3, 1}) + fusex::make_view(cnull, {0})));
  CHECK_NOTHROW(fusex::host::eval(buf.view({2, 0, 3}), 5.0f));
  CHECK_NOTHROW(fusex::host::eval(buf.view({4}).slice(0, 2, 2), b.cview({1})));
  CHECK_NOTHROW(fusex::host::eval(fusex::tie(buf.view({0}), fusex::make_view(null, {0})), b.cview({1}), 1));
  // An empty destination over memory that an input uses is no overlap: nothing is written.
  CHECK_NOTHROW(fusex::host::eval(buf.view({0}), buf.cview({1}) + 1));
  CHECK(all_poisoned(buf));
  // Shapes are still checked.
  CHECK_THROWS_AS(fusex::host::eval(buf.view({0, 4}), b.cview({3})), fusex::shape_error);
  CHECK_THROWS_AS(fusex::host::eval(buf.view({0}), b.cview({4})), fusex::shape_error);
  // The plan says so.
  const std::string plan = fusex::explain(buf.view({0, 4}), fusex::make_view(cnull, {0, 4}) + 1);
  INFO(plan);
  CHECK(contains(plan, "no kernel"));
  CHECK(contains(plan, "[0, 4]"));
}

// --- several destinations --------------------------------------------------------------------------

TEST_CASE("multi-output: fusex::tie evaluates one expression per destination", "[eval][multi]") {
  const auto a = small_values<float>(M * NN), b = small_values<float>(NN);
  const auto A = a.cview({M, NN}), B = b.cview({NN});
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };

  SECTION("same type") {
    host_array<float> s(M * NN), p(M * NN);
    poison(s);
    poison(p);
    fusex::host::eval(fusex::tie(s.view({M, NN}), p.view({M, NN})), A + B, A * B);
    check_values<float>("sum", s, M * NN, [&](std::size_t i) { return v(a, i) + v(b, i % NN); });
    check_values<float>("product", p, M * NN, [&](std::size_t i) { return v(a, i) * v(b, i % NN); });
  }
  SECTION("different types, a scalar expression, different layouts") {
    host_array<float> f(M * NN);
    host_array<bool> g(M * NN);
    host_array<i32> h(NN * M);  // transposed
    host_array<double> k(M * NN);
    poison(f);
    poison(g);
    poison(h);
    poison(k);
    fusex::host::eval(fusex::tie(f.view({M, NN}), g.view({M, NN}), h.view({NN, M}).t(), k.view({M, NN})), A - B, A > B,
                      fusex::cast<i32>(A) * 2, 2.5);
    check_values<float>("A - B", f, M * NN, [&](std::size_t i) { return v(a, i) - v(b, i % NN); });
    check_values<bool>("A > B", g, M * NN, [&](std::size_t i) { return v(a, i) > v(b, i % NN); });
    check_values<i32>("cast<int32>(A) * 2 into t()", h, M * NN, [&](std::size_t q) {
      const i64 j = static_cast<i64>(q) / M, i = static_cast<i64>(q) % M;
      return 2 * static_cast<i64>(v(a, i * NN + j));
    });
    check_values<double>("2.5", k, M * NN, [](std::size_t) { return 2.5; });
  }
  SECTION("an expression may read a destination element for element (all reads happen first)") {
    host_array<float> x(M * NN), y(M * NN);
    for (std::size_t i = 0; i < static_cast<std::size_t>(M * NN); ++i) x[i] = a[i];
    poison(y);
    const auto X = x.view({M, NN});
    fusex::host::eval(fusex::tie(X, y.view({M, NN})), X + 1, X * 2);
    check_values<float>("x = x + 1", x, M * NN, [&](std::size_t i) { return v(a, i) + 1; });
    check_values<float>("y = 2 * old x", y, M * NN, [&](std::size_t i) { return 2 * v(a, i); });
  }
  SECTION("errors") {
    host_array<float> s(M * NN), p(M * NN);
    poison(s);
    poison(p);
    const std::string m = thrown_message<fusex::shape_error>([&] {
      fusex::host::eval(fusex::tie(s.view({M, NN}), p.view({NN, M})), A, A);
    });
    INFO(m);
    CHECK(contains(m, "[6, 10]"));
    CHECK(contains(m, "[10, 6]"));
    CHECK_THROWS_AS(fusex::host::eval(fusex::tie(s.view({M, NN}), p.view({M, NN})), A, b.cview({2, 5})),
                    fusex::shape_error);
    CHECK_THROWS_AS(fusex::host::eval(fusex::tie(s.view({M, NN}), s.view({M, NN})), A, A), fusex::invalid_argument);
    CHECK_THROWS_AS(
        fusex::host::eval(fusex::tie(s.view({M * NN}).slice(0, 1, M * NN), s.view({M * NN}).slice(0, 0, M * NN - 1)),
                          1.0f, 2.0f),
        fusex::invalid_argument);
    CHECK(all_poisoned(s));
    CHECK(all_poisoned(p));
  }
}

// --- fusex::map --------------------------------------------------------------------------------------

namespace {
struct axpy {
  float alpha;
  float operator()(float x, float y) const { return alpha * x + y; }
};
struct clip_to_int {
  int operator()(float x) const { return x < 0 ? 0 : static_cast<int>(x); }
};
}  // namespace

TEST_CASE("fusex::map applies user functors and lambdas", "[eval][map]") {
  const auto a = small_values<float>(M * NN), b = small_values<float>(NN);
  const auto A = a.cview({M, NN}), B = b.cview({NN});
  const auto ai = small_values<i32>(M * NN);
  const auto ah = small_values<half>(M * NN);
  auto v = [](const auto& arr, i64 i) { return value_of(arr[static_cast<std::size_t>(i)]); };

  check_expr("map(axpy{2.5}, A, B)", fusex::map(axpy{2.5f}, A, B), {M, NN},
             [&](std::size_t i) { return 2.5 * v(a, i) + v(b, i % NN); });
  check_expr("map(clip_to_int, A)", fusex::map(clip_to_int{}, A), {M, NN},
             [&](std::size_t i) { return v(a, i) < 0 ? 0.0 : std::trunc(v(a, i)); });
  check_expr("map(lambda, A)", fusex::map([](float x) { return x * x + 1.0f; }, A), {M, NN},
             [&](std::size_t i) { return v(a, i) * v(a, i) + 1; });
  // Each operand arrives in its own compute type; the result type is what the functor returns.
  const auto mixed = fusex::map([](int i, float f) { return static_cast<double>(i) * f; }, ai.cview({M, NN}), A);
  STATIC_REQUIRE(std::is_same_v<decltype(mixed)::value_type, double>);
  check_expr("map(int, float -> double)", mixed, {M, NN}, [&](std::size_t i) { return v(ai, i) * v(a, i); });
  const auto on_half = fusex::map(
      [](auto x) {
        static_assert(std::is_same_v<decltype(x), float>, "float16 operands are passed as float");
        return x * 0.5f;
      },
      ah.cview({M, NN}));
  STATIC_REQUIRE(std::is_same_v<decltype(on_half)::value_type, float>);
  check_expr("map(half -> float)", on_half, {M, NN}, [&](std::size_t i) { return v(ah, i) * 0.5; });
  // An explicit result type.
  const auto as_half = fusex::map<half>([](float x) { return x * 3.0f; }, A);
  STATIC_REQUIRE(std::is_same_v<decltype(as_half)::value_type, half>);
  check_expr("map<half>", as_half, {M, NN}, [&](std::size_t i) { return 3 * v(a, i); });
  // Scalars, bool results, nesting, three operands.
  check_expr("map(f, A, 2.0)", fusex::map([](float x, float s) { return x - s; }, A, 2.0), {M, NN},
             [&](std::size_t i) { return v(a, i) - 2; });
  check_expr("map -> bool", fusex::map([](float x) { return x > 0.5f; }, A), {M, NN},
             [&](std::size_t i) { return v(a, i) > 0.5; });
  check_expr("relu(map(...) - 1) * B", fusex::relu(fusex::map(axpy{-1.0f}, A, B) - 1) * B, {M, NN}, [&](std::size_t i) {
    const double t = -v(a, i) + v(b, i % NN) - 1;
    return (t > 0 ? t : 0.0) * v(b, i % NN);
  });
  check_expr("map of three operands",
             fusex::map([](float x, float y, int z) { return x * y + static_cast<float>(z); }, A, B, ai.cview({M, NN})),
             {M, NN}, [&](std::size_t i) { return v(a, i) * v(b, i % NN) + v(ai, i); });
  // The op functors are public and usable in map.
  check_expr("map(ops::maximum, A, B)", fusex::map(fusex::ops::maximum{}, A, B), {M, NN},
             [&](std::size_t i) { return std::max(v(a, i), v(b, i % NN)); });
  const std::string plan = fusex::explain(a.view({M, NN}), fusex::map(axpy{1.0f}, A, B));
  INFO(plan);
  CHECK(contains(plan, "map -> float32"));
}

// --- deep expressions ------------------------------------------------------------------------------

TEST_CASE("deep expressions: chains of 20 and more ops in one evaluation", "[eval][deep]") {
  const std::size_t n = 257;
  const auto a = random_array<float>(n, -2, 2), b = random_array<float>(n, -2, 2);
  const auto x = a.cview({257}), y = b.cview({257});
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };

  // 22 ops of many kinds.
  const auto e =
      fusex::relu(
          fusex::tanh(fusex::sigmoid(fusex::exp(-fusex::abs(fusex::sin(x) * 0.5f + fusex::cos(y) * 0.25f)) - 0.1f) *
                      3.0f) +
          fusex::sqrt(fusex::abs(x) + 1.0f) / (1.0f + x * x)) -
      fusex::min(x, y) * fusex::maximum(x, 0.5f);
  check_expr(
      "22-op float chain", e, {257},
      [&](std::size_t i) {
        const double xv = A(i), yv = B(i);
        const double s =
            1.0 / (1.0 + std::exp(-(std::exp(-std::fabs(std::sin(xv) * 0.5 + std::cos(yv) * 0.25)) - 0.1)));
        const double t = std::tanh(s * 3.0) + std::sqrt(std::fabs(xv) + 1.0) / (1.0 + xv * xv);
        return (t > 0 ? t : 0.0) - std::min(xv, yv) * std::max(xv, 0.5);
      },
      tolerance{1e-5, 1e-5});

  // 20 nested additions and multiplications on int32: exact.
  const auto ai = small_values<i32>(n);
  const auto X = ai.cview({257});
  const auto chain = (((((((((X + 1) * 3 - 2) * 2 + X) - 7) * 2 + 1) - X) * 3 + 4) - X * 2) + 5) * 2 - X;
  check_expr("20-op int32 chain", chain, {257}, [&](std::size_t i) {
    const i64 xv = value_of(ai[i]);
    return (((((((((xv + 1) * 3 - 2) * 2 + xv) - 7) * 2 + 1) - xv) * 3 + 4) - xv * 2) + 5) * 2 - xv;
  });

  // Twelve distinct leaves in one expression.
  std::array<host_array<float>, 12> leaves{small_values<float>(n), small_values<float>(n), small_values<float>(n),
                                           small_values<float>(n), small_values<float>(n), small_values<float>(n),
                                           small_values<float>(n), small_values<float>(n), small_values<float>(n),
                                           small_values<float>(n), small_values<float>(n), small_values<float>(n)};
  auto L = [&](int k) { return leaves[static_cast<std::size_t>(k)].cview({257}); };
  const auto many = L(0) + L(1) * 2 + L(2) * 3 + L(3) * 4 + L(4) * 5 + L(5) * 6 + L(6) * 7 + L(7) * 8 + L(8) * 9 +
                    L(9) * 10 + L(10) * 11 + L(11) * 12;
  check_expr("12 leaves", many, {257}, [&](std::size_t i) {
    double s = 0;
    for (int k = 0; k < 12; ++k) s += (k + 1) * value_of(leaves[static_cast<std::size_t>(k)][i]);
    return s;
  });
}

// --- conversion at the store -----------------------------------------------------------------------

TEST_CASE("values are converted to the destination's type when stored", "[eval][convert]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto f = from_list<float>({-2.75, -0.5, 0.0, 0.5, 2.75, 100.25});  // all exact in float16 too
  const auto F = f.cview({6});
  host_array<i32> oi(6);
  fusex::host::eval(oi.view({6}), F);  // truncation toward zero
  const i64 trunc_want[] = {-2, 0, 0, 0, 2, 100};
  for (std::size_t i = 0; i < 6; ++i) CHECK(value_of(oi[i]) == trunc_want[i]);
  host_array<bool> ob(6);
  fusex::host::eval(ob.view({6}), F);  // non-zero is true
  for (std::size_t i = 0; i < 6; ++i) CHECK(value_of(ob[i]) == (i == 2 ? 0 : 1));
  host_array<double> od(6);
  fusex::host::eval(od.view({6}), F * 3);
  for (std::size_t i = 0; i < 6; ++i)
    CHECK(value_of(od[i]) == static_cast<double>(static_cast<float>(value_of(f[i]) * 3)));
  host_array<half> oh(6);
  fusex::host::eval(oh.view({6}), F);
  for (std::size_t i = 0; i < 6; ++i) CHECK(value_of(oh[i]) == value_of(f[i]));
  // A bool expression stored as float: 1 and 0; an integer expression stored as float.
  host_array<float> of(6);
  fusex::host::eval(of.view({6}), F > 0);
  for (std::size_t i = 0; i < 6; ++i) CHECK(value_of(of[i]) == (value_of(f[i]) > 0 ? 1.0 : 0.0));
  auto k = from_list<i64>({-3, 1 << 20, 7, 0, 5, 16777217});
  fusex::host::eval(of.view({6}), k.cview({6}));
  CHECK(value_of(of[0]) == -3);
  CHECK(value_of(of[1]) == 1048576);
  CHECK(value_of(of[5]) == 16777216);  // rounded to float32
  // NaN stored as bool is true (NaN is not zero).
  auto q = from_list<float>({nan});
  host_array<bool> oq(1);
  fusex::host::eval(oq.view({1}), q.cview({1}));
  CHECK(value_of(oq[0]) == 1);
  // A scalar stored into an integer destination: the value converts at the store.
  fusex::host::eval(oi.view({6}), 2.7);
  CHECK(value_of(oi[0]) == 2);
}

// --- the plan printer ------------------------------------------------------------------------------

TEST_CASE("explain() describes the plan without evaluating", "[eval][explain]") {
  host_array<float> a(64 * 32), b(32), y(64 * 32);
  host_array<float> t(32 * 64);
  poison(y);
  const auto A = a.cview({64, 32}), B = b.cview({32});
  const auto Y = y.view({64, 32});

  SECTION("a broadcast add, vectorised") {
    const std::string plan = fusex::explain(Y, A + B);
    INFO(plan);
    CHECK(contains(plan, "fusex plan: 1 kernel (elementwise)"));
    CHECK(contains(plan, "[64, 32]"));
    CHECK(contains(plan, "destination 0: float32 [64, 32] strides [32, 1]"));
    CHECK(contains(plan, "add -> float32"));
    CHECK(contains(plan, "view float32 [64, 32] strides [32, 1]"));
    CHECK(contains(plan, "view float32 [32] strides [1] (broadcast)"));
    CHECK(contains(plan, "index space [64, 32]"));
    CHECK(contains(plan, "vector width 4"));
    CHECK(contains(plan, "32-bit indices"));
    CHECK(all_poisoned(y));  // nothing was evaluated
  }
  SECTION("contiguous operands merge into one dimension") {
    const std::string plan = fusex::explain(Y, A * 2);
    INFO(plan);
    CHECK(contains(plan, "index space [2048]"));
    CHECK(contains(plan, "mul -> float32"));
    CHECK(contains(plan, "scalar float32 2"));
  }
  SECTION("op names") {
    const std::string plan =
        fusex::explain(Y, fusex::where(A > 0, fusex::exp(A), fusex::log1p(fusex::abs(A))) + fusex::sigmoid(B) -
                              fusex::cast<half>(fusex::gelu(A)) * fusex::relu(-B));
    INFO(plan);
    for (const char* name : {"where", "gt", "exp", "log1p", "abs", "add", "sigmoid", "sub", "cast -> float16", "gelu",
                             "relu", "neg", "mul"}) {
      INFO(name);
      CHECK(contains(plan, name));
    }
  }
  SECTION("a transposed leaf: its layout, and scalar accesses") {
    const std::string plan = fusex::explain(Y, t.cview({32, 64}).t() + 1);
    INFO(plan);
    CHECK(contains(plan, "view float32 [64, 32] strides [1, 64]"));
    CHECK(contains(plan, "scalar accesses"));
  }
  SECTION("vector width follows the widest element") {
    host_array<half> h(64);
    host_array<double> d(64);
    const std::string ph = fusex::explain(h.view({64}), h.cview({64}) * 2);
    const std::string pd = fusex::explain(d.view({64}), d.cview({64}) * 2);
    const std::string pm = fusex::explain(h.view({64}), d.cview({64}) * 2);
    INFO(ph << pd << pm);
    CHECK(contains(ph, "vector width 8"));
    CHECK(contains(ph, "float16 [64]"));
    CHECK(contains(pd, "vector width 2"));
    CHECK(contains(pm, "vector width 2"));
  }
  SECTION("several destinations") {
    host_array<bool> z(64 * 32);
    const std::string plan = fusex::explain(fusex::tie(Y, z.view({64, 32})), A + B, A > B);
    INFO(plan);
    CHECK(contains(plan, "2 destination(s)"));
    CHECK(contains(plan, "destination 1: bool [64, 32]"));
    CHECK(contains(plan, "gt -> bool"));
  }
  SECTION("more than 2^31 elements run as several 32-bit kernels") {
    // The plan never touches memory: a view of 2^32 elements over a single float is enough here.
    host_array<float> small(1);
    const auto big_dst = fusex::make_view(small.data(), {65536, 65536}, {65536, 1});
    const std::string plan = fusex::explain(big_dst, 2.0f);
    INFO(plan);
    // 2^32 contiguous elements: pieces of at most 2^31 - 1 (cut at whole vectors where the
    // address allows the vector path, else at single elements): three either way.
    CHECK(contains(plan, "fusex plan: 3 kernels (elementwise)"));
    CHECK(contains(plan, "32-bit indices in 3 pieces"));
    CHECK(contains(plan, "[65536, 65536]"));
  }
  SECTION("an empty destination launches nothing") {
    const std::string plan = fusex::explain(y.view({0, 32}), b.cview({32}) + 1);
    INFO(plan);
    CHECK(contains(plan, "no kernel"));
    CHECK(contains(plan, "[0, 32]"));
  }
}

// --- index arithmetic of the device kernels --------------------------------------------------------

TEST_CASE("fast_divmod<uint32> divides like / and %", "[eval][planner]") {
  // The device kernels split 32-bit work indices into coordinates with it; the host backend uses
  // 64-bit division, so it is checked here directly.
  std::vector<std::uint32_t> divisors = {1,
                                         2,
                                         3,
                                         5,
                                         7,
                                         10,
                                         31,
                                         32,
                                         33,
                                         100,
                                         255,
                                         256,
                                         1000,
                                         4096,
                                         65535,
                                         65536,
                                         65537,
                                         1000003,
                                         (1u << 30) - 1,
                                         1u << 30,
                                         (1u << 31) - 1};
  std::vector<std::uint32_t> dividends = {0, 1, 2, 3, 1000, 65535, 65536, 999999, (1u << 31) - 2, (1u << 31) - 1};
  for (int k = 0; k < 200; ++k)
    dividends.push_back(static_cast<std::uint32_t>(random_value<i64>(0, 2147483647.0, false)));
  std::size_t bad = 0;
  for (std::uint32_t d : divisors) {
    const fusex::detail::fast_divmod<std::uint32_t> f(d);
    for (std::uint32_t n : dividends) {
      std::uint32_t q = 0, r = 0;
      f.divmod(n, q, r);
      if (q != n / d || r != n % d) {
        if (bad++ < 5) FAIL_CHECK("fast_divmod(" << d << ") of " << n << ": " << q << ", " << r);
      }
    }
  }
  CHECK(bad == 0);
}
