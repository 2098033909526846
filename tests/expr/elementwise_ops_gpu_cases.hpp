#pragma once
// Bodies of the per-dtype elementwise GPU test cases ("gpu: floating math ops match a double
// reference", "gpu: arithmetic, comparison and logic ops on every dtype"): each TEMPLATE_TEST_CASE
// is instantiated for a subset of its dtypes in several translation units
// (test_elementwise_ops_*gpu.cu), which compile in parallel; every (op, dtype) pair is a kernel.
// The edge-value cases reuse the expressions of the random-input cases wherever they can (an
// expression type is one kernel, whatever the inputs), so they add few kernels to the build.
#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace fusex_test {

// The floating edge values of T: NaN, ±inf, ±0, the largest finite values and a few ordinary ones.
template <class T>
host_vector<T> floating_edges() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double h = highest_finite<T>();
  host_vector<T> v;
  for (double x : {nan, inf, -inf, -0.0, 0.0, 1.0, -1.0, 2.5, -3.0, h, -h}) v.push_back(fusex::convert<T>(x));
  return v;
}

// Unary ops on special values (the edge values, then random finite ones), so that every predicate
// sees both outcomes and NaN / ±inf reach the device code. Expected values follow docs/ops.md:
// isnan/isinf/isfinite classify as in C; relu propagates NaN ("NaN propagates", ops.hpp relu);
// out-of-domain math gives what the C functions give (log(0) = -inf, log(-1) = sqrt(-1) = NaN,
// rsqrt(0) = inf).
template <class T>
void floating_special_values() {
  auto x = floating_edges<T>();
  const auto r = random_values<T>(256, -5, 5, 4242u);
  x.insert(x.end(), r.begin(), r.end());
  check_values<T>(
      "isnan (special values)", [](auto a) { return fusex::isnan(a); }, [](double v) { return double(std::isnan(v)); },
      x);
  check_values<T>(
      "isinf (special values)", [](auto a) { return fusex::isinf(a); }, [](double v) { return double(std::isinf(v)); },
      x);
  check_values<T>(
      "isfinite (special values)", [](auto a) { return fusex::isfinite(a); },
      [](double v) { return double(std::isfinite(v)); }, x);
  check_values<T>(
      "relu (special values)", [](auto a) { return fusex::relu(a); },
      [](double v) { return std::isnan(v) ? v : (v > 0 ? v : 0.0); }, x);
  check_values<T>(
      "abs (special values)", [](auto a) { return fusex::abs(a); }, [](double v) { return std::fabs(v); }, x);
  check_values<T>(
      "neg (special values)", [](auto a) { return -a; }, [](double v) { return -v; }, x);
  check_values<T>(
      "floor (special values)", [](auto a) { return fusex::floor(a); }, [](double v) { return std::floor(v); }, x);
  check_values<T>(
      "ceil (special values)", [](auto a) { return fusex::ceil(a); }, [](double v) { return std::ceil(v); }, x);
  check_values<T>(
      "round (special values)", [](auto a) { return fusex::round(a); }, [](double v) { return std::nearbyint(v); }, x);
  check_values<T>(
      "trunc (special values)", [](auto a) { return fusex::trunc(a); }, [](double v) { return std::trunc(v); }, x);
  check_values<T>(
      "exp (special values)", [](auto a) { return fusex::exp(a); }, [](double v) { return std::exp(v); }, x);
  check_values<T>(
      "log (special values)", [](auto a) { return fusex::log(a); }, [](double v) { return std::log(v); }, x);
  check_values<T>(
      "sqrt (special values)", [](auto a) { return fusex::sqrt(a); }, [](double v) { return std::sqrt(v); }, x);
  check_values<T>(
      "rsqrt (special values)", [](auto a) { return fusex::rsqrt(a); }, [](double v) { return 1 / std::sqrt(v); }, x);
  check_values<T>(
      "tanh (special values)", [](auto a) { return fusex::tanh(a); }, [](double v) { return std::tanh(v); }, x);
  check_values<T>(
      "sigmoid (special values)", [](auto a) { return fusex::sigmoid(a); },
      [](double v) { return 1 / (1 + std::exp(-v)); }, x);
}

