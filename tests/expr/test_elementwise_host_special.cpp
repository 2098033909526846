// Host tests: rounding functions and activations (relu, leaky_relu) on every element type, and the
// documented corner cases: NaN propagation, round half to even, float16/bfloat16 rounding of casts
// and stores, float32 intermediates.
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

// --- rounding and activations ----------------------------------------------------------------------

TEMPLATE_TEST_CASE("floor, ceil, round, trunc on every dtype", "[ops][rounding]", FXT_ALL_DTYPES) {
  using T = TestType;
  host_array<T> a = random_default<T>(N);
  if constexpr (is_fp<T>) {
    for (std::size_t i = 0; i < N; i += 4) a[i] = from_double<T>(std::floor(to_double(a[i])) + 0.5);  // ties
  }
  const auto x = a.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  // Identity on integers and bool; the result type is the operand's.
  STATIC_REQUIRE(std::is_same_v<typename decltype(fusex::floor(x))::value_type, T>);
  if constexpr (is_fp<T>) {
    check_expr("floor(x)", fusex::floor(x), S, [&](std::size_t i) { return std::floor(A(i)); });
    check_expr("ceil(x)", fusex::ceil(x), S, [&](std::size_t i) { return std::ceil(A(i)); });
    check_expr("round(x)", fusex::round(x), S, [&](std::size_t i) { return round_half_even(A(i)); });
    check_expr("trunc(x)", fusex::trunc(x), S, [&](std::size_t i) { return std::trunc(A(i)); });
  } else {
    check_expr("floor(x)", fusex::floor(x), S, [&](std::size_t i) { return A(i); });
    check_expr("ceil(x)", fusex::ceil(x), S, [&](std::size_t i) { return A(i); });
    check_expr("round(x)", fusex::round(x), S, [&](std::size_t i) { return A(i); });
    check_expr("trunc(x)", fusex::trunc(x), S, [&](std::size_t i) { return A(i); });
  }
}

TEMPLATE_TEST_CASE("relu and leaky_relu on every dtype", "[ops][activation]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto a = random_default<T>(N);
  const auto x = a.cview(S);
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  using R = ref_t<T>;
  check_expr("relu(x)", fusex::relu(x), S, [&](std::size_t i) { return A(i) > 0 ? A(i) : R(0); });
  if constexpr (is_fp<T>) {
    check_expr("leaky_relu(x)", fusex::leaky_relu(x), S, [&](std::size_t i) { return A(i) > 0 ? A(i) : 0.01 * A(i); });
    check_expr("leaky_relu(x, 0.2)", fusex::leaky_relu(x, 0.2), S,
               [&](std::size_t i) { return A(i) > 0 ? A(i) : 0.2 * A(i); });
  } else {
    // A whole-number slope, exactly representable in every integer type.
    check_expr("leaky_relu(x, 2)", fusex::leaky_relu(x, 2.0), S,
               [&](std::size_t i) { return A(i) > 0 ? A(i) : 2 * A(i); });
  }
}
// --- documented corner cases -----------------------------------------------------------------------

TEMPLATE_TEST_CASE("NaN propagates through min, max, clamp, relu and arithmetic", "[ops][semantics][nan]",
                   FXT_FLOAT_DTYPES) {
  using T = TestType;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = from_list<T>({nan, 1, nan, -2, 3});
  auto b = from_list<T>({1, nan, nan, 5, -4});
  const auto x = a.view({5}), y = b.view({5});
  const double lo[] = {nan, nan, nan, -2, -4}, hi[] = {nan, nan, nan, 5, 3};
  check_expr("min(x, y)", fusex::min(x, y), {5}, [&](std::size_t i) { return lo[i]; });
  check_expr("min(y, x)", fusex::min(y, x), {5}, [&](std::size_t i) { return lo[i]; });
  check_expr("max(x, y)", fusex::max(x, y), {5}, [&](std::size_t i) { return hi[i]; });
  check_expr("max(y, x)", fusex::max(y, x), {5}, [&](std::size_t i) { return hi[i]; });
  check_expr("relu(x)", fusex::relu(x), {5},
             [&](std::size_t i) { return i == 0 || i == 2 ? nan : (i == 1 ? 1.0 : (i == 3 ? 0.0 : 3.0)); });
  check_expr("leaky_relu(x)", fusex::leaky_relu(x), {5}, [&](std::size_t i) {
    const double v = value_of(a[i]);
    return v > 0 ? v : 0.01 * v;
  });
  check_expr("clamp(x, 0, 2)", fusex::clamp(x, 0, 2), {5},
             [&](std::size_t i) { return i == 0 || i == 2 ? nan : (i == 1 ? 1.0 : (i == 3 ? 0.0 : 2.0)); });
  check_expr("x + 1", x + 1, {5}, [&](std::size_t i) { return value_of(a[i]) + 1; });
  check_expr("abs(x)", fusex::abs(x), {5}, [&](std::size_t i) { return std::fabs(value_of(a[i])); });
  // Comparisons with NaN are false, except !=.
  check_expr("x == x", x == x, {5}, [&](std::size_t i) { return !std::isnan(value_of(a[i])); });
  check_expr("x != x", x != x, {5}, [&](std::size_t i) { return std::isnan(value_of(a[i])); });
  check_expr("x < y", x < y, {5}, [&](std::size_t i) { return value_of(a[i]) < value_of(b[i]); });
  // NaN is true for logical ops (it is not zero); where() can replace it.
  check_expr("!x", !x, {5}, [&](std::size_t) { return false; });
  check_expr("where(isnan(x), 0, x)", fusex::where(fusex::isnan(x), 0, x), {5}, [&](std::size_t i) {
    const double v = value_of(a[i]);
    return std::isnan(v) ? 0.0 : v;
  });
}

