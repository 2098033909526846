// Host tests: comparisons, logical ops and isnan/isinf/isfinite on every element type, against
// references in plain double / int64 arithmetic.
#include "host_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

using namespace fxt;

namespace {
const fusex::shape_t S{5, 37};
constexpr std::size_t N = 5 * 37;
}  // namespace

// --- comparisons and logic -------------------------------------------------------------------------

TEMPLATE_TEST_CASE("comparisons on every dtype give bool", "[ops][compare]", FXT_ALL_DTYPES) {
  using T = TestType;
  // Small whole numbers, so that equal pairs are frequent.
  const double lo = std::is_same_v<T, u8> || std::is_same_v<T, bool> ? 0 : -3;
  const double hi = std::is_same_v<T, bool> ? 1 : 3;
  host_array<T> a(N), b(N);
  for (std::size_t i = 0; i < N; ++i) {
    a[i] = from_double<T>(std::round(to_double(random_value<double>(lo, hi, false))));
    b[i] = from_double<T>(std::round(to_double(random_value<double>(lo, hi, false))));
  }
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };
  STATIC_REQUIRE(std::is_same_v<typename decltype(x == y)::value_type, bool>);

  check_expr("x == y", x == y, S, [&](std::size_t i) { return A(i) == B(i); });
  check_expr("x != y", x != y, S, [&](std::size_t i) { return A(i) != B(i); });
  check_expr("x < y", x < y, S, [&](std::size_t i) { return A(i) < B(i); });
  check_expr("x <= y", x <= y, S, [&](std::size_t i) { return A(i) <= B(i); });
  check_expr("x > y", x > y, S, [&](std::size_t i) { return A(i) > B(i); });
  check_expr("x >= y", x >= y, S, [&](std::size_t i) { return A(i) >= B(i); });
  check_expr("x > 1", x > 1, S, [&](std::size_t i) { return A(i) > 1; });
  check_expr("0 == x", 0 == x, S, [&](std::size_t i) { return A(i) == 0; });
  check_expr("x <= y * 1", x <= y * 1, S, [&](std::size_t i) { return A(i) <= B(i); });
}

TEST_CASE("comparisons of mixed dtypes compare in the promoted type", "[ops][compare]") {
  // 300 (int32) vs 44 (int8): compared as int32, not narrowed to int8 (300 would wrap to 44).
  auto a = from_list<i32>({300, 44, -1, 255});
  auto b = from_list<i8>({44, 44, -1, -1});
  auto c = from_list<u8>({44, 44, 255, 255});
  host_array<bool> out(4);
  fusex::host::eval(out.view({4}), a.view({4}) == b.view({4}));
  CHECK(value_of(out[0]) == 0);
  CHECK(value_of(out[1]) == 1);
  CHECK(value_of(out[2]) == 1);
  CHECK(value_of(out[3]) == 0);
  // uint8 255 vs int8 -1: both int32, so different.
  fusex::host::eval(out.view({4}), b.view({4}) < c.view({4}));
  CHECK(value_of(out[0]) == 0);
  CHECK(value_of(out[2]) == 1);
  CHECK(value_of(out[3]) == 1);
  // A float scalar with an int tensor compares in float32: 2 < 2.5.
  auto d = from_list<i32>({2, 3});
  host_array<bool> o2(2);
  fusex::host::eval(o2.view({2}), d.view({2}) < 2.5);
  CHECK(value_of(o2[0]) == 1);
  CHECK(value_of(o2[1]) == 0);
}

TEMPLATE_TEST_CASE("logical and, or, not on every dtype", "[ops][logic]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto a = sparse_array<T>(N), b = sparse_array<T>(N);
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]) != 0; };
  auto B = [&](std::size_t i) { return value_of(b[i]) != 0; };

  check_expr("x && y", x && y, S, [&](std::size_t i) { return A(i) && B(i); });
  check_expr("x || y", x || y, S, [&](std::size_t i) { return A(i) || B(i); });
  check_expr("!x", !x, S, [&](std::size_t i) { return !A(i); });
  check_expr("logical_and(x, y)", fusex::logical_and(x, y), S, [&](std::size_t i) { return A(i) && B(i); });
  check_expr("logical_or(x, y)", fusex::logical_or(x, y), S, [&](std::size_t i) { return A(i) || B(i); });
  check_expr("logical_not(x)", fusex::logical_not(x), S, [&](std::size_t i) { return !A(i); });
  check_expr("!(x && y) || x", !(x && y) || x, S, [&](std::size_t i) { return !(A(i) && B(i)) || A(i); });
  check_expr("x && true", x && true, S, [&](std::size_t i) { return A(i); });
}

TEMPLATE_TEST_CASE("isnan, isinf, isfinite on every dtype", "[ops][classify]", FXT_ALL_DTYPES) {
  using T = TestType;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  host_array<T> a = random_default<T>(N);
  if constexpr (is_fp<T>) {
    const double specials[] = {nan, inf, -inf, 0.0, -0.0, 1.0, -highest<T>(), highest<T>(), -nan};
    for (std::size_t i = 0; i < N; i += 3) a[i] = from_double<T>(specials[(i / 3) % 9]);
  }
  const auto x = a.cview(S);
  auto A = [&](std::size_t i) { return static_cast<double>(value_of(a[i])); };
  check_expr("isnan(x)", fusex::isnan(x), S, [&](std::size_t i) { return std::isnan(A(i)); });
  check_expr("isinf(x)", fusex::isinf(x), S, [&](std::size_t i) { return std::isinf(A(i)); });
  check_expr("isfinite(x)", fusex::isfinite(x), S, [&](std::size_t i) { return std::isfinite(A(i)); });
  check_expr("isnan(x * 0)", fusex::isnan(x * 0), S, [&](std::size_t i) { return !std::isfinite(A(i)) && is_fp<T>; });
  check_expr("!isfinite(x) == (isnan(x) || isinf(x))", !fusex::isfinite(x) == (fusex::isnan(x) || fusex::isinf(x)), S,
             [](std::size_t) { return true; });
}