// Binary and ternary ops on every pair / triple of floating edge values (NaN in either operand,
// ±inf, ±0, the largest finite values). Semantics (docs/ops.md, "Arithmetic" and "Selection"):
// arithmetic is IEEE 754 in the compute type (x / 0 = ±inf, 0 / 0 = NaN, fmod(x, 0) = NaN, overflow
// to ±inf when stored); min/max/clamp propagate NaN from any operand (ops.hpp maximum/minimum/clamp;
// for float32, float16 and bfloat16 on sm_80+ the device's max.NaN/min.NaN instructions); clamp is
// min(max(x, lo), hi), so lo > hi gives hi; comparisons with NaN are false except !=; where(c, a, b)
// takes a where c is non-zero, NaN counting as true, and passes the selected operand through
// unchanged (NaN included). The sign of a zero result is not compared (compare() does not see it;
// ops.md documents max(-0, +0) as device- and dtype-dependent).
template <class T>
void floating_edge_cases() {
  const auto e = floating_edges<T>();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  host_vector<T> a, b;
  for (auto x : e)
    for (auto y : e) {
      a.push_back(x);
      b.push_back(y);
    }
  check_values<T, T>(
      "add (edge values)", [](auto x, auto y) { return x + y; }, [](double x, double y) { return x + y; }, a, b);
  check_values<T, T>(
      "sub (edge values)", [](auto x, auto y) { return x - y; }, [](double x, double y) { return x - y; }, a, b);
  check_values<T, T>(
      "mul (edge values)", [](auto x, auto y) { return x * y; }, [](double x, double y) { return x * y; }, a, b);
  check_values<T, T>(
      "div (edge values)", [](auto x, auto y) { return x / y; }, [](double x, double y) { return x / y; }, a, b);
  check_values<T, T>(
      "mod (edge values)", [](auto x, auto y) { return x % y; }, [](double x, double y) { return std::fmod(x, y); }, a,
      b);
  check_values<T, T>(
      "min (edge values)", [](auto x, auto y) { return fusex::min(x, y); },
      [&](double x, double y) { return std::isnan(x) || std::isnan(y) ? nan : (y < x ? y : x); }, a, b);
  check_values<T, T>(
      "max (edge values)", [](auto x, auto y) { return fusex::max(x, y); },
      [&](double x, double y) { return std::isnan(x) || std::isnan(y) ? nan : (y > x ? y : x); }, a, b);
  check_values<T, T>(
      "eq (edge values)", [](auto x, auto y) { return x == y; }, [](double x, double y) { return double(x == y); }, a,
      b);
  check_values<T, T>(
      "ne (edge values)", [](auto x, auto y) { return x != y; }, [](double x, double y) { return double(x != y); }, a,
      b);
  check_values<T, T>(
      "lt (edge values)", [](auto x, auto y) { return x < y; }, [](double x, double y) { return double(x < y); }, a, b);
  check_values<T, T>(
      "le (edge values)", [](auto x, auto y) { return x <= y; }, [](double x, double y) { return double(x <= y); }, a,
      b);
  check_values<T, T>(
      "gt (edge values)", [](auto x, auto y) { return x > y; }, [](double x, double y) { return double(x > y); }, a, b);
  check_values<T, T>(
      "ge (edge values)", [](auto x, auto y) { return x >= y; }, [](double x, double y) { return double(x >= y); }, a,
      b);
  host_vector<T> c3, a3, b3;
  for (auto x : e)
    for (auto y : e)
      for (auto z : e) {
        c3.push_back(x);
        a3.push_back(y);
        b3.push_back(z);
      }
  check_values<T, T, T>(
      "clamp (edge values)", [](auto x, auto lo, auto hi) { return fusex::clamp(x, lo, hi); },
      [&](double x, double lo, double hi) {
        if (std::isnan(x) || std::isnan(lo) || std::isnan(hi)) return nan;
        const double m = x < lo ? lo : x;
        return m > hi ? hi : m;
      },
      c3, a3, b3);
  check_values<T, T, T>(
      "where (edge values)", [](auto c, auto x, auto y) { return fusex::where(c, x, y); },
      [](double c, double x, double y) { return std::isnan(c) || c != 0 ? x : y; }, c3, a3, b3);
}