TEMPLATE_TEST_CASE("round() rounds half to even", "[ops][semantics][rounding]", FXT_FLOAT_DTYPES) {
  using T = TestType;
  auto a = from_list<T>({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, -3.5, 0.25, 0.75, 2.75, 1024.5});
  const double want[] = {-2, -2, -0.0, 0, 2, 2, 4, 4, -4, 0, 1, 3, 1024};
  const std::size_t n = 13;  // 1024.5 is not a float16 or bfloat16: it is stored as 1024
  check_expr("round(x)", fusex::round(a.view({13})), {13}, [&](std::size_t i) { return want[i]; });
  // The sign of zero is kept: round(-0.5) is -0.
  host_array<T> out(n);
  fusex::host::eval(out.view({13}), fusex::round(a.view({13})));
  CHECK(std::signbit(to_double(out[2])));
  if constexpr (std::is_same_v<T, float>) {
    // The float just below 0.5 rounds to 0; the one just above 2.5 to 3.
    auto b = from_list<float>({std::nextafter(0.5f, 0.0f), std::nextafter(2.5f, 3.0f), 8388607.5f});
    check_expr("round(near ties)", fusex::round(b.view({3})), {3},
               [](std::size_t i) { return i == 0 ? 0.0 : (i == 1 ? 3.0 : 8388608.0); });
  }
}

TEST_CASE("cast<half> and cast<bfloat16> round to nearest even", "[ops][semantics][cast]") {
  const double inf = std::numeric_limits<double>::infinity();
  SECTION("float32 -> float16") {
    const double u = std::ldexp(1.0, -11);  // half an ulp of 1 in float16
    auto x = from_list<float>({1 + u, 1 + 3 * u, 1 + u + std::ldexp(1.0, -20), 1 - u, 65504, 65519, 65520, -65520, 1e-8,
                               3e-8, 2049, 2051, -0.0});
    const double want[] = {1,    1 + 4 * u, 1 + 2 * u, 1 - u, 65504, 65504, inf, -inf, 0, std::ldexp(1.0, -24),
                           2048, 2052,      -0.0};
    // cast<half> rounds as a store would, and the result is carried on (here stored to float32).
    host_array<float> out(13);
    fusex::host::eval(out.view({13}), fusex::cast<half>(x.view({13})));
    for (std::size_t i = 0; i < 13; ++i) {
      INFO("element " << i);
      CHECK(to_double(out[i]) == want[i]);
    }
    // Stored to a half destination: the same bits.
    host_array<half> outh(13);
    fusex::host::eval(outh.view({13}), x.view({13}));
    for (std::size_t i = 0; i < 13; ++i) {
      INFO("element " << i);
      CHECK(to_double(outh[i]) == want[i]);
    }
    CHECK(bits_of(outh[0]) == 0x3C00u);
    CHECK(bits_of(outh[1]) == 0x3C02u);
    CHECK(bits_of(outh[2]) == 0x3C01u);
    CHECK(bits_of(outh[6]) == 0x7C00u);
    CHECK(bits_of(outh[9]) == 0x0001u);
    CHECK(bits_of(outh[12]) == 0x8000u);
  }
  SECTION("float32 -> bfloat16") {
    const double u = std::ldexp(1.0, -8);  // half an ulp of 1 in bfloat16
    auto x = from_list<float>({1 + u, 1 + 3 * u, 1 + u + std::ldexp(1.0, -16), 257, 259, 3.0e38,
                               static_cast<double>(std::numeric_limits<float>::max()), 1e-40});
    const double want[] = {1,         1 + 4 * u,
                           1 + 2 * u, 256,
                           260,       to_double(__float2bfloat16_rn(3.0e38f)),
                           inf,       to_double(__float2bfloat16_rn(1e-40f))};
    host_array<float> out(8);
    fusex::host::eval(out.view({8}), fusex::cast<bfloat16>(x.view({8})));
    for (std::size_t i = 0; i < 8; ++i) {
      INFO("element " << i);
      CHECK(to_double(out[i]) == want[i]);
    }
    host_array<bfloat16> outb(8);
    fusex::host::eval(outb.view({8}), x.view({8}));
    CHECK(bits_of(outb[0]) == 0x3F80u);
    CHECK(bits_of(outb[1]) == 0x3F82u);
    CHECK(bits_of(outb[2]) == 0x3F81u);
    CHECK(bits_of(outb[6]) == 0x7F80u);
  }
  SECTION("float64 -> float16 and bfloat16 round once (no double rounding through float32)") {
    // 1 + 2^-11 + 2^-40 is just above a float16 tie; through float32 it would become the tie
    // 1 + 2^-11 and then round to 1.
    auto x = from_list<double>(
        {1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)});
    host_array<half> oh(2);
    host_array<bfloat16> ob(2);
    fusex::host::eval(oh.view({2}), fusex::cast<half>(x.view({2})));
    fusex::host::eval(ob.view({2}), fusex::cast<bfloat16>(x.view({2})));
    CHECK(bits_of(oh[0]) == 0x3C01u);
    CHECK(bits_of(ob[1]) == 0x3F81u);
    fusex::host::eval(oh.view({2}), x.view({2}));
    fusex::host::eval(ob.view({2}), x.view({2}));
    CHECK(bits_of(oh[0]) == 0x3C01u);
    CHECK(bits_of(ob[1]) == 0x3F81u);
  }
}

