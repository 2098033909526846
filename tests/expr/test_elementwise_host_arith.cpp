// Host tests: arithmetic (+ - * / % unary -, min, max, clamp, fma, abs) on every element type
// against references in plain double / int64 arithmetic; mixed-type promotion; integer division
// by zero and floating division semantics.
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

// --- arithmetic ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("arithmetic: + - * / % and unary minus on every dtype", "[ops][arith]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto a = random_default<T>(N), b = random_default<T>(N);
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };

  check_expr("x + y", x + y, S, [&](std::size_t i) { return A(i) + B(i); });
  check_expr("x - y", x - y, S, [&](std::size_t i) { return A(i) - B(i); });
  check_expr("x * y", x * y, S, [&](std::size_t i) { return A(i) * B(i); });
  check_expr("x / y", x / y, S, [&](std::size_t i) { return div_ref(A(i), B(i)); });
  check_expr("x % y", x % y, S, [&](std::size_t i) { return mod_ref(A(i), B(i)); });
  check_expr("fmod(x, y)", fusex::fmod(x, y), S, [&](std::size_t i) { return mod_ref(A(i), B(i)); });
  check_expr("-x", -x, S, [&](std::size_t i) { return -A(i); });
  check_expr("-(-x)", -(-x), S, [&](std::size_t i) { return A(i); });

  // Weak scalars (an int scalar with a bool tensor gives int64; otherwise the tensor's type).
  using R = ref_t<typename decltype(x + 3)::value_type>;
  check_expr("x + 3", x + 3, S, [&](std::size_t i) { return R(A(i)) + R(3); });
  check_expr("3 - x", 3 - x, S, [&](std::size_t i) { return R(3) - R(A(i)); });
  check_expr("x * 2", x * 2, S, [&](std::size_t i) { return R(A(i)) * R(2); });
  check_expr("x / 2", x / 2, S, [&](std::size_t i) { return div_ref(R(A(i)), R(2)); });
  check_expr("x % 3", x % 3, S, [&](std::size_t i) { return mod_ref(R(A(i)), R(3)); });
  if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, float>) {
    // Integers: exact modulo 2^bits whatever the intermediate wrapping. float16/bfloat16: exact in
    // the float32 intermediates, rounded once at the store. (float32 itself would need a looser
    // tolerance for the cancellation; bool intermediates are bools.)
    check_expr("(x + y) * x - y / 2", (x + y) * x - y / 2, S,
               [&](std::size_t i) { return (A(i) + B(i)) * A(i) - div_ref(B(i), R(2)); });
  }
}

TEMPLATE_TEST_CASE("min, max, clamp, fma, abs on every dtype", "[ops][arith]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto a = random_default<T>(N), b = random_default<T>(N), c = random_default<T>(N);
  const auto x = a.cview(S), y = b.cview(S), z = c.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  auto B = [&](std::size_t i) { return value_of(b[i]); };
  auto C = [&](std::size_t i) { return value_of(c[i]); };

  check_expr("min(x, y)", fusex::min(x, y), S, [&](std::size_t i) { return min_ref(A(i), B(i)); });
  check_expr("max(x, y)", fusex::max(x, y), S, [&](std::size_t i) { return max_ref(A(i), B(i)); });
  check_expr("minimum(x, y)", fusex::minimum(x, y), S, [&](std::size_t i) { return min_ref(A(i), B(i)); });
  check_expr("maximum(x, y)", fusex::maximum(x, y), S, [&](std::size_t i) { return max_ref(A(i), B(i)); });
  check_expr("clamp(x, y, z)", fusex::clamp(x, y, z), S,
             [&](std::size_t i) { return min_ref(max_ref(A(i), B(i)), C(i)); });
  using R = ref_t<typename decltype(fusex::clamp(x, 2, 6))::value_type>;
  check_expr("clamp(x, 2, 6)", fusex::clamp(x, 2, 6), S,
             [&](std::size_t i) { return min_ref(max_ref(R(A(i)), R(2)), R(6)); });
  check_expr("fma(x, y, z)", fusex::fma(x, y, z), S, [&](std::size_t i) { return A(i) * B(i) + C(i); });
  check_expr("fma(x, 3, z)", fusex::fma(x, 3, z), S, [&](std::size_t i) { return A(i) * R(3) + C(i); });
  check_expr("abs(x)", fusex::abs(x), S, [&](std::size_t i) { return A(i) < 0 ? -A(i) : A(i); });
  if constexpr (is_fp<T>) {
    check_expr("abs(-x)", fusex::abs(-x), S, [&](std::size_t i) { return std::fabs(A(i)); });
  } else {
    check_expr("abs(-x)", fusex::abs(-x), S, [&](std::size_t i) {
      const i64 v = wrap<T>(-A(i));  // the intermediate -x has type T: it wraps (uint8: 256 - x)
      return v < 0 ? -v : v;
    });
  }
}