// Integer edge values on the device, in T's defined wrap-around semantics (docs/ops.md
// "Arithmetic" and "Bitwise"; ops.hpp add/sub/mul/neg/abs compute in the unsigned type of the same
// width, div/mod/shift_left/shift_right), against references written bit by bit in 64-bit unsigned
// arithmetic (wrap_bits) and compared exactly: every pair of edge values (minimum, maximum, -1, 0, 1,
// ...), then full-range random operands.
//   + - * ~ and unary -: the low bits of the exact result (INT_MIN * -1, MAX + 1, -INT_MIN wrap);
//   abs(MIN) is MIN; x / 0 and x % 0 are 0; MIN / -1 is MIN and MIN % -1 is 0; otherwise / truncates
//   toward zero and % has the dividend's sign; a << n and a >> n with n outside [0, bits) give 0
//   (>> of a negative a: -1); >> is arithmetic (the floor of a / 2^n); cast<int32> keeps the low 32
//   bits.
template <class T>
void integer_edge_cases() {
  constexpr int bits = static_cast<int>(8 * sizeof(T));
  const auto e = integer_edges<T>();
  const auto ab = pairs_then_random<T>(e, e, 2053, 91u);
  const auto& a = ab.first;
  const auto& b = ab.second;
  check_exact<T, T>(
      "add (edge values, full range)", [](auto x, auto y) { return x + y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) + bits_of(y)); }, a, b);
  check_exact<T, T>(
      "sub (edge values, full range)", [](auto x, auto y) { return x - y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) - bits_of(y)); }, a, b);
  check_exact<T, T>(
      "mul (edge values, full range)", [](auto x, auto y) { return x * y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) * bits_of(y)); }, a, b);
  check_exact<T, T>(
      "div (edge values, full range)", [](auto x, auto y) { return x / y; },
      [](long long x, long long y) -> long long {
        if (y == 0) return 0;
        if (y == -1) return wrap_bits<T>(0 - bits_of(x));
        return x / y;
      },
      a, b);
  check_exact<T, T>(
      "mod (edge values, full range)", [](auto x, auto y) { return x % y; },
      [](long long x, long long y) -> long long { return y == 0 || y == -1 ? 0 : x % y; }, a, b);
  check_exact<T, T>(
      "bitwise_and (edge values, full range)", [](auto x, auto y) { return x & y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) & bits_of(y)); }, a, b);
  check_exact<T, T>(
      "bitwise_or (edge values, full range)", [](auto x, auto y) { return x | y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) | bits_of(y)); }, a, b);
  check_exact<T, T>(
      "bitwise_xor (edge values, full range)", [](auto x, auto y) { return x ^ y; },
      [](long long x, long long y) { return wrap_bits<T>(bits_of(x) ^ bits_of(y)); }, a, b);
  check_exact<T, T>(
      "min (edge values, full range)", [](auto x, auto y) { return fusex::min(x, y); },
      [](long long x, long long y) { return y < x ? y : x; }, a, b);
  check_exact<T, T>(
      "max (edge values, full range)", [](auto x, auto y) { return fusex::max(x, y); },
      [](long long x, long long y) { return y > x ? y : x; }, a, b);
  check_exact<T, T>(
      "eq (edge values, full range)", [](auto x, auto y) { return x == y; },
      [](long long x, long long y) -> long long { return x == y; }, a, b);
  check_exact<T, T>(
      "lt (edge values, full range)", [](auto x, auto y) { return x < y; },
      [](long long x, long long y) -> long long { return x < y; }, a, b);
  check_exact<T, T>(
      "ge (edge values, full range)", [](auto x, auto y) { return x >= y; },
      [](long long x, long long y) -> long long { return x >= y; }, a, b);

  // Unary: the edge values, then full-range random ones.
  host_vector<T> u;
  for (long long x : e) u.push_back(static_cast<T>(x));
  const auto ru = full_range_values<T>(2053, 93u);
  u.insert(u.end(), ru.begin(), ru.end());
  check_exact<T>(
      "neg (edge values, full range)", [](auto x) { return -x; },
      [](long long x) { return wrap_bits<T>(0 - bits_of(x)); }, u);
  check_exact<T>(
      "abs (edge values, full range)", [](auto x) { return fusex::abs(x); },
      [](long long x) { return x < 0 ? wrap_bits<T>(0 - bits_of(x)) : x; }, u);
  check_exact<T>(
      "bitwise_not (edge values, full range)", [](auto x) { return ~x; },
      [](long long x) { return wrap_bits<T>(~bits_of(x)); }, u);
  check_exact<T>(
      "cast<int32> (edge values, full range)", [](auto x) { return fusex::cast<std::int32_t>(x); },
      [](long long x) { return wrap_bits<std::int32_t>(bits_of(x)); }, u);

  // Shifts by tensor counts: every edge value by every edge count (negative, 0, bits - 1, bits,
  // beyond, the extremes of T), then full-range values by random counts in [-2, bits + 2].
  const long long lo = static_cast<long long>(std::numeric_limits<T>::min());
  const long long hi = static_cast<long long>(std::numeric_limits<T>::max());
  std::vector<long long> counts;
  for (long long n : {lo, -static_cast<long long>(bits), -1LL, 0LL, 1LL, bits / 2LL, bits - 1LL,
                      static_cast<long long>(bits), bits + 1LL, 2LL * bits, hi}) {
    bool seen = false;
    for (long long o : counts) seen = seen || o == n;
    if (!seen && n >= lo && n <= hi) counts.push_back(n);
  }
  auto sh = pairs_then_random<T>(e, counts, 0, 0u);
  {
    std::mt19937_64 rng(95u);
    std::uniform_int_distribution<long long> cnt(std::is_signed_v<T> ? -2 : 0, bits + 2);
    const auto rv = full_range_values<T>(2053, 96u);
    for (auto v : rv) {
      sh.first.push_back(v);
      sh.second.push_back(static_cast<T>(cnt(rng)));
    }
  }
  check_exact<T, T>(
      "shift_left by tensor counts (edge values, full range)", [](auto x, auto n) { return x << n; },
      [](long long x, long long n) { return n < 0 || n >= bits ? 0 : wrap_bits<T>(bits_of(x) << n); }, sh.first,
      sh.second);
  check_exact<T, T>(
      "shift_right by tensor counts (edge values, full range)", [](auto x, auto n) { return x >> n; },
      [](long long x, long long n) -> long long {
        if (n < 0 || n >= bits) return x < 0 ? -1 : 0;
        return x >= 0 ? x >> n : ~((~x) >> n);  // the floor of x / 2^n
      },
      sh.first, sh.second);
}