TEST_CASE("float16 and bfloat16 compute in float32; intermediates are rounded only when stored or cast",
          "[ops][semantics][half]") {
  SECTION("float16") {
    auto x = from_list<half>({2048, 2048, 1});
    host_array<half> out(3);
    // 2048 + 1 = 2049 is not a float16, but the intermediate is a float32: (x + 1) - x == 1.
    fusex::host::eval(out.view({3}), (x.view({3}) + 1) - x.view({3}));
    CHECK(to_double(out[0]) == 1);
    // An explicit cast rounds the intermediate: 2049 -> 2048 (tie to even).
    fusex::host::eval(out.view({3}), fusex::cast<half>(x.view({3}) + 1) - x.view({3}));
    CHECK(to_double(out[0]) == 0);
    // A store rounds: 2049 -> 2048.
    fusex::host::eval(out.view({3}), x.view({3}) + 1);
    CHECK(to_double(out[0]) == 2048);
    CHECK(to_double(out[2]) == 2);
    // Products beyond float16's range stay finite in float32 until stored.
    fusex::host::eval(out.view({3}), x.view({3}) * x.view({3}) * 100 / x.view({3}) / x.view({3}));
    CHECK(to_double(out[0]) == 100);
  }
  SECTION("bfloat16") {
    auto x = from_list<bfloat16>({256, 256, 1});
    host_array<bfloat16> out(3);
    fusex::host::eval(out.view({3}), (x.view({3}) + 1) - x.view({3}));
    CHECK(to_double(out[0]) == 1);
    fusex::host::eval(out.view({3}), fusex::cast<bfloat16>(x.view({3}) + 1) - x.view({3}));
    CHECK(to_double(out[0]) == 0);
    fusex::host::eval(out.view({3}), x.view({3}) + 1);
    CHECK(to_double(out[0]) == 256);
  }
  SECTION("a scalar operand of a float16 expression keeps float32 precision") {
    // x_half * 0.1 has type float16, but the scalar is held as the float32 0.1f (not rounded to
    // float16's 0.0999755859375), and a float32 destination stores the float32 intermediate.
    auto x = from_list<half>({1000});
    host_array<float> out(1);
    const auto e = x.view({1}) * 0.1;
    STATIC_REQUIRE(std::is_same_v<decltype(e)::value_type, half>);
    fusex::host::eval(out.view({1}), e);
    CHECK(to_double(out[0]) == static_cast<double>(1000.0f * 0.1f));
    host_array<half> outh(1);
    fusex::host::eval(outh.view({1}), e);
    CHECK(to_double(outh[0]) == 100);
  }
}
