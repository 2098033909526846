#pragma once
// Bodies of the per-dtype elementwise GPU test cases ("gpu: floating math ops match a double
// reference", "gpu: arithmetic, comparison and logic ops on every dtype"): each TEMPLATE_TEST_CASE
// is instantiated for a subset of its dtypes in several translation units
// (test_elementwise_ops_*gpu.cu), which compile in parallel; every (op, dtype) pair is a kernel.
#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace fusex_test {

// Every floating math op on T against a double reference.
template <class T>
void floating_math_ops() {
  check_unary<T>("exp", [](auto x) { return fusex::exp(x); }, [](double v) { return std::exp(v); }, -4, 4);
  check_unary<T>("exp2", [](auto x) { return fusex::exp2(x); }, [](double v) { return std::exp2(v); }, -4, 4);
  check_unary<T>("expm1", [](auto x) { return fusex::expm1(x); }, [](double v) { return std::expm1(v); }, -2, 2);
  check_unary<T>("log", [](auto x) { return fusex::log(x); }, [](double v) { return std::log(v); }, 0.01, 50);
  check_unary<T>("log2", [](auto x) { return fusex::log2(x); }, [](double v) { return std::log2(v); }, 0.01, 50);
  check_unary<T>("log1p", [](auto x) { return fusex::log1p(x); }, [](double v) { return std::log1p(v); }, -0.5, 5);
  check_unary<T>("sqrt", [](auto x) { return fusex::sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.01, 100);
  check_unary<T>("rsqrt", [](auto x) { return fusex::rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.01, 100);
  check_unary<T>("cbrt", [](auto x) { return fusex::cbrt(x); }, [](double v) { return std::cbrt(v); }, -50, 50);
  check_unary<T>("sin", [](auto x) { return fusex::sin(x); }, [](double v) { return std::sin(v); }, -3, 3);
  check_unary<T>("cos", [](auto x) { return fusex::cos(x); }, [](double v) { return std::cos(v); }, -3, 3);
  check_unary<T>("tan", [](auto x) { return fusex::tan(x); }, [](double v) { return std::tan(v); }, -1.2, 1.2);
  check_unary<T>("tanh", [](auto x) { return fusex::tanh(x); }, [](double v) { return std::tanh(v); }, -4, 4);
  check_unary<T>("erf", [](auto x) { return fusex::erf(x); }, [](double v) { return std::erf(v); }, -3, 3);
  check_unary<T>("sigmoid", [](auto x) { return fusex::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8);
  check_unary<T>("silu", [](auto x) { return fusex::silu(x); }, [](double v) { return v / (1 + std::exp(-v)); }, -8, 8);
  check_unary<T>("gelu", [](auto x) { return fusex::gelu(x); },
                 [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -5, 5);
  check_unary<T>(
      "gelu_tanh", [](auto x) { return fusex::gelu_tanh(x); },
      [](double v) { return 0.5 * v * (1 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))); }, -5, 5);
  check_unary<T>("softplus", [](auto x) { return fusex::softplus(x); },
                 [](double v) { return v > 20 ? v : std::log1p(std::exp(v)); }, -10, 30);
  check_unary<T>("relu", [](auto x) { return fusex::relu(x); }, [](double v) { return v > 0 ? v : 0; }, -5, 5);
  check_unary<T>("leaky_relu", [](auto x) { return fusex::leaky_relu(x, 0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; }, -5, 5);
  check_unary<T>("abs", [](auto x) { return fusex::abs(x); }, [](double v) { return std::fabs(v); }, -5, 5);
  check_unary<T>("neg", [](auto x) { return -x; }, [](double v) { return -v; }, -5, 5);
  check_unary<T>("floor", [](auto x) { return fusex::floor(x); }, [](double v) { return std::floor(v); }, -50, 50);
  check_unary<T>("ceil", [](auto x) { return fusex::ceil(x); }, [](double v) { return std::ceil(v); }, -50, 50);
  check_unary<T>("round", [](auto x) { return fusex::round(x); }, [](double v) { return std::nearbyint(v); }, -50, 50);
  check_unary<T>("trunc", [](auto x) { return fusex::trunc(x); }, [](double v) { return std::trunc(v); }, -50, 50);
  check_unary<T>("isnan", [](auto x) { return fusex::isnan(fusex::log(x)); }, [](double v) { return std::isnan(std::log(v)); }, -5, 5);
  check_unary<T>("isinf", [](auto x) { return fusex::isinf(x / 0.0f); }, [](double) { return 1.0; }, -5, 5);
  check_unary<T>("isfinite", [](auto x) { return fusex::isfinite(x); }, [](double) { return 1.0; }, -5, 5);
  check_unary<T>("pow", [](auto x) { return fusex::pow(x, 1.5f); }, [](double v) { return std::pow(v, 1.5); }, 0.1, 10);
  check_unary<T>("clamp", [](auto x) { return fusex::clamp(x, -1.0f, 2.0f); }, [](double v) { return std::fmin(std::fmax(v, -1), 2); }, -5, 5);
  check_unary<T>("fma", [](auto x) { return fusex::fma(x, x, 1.0f); }, [](double v) { return v * v + 1; }, -5, 5);
  check_unary<T>("where", [](auto x) { return fusex::where(x > 0.5f, x, -x); }, [](double v) { return v > 0.5 ? v : -v; }, -5, 5);
  check_unary<T>("cast<float>", [](auto x) { return fusex::cast<float>(x) * 3; }, [](double v) { return v * 3; }, -5, 5);
}

// Arithmetic, comparison and logic ops on T (integer ops in T's wrap-around semantics).
template <class T>
void arithmetic_logic_ops() {
  constexpr bool integer = fusex::is_integer_v<T>;
  const double lo = std::is_unsigned_v<T> ? 1 : -100, hi = 100;
  if constexpr (integer) {
    check_binary<T>("add", [](auto a, auto b) { return a + b; }, [](double a, double b) { return wrap<T>((long long)a + (long long)b); }, lo, hi);
    check_binary<T>("sub", [](auto a, auto b) { return a - b; }, [](double a, double b) { return wrap<T>((long long)a - (long long)b); }, lo, hi);
    check_binary<T>("mul", [](auto a, auto b) { return a * b; }, [](double a, double b) { return wrap<T>((long long)a * (long long)b); }, lo, hi);
    check_binary<T>("div", [](auto a, auto b) { return a / b; }, [](double a, double b) { return wrap<T>((long long)a / (long long)b); }, lo, hi);
    check_binary<T>("mod", [](auto a, auto b) { return a % b; }, [](double a, double b) { return wrap<T>((long long)a % (long long)b); }, lo, hi);
    check_binary<T>("bitwise_and", [](auto a, auto b) { return a & b; }, [](double a, double b) { return wrap<T>((long long)a & (long long)b); }, lo, hi);
    check_binary<T>("bitwise_or", [](auto a, auto b) { return a | b; }, [](double a, double b) { return wrap<T>((long long)a | (long long)b); }, lo, hi);
    check_binary<T>("bitwise_xor", [](auto a, auto b) { return a ^ b; }, [](double a, double b) { return wrap<T>((long long)a ^ (long long)b); }, lo, hi);
    check_unary<T>("bitwise_not", [](auto a) { return ~a; }, [](double a) { return wrap<T>(~(long long)a); }, lo, hi);
    check_unary<T>("shift_left", [](auto a) { return a << 2; }, [](double a) { return wrap<T>((long long)((unsigned long long)(long long)a << 2)); }, lo, hi);
    check_unary<T>("shift_right", [](auto a) { return a >> 1; }, [](double a) { return wrap<T>((long long)a >> 1); }, lo, hi);
    check_unary<T>("div by zero gives 0", [](auto a) { return a / (a - a); }, [](double) { return 0.0; }, lo, hi);
  } else {
    check_binary<T>("add", [](auto a, auto b) { return a + b; }, [](double a, double b) { return a + b; }, lo, hi);
    check_binary<T>("sub", [](auto a, auto b) { return a - b; }, [](double a, double b) { return a - b; }, lo, hi);
    check_binary<T>("mul", [](auto a, auto b) { return a * b; }, [](double a, double b) { return a * b; }, lo, hi);
    check_binary<T>("div", [](auto a, auto b) { return a / b; }, [](double a, double b) { return a / b; }, lo, hi);
    check_binary<T>("mod", [](auto a, auto b) { return a % b; }, [](double a, double b) { return std::fmod(a, b); }, lo, hi);
    check_binary<T>("pow", [](auto a, auto b) { return fusex::pow(fusex::abs(a) * 0.01, b * 0.02); },
                    [](double a, double b) { return std::pow(std::fabs(a) * 0.01, b * 0.02); }, lo, hi);
  }
  check_binary<T>("min", [](auto a, auto b) { return fusex::min(a, b); }, [](double a, double b) { return std::fmin(a, b); }, lo, hi);
  check_binary<T>("max", [](auto a, auto b) { return fusex::max(a, b); }, [](double a, double b) { return std::fmax(a, b); }, lo, hi);
  check_binary<T>("eq", [](auto a, auto b) { return a == b; }, [](double a, double b) { return double(a == b); }, -3, 3);
  check_binary<T>("ne", [](auto a, auto b) { return a != b; }, [](double a, double b) { return double(a != b); }, -3, 3);
  check_binary<T>("lt", [](auto a, auto b) { return a < b; }, [](double a, double b) { return double(a < b); }, lo, hi);
  check_binary<T>("le", [](auto a, auto b) { return a <= b; }, [](double a, double b) { return double(a <= b); }, -3, 3);
  check_binary<T>("gt", [](auto a, auto b) { return a > b; }, [](double a, double b) { return double(a > b); }, lo, hi);
  check_binary<T>("ge", [](auto a, auto b) { return a >= b; }, [](double a, double b) { return double(a >= b); }, -3, 3);
  check_binary<T>("logical_and", [](auto a, auto b) { return (a > 0) && (b > 0); }, [](double a, double b) { return double(a > 0 && b > 0); }, lo, hi);
  check_binary<T>("logical_or", [](auto a, auto b) { return (a > 0) || (b > 0); }, [](double a, double b) { return double(a > 0 || b > 0); }, lo, hi);
  check_unary<T>("logical_not", [](auto a) { return !(a > 0); }, [](double a) { return double(!(a > 0)); }, lo, hi);
  check_unary<T>("abs", [](auto a) { return fusex::abs(a); }, [](double a) { return wrap<std::int64_t>(0) + std::fabs(a); }, lo, hi);
  check_unary<T>("cast<int32>", [](auto a) { return fusex::cast<std::int32_t>(a); }, [](double a) { return std::trunc(a); }, lo, hi);
  check_unary<T>("cast<fusex::half>", [](auto a) { return fusex::cast<fusex::half>(a); }, [](double a) { return round_to<fusex::half>(a); }, lo, hi);
  check_unary<T>("cast<bool>", [](auto a) { return fusex::cast<bool>(a); }, [](double a) { return double(a != 0); }, lo, hi);
}

}  // namespace fusex_test