TEST_CASE("fma rounds once for float32", "[ops][arith]") {
  // a * b = 1 - 2^-46 exactly; rounded to float it would be 1, and + (-1) would give 0.
  const float e = std::ldexp(1.0f, -23);
  auto a = from_list<float>({1.0 + e}), b = from_list<float>({1.0 - e}), c = from_list<float>({-1.0});
  host_array<float> out(1);
  fusex::host::eval(out.view({1}), fusex::fma(a.view({1}), b.view({1}), c.view({1})));
  CHECK(to_double(out[0]) == -std::ldexp(1.0, -46));
}

TEST_CASE("abs and unary minus of the most negative integer wrap", "[ops][arith]") {
  auto a8 = from_list<i8>({-128, 127, -1});
  host_array<i8> o8(3);
  fusex::host::eval(o8.view({3}), fusex::abs(a8.view({3})));
  CHECK(value_of(o8[0]) == -128);
  CHECK(value_of(o8[1]) == 127);
  CHECK(value_of(o8[2]) == 1);
  fusex::host::eval(o8.view({3}), -a8.view({3}));
  CHECK(value_of(o8[0]) == -128);
  CHECK(value_of(o8[1]) == -127);
  auto u = from_list<u8>({0, 1, 255});
  host_array<u8> ou(3);
  fusex::host::eval(ou.view({3}), -u.view({3}));
  CHECK(value_of(ou[0]) == 0);
  CHECK(value_of(ou[1]) == 255);
  CHECK(value_of(ou[2]) == 1);
  fusex::host::eval(ou.view({3}), fusex::abs(u.view({3})));
  CHECK(value_of(ou[2]) == 255);
}

TEST_CASE("mixed dtypes compute in the promoted type", "[ops][promotion]") {
  SECTION("int8 + uint8 -> int32 (no wrap at 8 bits)") {
    const auto a = random_array<i8>(N, -128, 127);
    const auto b = random_array<u8>(N, 0, 255);
    const auto e = a.cview(S) + b.cview(S);
    STATIC_REQUIRE(std::is_same_v<decltype(e)::value_type, i32>);
    check_expr("int8 + uint8", e, S, [&](std::size_t i) { return value_of(a[i]) + value_of(b[i]); });
    check_expr("int8 * uint8", a.cview(S) * b.cview(S), S,
               [&](std::size_t i) { return value_of(a[i]) * value_of(b[i]); });
  }
  SECTION("int32 + float16 -> float16") {
    const auto a = random_array<i32>(N, -1000, 1000);
    const auto b = random_array<half>(N, -8, 8);
    check_expr("int32 + half", a.cview(S) + b.cview(S), S,
               [&](std::size_t i) { return static_cast<double>(value_of(a[i])) + value_of(b[i]); });
  }
  SECTION("float16 * bfloat16 -> float32") {
    const auto a = random_array<half>(N, -8, 8);
    const auto b = random_array<bfloat16>(N, -8, 8);
    const auto e = a.cview(S) * b.cview(S);
    STATIC_REQUIRE(std::is_same_v<decltype(e)::value_type, float>);
    check_expr("half * bf16", e, S, [&](std::size_t i) { return value_of(a[i]) * value_of(b[i]); });
  }
  SECTION("float32 + float64 -> float64") {
    const auto a = random_array<float>(N, -8, 8);
    const auto b = random_array<double>(N, -8, 8);
    check_expr("float + double", a.cview(S) + b.cview(S), S,
               [&](std::size_t i) { return value_of(a[i]) + value_of(b[i]); });
  }
  SECTION("uint8 * int64 -> int64") {
    const auto a = random_array<u8>(N, 0, 255);
    const auto b = random_array<i64>(N, -4e9, 4e9);
    check_expr("uint8 * int64", a.cview(S) * b.cview(S), S,
               [&](std::size_t i) { return value_of(a[i]) * value_of(b[i]); });
  }
  SECTION("bool + int scalar -> int64; bool * float scalar -> float32") {
    const auto a = random_array<bool>(N, 0, 1);
    check_expr("bool + 5", a.cview(S) + 5, S, [&](std::size_t i) { return value_of(a[i]) + 5; });
    check_expr("bool * 0.5", a.cview(S) * 0.5, S, [&](std::size_t i) { return value_of(a[i]) * 0.5; });
  }
  SECTION("int32 * 0.1 -> float32, the scalar rounded to float32") {
    const auto a = random_array<i32>(N, -1000, 1000);
    check_expr("int32 * 0.1", a.cview(S) * 0.1, S,
               [&](std::size_t i) { return static_cast<double>(value_of(a[i])) * static_cast<double>(0.1f); });
    check_expr("int32 / 4.0", a.cview(S) / 4.0, S,
               [&](std::size_t i) { return static_cast<double>(value_of(a[i])) / 4.0; });
  }
  SECTION("float16 * 2.5 stays float16") {
    const auto a = random_array<half>(N, -8, 8);
    check_expr("half * 2.5", a.cview(S) * 2.5, S, [&](std::size_t i) { return value_of(a[i]) * 2.5; });
  }
  SECTION("bool tensors in arithmetic") {
    const auto a = random_array<bool>(N, 0, 1);
    const auto b = random_array<i8>(N, -100, 100);
    check_expr("bool + int8", a.cview(S) + b.cview(S), S,
               [&](std::size_t i) { return value_of(a[i]) + value_of(b[i]); });
    check_expr("bool * float", a.cview(S) * b.cview(S), S,
               [&](std::size_t i) { return value_of(a[i]) * value_of(b[i]); });
  }
}
// --- documented corner cases -----------------------------------------------------------------------