// Every floating math op on T against a double reference.
template <class T>
void floating_math_ops() {
  check_unary<T>(
      "exp", [](auto x) { return fusex::exp(x); }, [](double v) { return std::exp(v); }, -4, 4);
  check_unary<T>(
      "exp2", [](auto x) { return fusex::exp2(x); }, [](double v) { return std::exp2(v); }, -4, 4);
  check_unary<T>(
      "expm1", [](auto x) { return fusex::expm1(x); }, [](double v) { return std::expm1(v); }, -2, 2);
  check_unary<T>(
      "log", [](auto x) { return fusex::log(x); }, [](double v) { return std::log(v); }, 0.01, 50);
  check_unary<T>(
      "log2", [](auto x) { return fusex::log2(x); }, [](double v) { return std::log2(v); }, 0.01, 50);
  check_unary<T>(
      "log1p", [](auto x) { return fusex::log1p(x); }, [](double v) { return std::log1p(v); }, -0.5, 5);
  check_unary<T>(
      "sqrt", [](auto x) { return fusex::sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.01, 100);
  check_unary<T>(
      "rsqrt", [](auto x) { return fusex::rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.01, 100);
  check_unary<T>(
      "cbrt", [](auto x) { return fusex::cbrt(x); }, [](double v) { return std::cbrt(v); }, -50, 50);
  check_unary<T>(
      "sin", [](auto x) { return fusex::sin(x); }, [](double v) { return std::sin(v); }, -3, 3);
  check_unary<T>(
      "cos", [](auto x) { return fusex::cos(x); }, [](double v) { return std::cos(v); }, -3, 3);
  check_unary<T>(
      "tan", [](auto x) { return fusex::tan(x); }, [](double v) { return std::tan(v); }, -1.2, 1.2);
  check_unary<T>(
      "tanh", [](auto x) { return fusex::tanh(x); }, [](double v) { return std::tanh(v); }, -4, 4);
  check_unary<T>(
      "erf", [](auto x) { return fusex::erf(x); }, [](double v) { return std::erf(v); }, -3, 3);
  check_unary<T>(
      "sigmoid", [](auto x) { return fusex::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8);
  check_unary<T>(
      "silu", [](auto x) { return fusex::silu(x); }, [](double v) { return v / (1 + std::exp(-v)); }, -8, 8);
  check_unary<T>(
      "gelu", [](auto x) { return fusex::gelu(x); },
      [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -5, 5);
  check_unary<T>(
      "gelu_tanh", [](auto x) { return fusex::gelu_tanh(x); },
      [](double v) { return 0.5 * v * (1 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); }, -5, 5);
  check_unary<T>(
      "softplus", [](auto x) { return fusex::softplus(x); },
      [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); }, -10, 30);
  check_unary<T>(
      "relu", [](auto x) { return fusex::relu(x); }, [](double v) { return v > 0 ? v : 0; }, -5, 5);
  check_unary<T>(
      "leaky_relu", [](auto x) { return fusex::leaky_relu(x, 0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; }, -5,
      5);
  check_unary<T>(
      "abs", [](auto x) { return fusex::abs(x); }, [](double v) { return std::fabs(v); }, -5, 5);
  check_unary<T>(
      "neg", [](auto x) { return -x; }, [](double v) { return -v; }, -5, 5);
  check_unary<T>(
      "floor", [](auto x) { return fusex::floor(x); }, [](double v) { return std::floor(v); }, -50, 50);
  check_unary<T>(
      "ceil", [](auto x) { return fusex::ceil(x); }, [](double v) { return std::ceil(v); }, -50, 50);
  check_unary<T>(
      "round", [](auto x) { return fusex::round(x); }, [](double v) { return std::nearbyint(v); }, -50, 50);
  check_unary<T>(
      "trunc", [](auto x) { return fusex::trunc(x); }, [](double v) { return std::trunc(v); }, -50, 50);
  check_unary<T>(
      "isnan", [](auto x) { return fusex::isnan(fusex::log(x)); }, [](double v) { return std::isnan(std::log(v)); }, -5,
      5);
  check_unary<T>(
      "pow", [](auto x) { return fusex::pow(x, 1.5f); }, [](double v) { return std::pow(v, 1.5); }, 0.1, 10);
  check_unary<T>(
      "clamp", [](auto x) { return fusex::clamp(x, -1.0f, 2.0f); },
      [](double v) { return std::fmin(std::fmax(v, -1), 2); }, -5, 5);
  check_unary<T>(
      "fma", [](auto x) { return fusex::fma(x, x, 1.0f); }, [](double v) { return v * v + 1; }, -5, 5);
  check_unary<T>(
      "where", [](auto x) { return fusex::where(x > 0.5f, x, -x); }, [](double v) { return v > 0.5 ? v : -v; }, -5, 5);
  check_unary<T>(
      "cast<float>", [](auto x) { return fusex::cast<float>(x) * 3; }, [](double v) { return v * 3; }, -5, 5);
  floating_special_values<T>();
}

// Arithmetic, comparison and logic ops on T (integer ops in T's wrap-around semantics).
template <class T>
void arithmetic_logic_ops() {
  constexpr bool integer = fusex::is_integer_v<T>;
  const double lo = std::is_unsigned_v<T> ? 1 : -100, hi = 100;
  if constexpr (integer) {
    check_binary<T>(
        "add", [](auto a, auto b) { return a + b; },
        [](double a, double b) { return wrap<T>((long long)a + (long long)b); }, lo, hi);
    check_binary<T>(
        "sub", [](auto a, auto b) { return a - b; },
        [](double a, double b) { return wrap<T>((long long)a - (long long)b); }, lo, hi);
    check_binary<T>(
        "mul", [](auto a, auto b) { return a * b; },
        [](double a, double b) { return wrap<T>((long long)a * (long long)b); }, lo, hi);
    check_binary<T>(
        "div", [](auto a, auto b) { return a / b; },
        [](double a, double b) { return wrap<T>((long long)a / (long long)b); }, lo, hi);
    check_binary<T>(
        "mod", [](auto a, auto b) { return a % b; },
        [](double a, double b) { return wrap<T>((long long)a % (long long)b); }, lo, hi);
    check_binary<T>(
        "bitwise_and", [](auto a, auto b) { return a & b; },
        [](double a, double b) { return wrap<T>((long long)a & (long long)b); }, lo, hi);
    check_binary<T>(
        "bitwise_or", [](auto a, auto b) { return a | b; },
        [](double a, double b) { return wrap<T>((long long)a | (long long)b); }, lo, hi);
    check_binary<T>(
        "bitwise_xor", [](auto a, auto b) { return a ^ b; },
        [](double a, double b) { return wrap<T>((long long)a ^ (long long)b); }, lo, hi);
    check_unary<T>(
        "bitwise_not", [](auto a) { return ~a; }, [](double a) { return wrap<T>(~(long long)a); }, lo, hi);
    check_unary<T>(
        "shift_left", [](auto a) { return a << 2; },
        [](double a) { return wrap<T>((long long)((unsigned long long)(long long)a << 2)); }, lo, hi);
    check_unary<T>(
        "shift_right", [](auto a) { return a >> 1; }, [](double a) { return wrap<T>((long long)a >> 1); }, lo, hi);
    check_unary<T>(
        "div by zero gives 0", [](auto a) { return a / (a - a); }, [](double) { return 0.0; }, lo, hi);
    integer_edge_cases<T>();
  } else {
    check_binary<T>(
        "add", [](auto a, auto b) { return a + b; }, [](double a, double b) { return a + b; }, lo, hi);
    check_binary<T>(
        "sub", [](auto a, auto b) { return a - b; }, [](double a, double b) { return a - b; }, lo, hi);
    check_binary<T>(
        "mul", [](auto a, auto b) { return a * b; }, [](double a, double b) { return a * b; }, lo, hi);
    check_binary<T>(
        "div", [](auto a, auto b) { return a / b; }, [](double a, double b) { return a / b; }, lo, hi);
    check_binary<T>(
        "mod", [](auto a, auto b) { return a % b; }, [](double a, double b) { return std::fmod(a, b); }, lo, hi);
    check_binary<T>(
        "pow", [](auto a, auto b) { return fusex::pow(fusex::abs(a) * 0.01, b * 0.02); },
        [](double a, double b) { return std::pow(std::fabs(a) * 0.01, b * 0.02); }, lo, hi);
    floating_edge_cases<T>();
  }
  check_binary<T>(
      "min", [](auto a, auto b) { return fusex::min(a, b); }, [](double a, double b) { return std::fmin(a, b); }, lo,
      hi);
  check_binary<T>(
      "max", [](auto a, auto b) { return fusex::max(a, b); }, [](double a, double b) { return std::fmax(a, b); }, lo,
      hi);
  check_binary<T>(
      "eq", [](auto a, auto b) { return a == b; }, [](double a, double b) { return double(a == b); }, -3, 3);
  check_binary<T>(
      "ne", [](auto a, auto b) { return a != b; }, [](double a, double b) { return double(a != b); }, -3, 3);
  check_binary<T>(
      "lt", [](auto a, auto b) { return a < b; }, [](double a, double b) { return double(a < b); }, lo, hi);
  check_binary<T>(
      "le", [](auto a, auto b) { return a <= b; }, [](double a, double b) { return double(a <= b); }, -3, 3);
  check_binary<T>(
      "gt", [](auto a, auto b) { return a > b; }, [](double a, double b) { return double(a > b); }, lo, hi);
  check_binary<T>(
      "ge", [](auto a, auto b) { return a >= b; }, [](double a, double b) { return double(a >= b); }, -3, 3);
  check_binary<T>(
      "logical_and", [](auto a, auto b) { return (a > 0) && (b > 0); },
      [](double a, double b) { return double(a > 0 && b > 0); }, lo, hi);
  check_binary<T>(
      "logical_or", [](auto a, auto b) { return (a > 0) || (b > 0); },
      [](double a, double b) { return double(a > 0 || b > 0); }, lo, hi);
  check_unary<T>(
      "logical_not", [](auto a) { return !(a > 0); }, [](double a) { return double(!(a > 0)); }, lo, hi);
  check_unary<T>(
      "abs", [](auto a) { return fusex::abs(a); }, [](double a) { return wrap<std::int64_t>(0) + std::fabs(a); }, lo,
      hi);
  check_unary<T>(
      "cast<int32>", [](auto a) { return fusex::cast<std::int32_t>(a); }, [](double a) { return std::trunc(a); }, lo,
      hi);
  check_unary<T>(
      "cast<fusex::half>", [](auto a) { return fusex::cast<fusex::half>(a); },
      [](double a) { return round_to<fusex::half>(a); }, lo, hi);
  check_unary<T>(
      "cast<bool>", [](auto a) { return fusex::cast<bool>(a); }, [](double a) { return double(a != 0); }, lo, hi);
}

}  // namespace fusex_test
