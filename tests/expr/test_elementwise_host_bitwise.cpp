// Host tests: bitwise ops and shifts on integers and bool, and where() on every element type,
// against references in plain int64 / double arithmetic.
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
// --- bitwise ---------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("bitwise & | ^ ~ on integers and bool", "[ops][bitwise]", FXT_INT_DTYPES, bool) {
  using T = TestType;
  const auto a = random_array<T>(N, lowest<T>(), highest<T>(), false);
  const auto b = random_array<T>(N, lowest<T>(), highest<T>(), false);
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };
  check_expr("x & y", x & y, S, [&](std::size_t i) { return A(i) & B(i); });
  check_expr("x | y", x | y, S, [&](std::size_t i) { return A(i) | B(i); });
  check_expr("x ^ y", x ^ y, S, [&](std::size_t i) { return A(i) ^ B(i); });
  if constexpr (std::is_same_v<T, bool>) {
    check_expr("~x (bool: logical not)", ~x, S, [&](std::size_t i) { return A(i) == 0; });
  } else {
    check_expr("~x", ~x, S, [&](std::size_t i) { return ~A(i); });
    check_expr("x & 0x0F", x & 0x0F, S, [&](std::size_t i) { return A(i) & 0x0F; });
  }
  check_expr("(x ^ y) ^ y", (x ^ y) ^ y, S, [&](std::size_t i) { return A(i); });
}

TEMPLATE_TEST_CASE("shifts << >> on integers", "[ops][bitwise]", FXT_INT_DTYPES) {
  using T = TestType;
  constexpr int bits = static_cast<int>(8 * sizeof(T));
  const auto a = random_array<T>(N, lowest<T>(), highest<T>(), false);
  // Counts in [-2, bits + 2): out-of-range counts are part of the contract.
  const auto b = random_array<T>(N, std::is_signed_v<T> ? -2 : 0, bits + 2, false);
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };
  // a << b: the low bits of a * 2^b; a count outside [0, bits) gives 0.
  auto shl = [&](i64 v, i64 n) -> i64 {
    if (n < 0 || n >= bits) return 0;
    return static_cast<i64>(static_cast<std::uint64_t>(v) << n);
  };
  // a >> b: floor(a / 2^b); a count outside [0, bits) gives 0, or -1 for negative a.
  auto shr = [&](i64 v, i64 n) -> i64 {
    if (n < 0 || n >= bits) return v < 0 ? -1 : 0;
    if (v >= 0) return static_cast<i64>(static_cast<std::uint64_t>(v) >> n);
    return ~static_cast<i64>(static_cast<std::uint64_t>(~v) >> n);
  };
  check_expr("x << y", x << y, S, [&](std::size_t i) { return shl(A(i), B(i)); });
  check_expr("x >> y", x >> y, S, [&](std::size_t i) { return shr(A(i), B(i)); });
  check_expr("x << 3", x << 3, S, [&](std::size_t i) { return shl(A(i), 3); });
  check_expr("x >> 1", x >> 1, S, [&](std::size_t i) { return shr(A(i), 1); });
  check_expr("(x >> 2) << 2", (x >> 2) << 2, S, [&](std::size_t i) { return shl(wrap<T>(shr(A(i), 2)), 2); });
}
TEMPLATE_TEST_CASE("where(c, a, b) on every dtype", "[ops][where]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto c = random_array<bool>(N, 0, 1);
  const auto ct = sparse_array<T>(N);  // a condition of type T: non-zero is true
  const auto a = random_default<T>(N), b = random_default<T>(N);
  const auto cond = c.cview(S), condt = ct.cview(S), x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };
  using R = ref_t<T>;
  check_expr("where(c, x, y)", fusex::where(cond, x, y), S,
             [&](std::size_t i) { return value_of(c[i]) ? A(i) : B(i); });
  check_expr("where(ct, x, y)", fusex::where(condt, x, y), S,
             [&](std::size_t i) { return value_of(ct[i]) != 0 ? A(i) : B(i); });
  check_expr("where(x > y, x, y)", fusex::where(x > y, x, y), S,
             [&](std::size_t i) { return A(i) > B(i) ? A(i) : B(i); });
  check_expr("where(c, x, 1)", fusex::where(cond, x, 1), S,
             [&](std::size_t i) { return value_of(c[i]) ? R(A(i)) : R(1); });
  check_expr("where(c, 1, y)", fusex::where(cond, 1, y), S,
             [&](std::size_t i) { return value_of(c[i]) ? R(1) : R(B(i)); });
}

TEST_CASE("where promotes its branches", "[ops][where]") {
  auto c = from_list<bool>({1, 0, 1});
  auto a = from_list<i32>({7, 8, 9});
  auto h = from_list<half>({0.5, 0.25, 0.125});
  const auto e = fusex::where(c.view({3}), a.view({3}), 1.5);  // int32 and a float scalar: float32
  STATIC_REQUIRE(std::is_same_v<decltype(e)::value_type, float>);
  check_expr("where(c, int32, 1.5)", e, {3}, [](std::size_t i) { return i == 1 ? 1.5 : 7.0 + static_cast<double>(i); });
  check_expr("where(c, int32, half)", fusex::where(c.view({3}), a.view({3}), h.view({3})), {3},
             [](std::size_t i) { return i == 1 ? 0.25 : 7.0 + static_cast<double>(i); });
}