TEMPLATE_TEST_CASE("integer division and modulo: truncation, x / 0 == 0, MIN / -1 wraps", "[ops][semantics]",
                   std::int8_t, std::int32_t, std::int64_t) {
  using T = TestType;
  const double mn = lowest<T>();
  auto a = from_list<T>({7, -7, 7, -7, 0, 5, -5, mn, mn, 9, 1, mn});
  auto b = from_list<T>({2, 2, -2, -2, 3, 0, 0, -1, 1, -1, 0, 0});
  const i64 MN = static_cast<i64>(mn);
  const i64 quot[] = {3, -3, -3, 3, 0, 0, 0, MN, MN, -9, 0, 0};
  const i64 rem[] = {1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  check_expr("a / b", a.view({12}) / b.view({12}), {12}, [&](std::size_t i) { return quot[i]; });
  check_expr("a % b", a.view({12}) % b.view({12}), {12}, [&](std::size_t i) { return rem[i]; });
  check_expr("a / 0", a.view({12}) / 0, {12}, [](std::size_t) { return 0; });
  check_expr("a % 0", a.view({12}) % 0, {12}, [](std::size_t) { return 0; });
}

TEST_CASE("unsigned and bool division by zero gives 0", "[ops][semantics]") {
  auto a = from_list<u8>({200, 7, 0});
  auto b = from_list<u8>({0, 2, 0});
  check_expr("uint8 / 0", a.view({3}) / b.view({3}), {3}, [](std::size_t i) { return i == 1 ? 3 : 0; });
  check_expr("uint8 % 0", a.view({3}) % b.view({3}), {3}, [](std::size_t i) { return i == 1 ? 1 : 0; });
  auto p = from_list<bool>({1, 1, 0});
  auto q = from_list<bool>({0, 1, 0});
  check_expr("bool / bool", p.view({3}) / q.view({3}), {3}, [](std::size_t i) { return i == 1 ? 1 : 0; });
}

TEMPLATE_TEST_CASE("floating division by zero and fmod follow IEEE", "[ops][semantics]", FXT_FLOAT_DTYPES) {
  using T = TestType;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto a = from_list<T>({1, -1, 0, -7.5, 7.5, 5});
  auto b = from_list<T>({0, 0, 0, 2, -2, 0});
  const double quot[] = {inf, -inf, nan, -3.75, -3.75, inf};
  const double rem[] = {nan, nan, nan, -1.5, 1.5, nan};
  check_expr("a / b", a.view({6}) / b.view({6}), {6}, [&](std::size_t i) { return quot[i]; });
  check_expr("a % b", a.view({6}) % b.view({6}), {6}, [&](std::size_t i) { return rem[i]; });
}
