// Host tests: the math functions (exp ... softplus, pow) on every element type, against references
// written here in plain double arithmetic from the mathematical definitions.
#include "host_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

using namespace fxt;

namespace {

const fusex::shape_t S{3, 41};
constexpr std::size_t N = 3 * 41;

const double pi = 3.14159265358979323846;

// Checks f(x) against ref(double) for inputs of type T drawn from [lo, hi] (integers: the whole
// numbers there; bool: both values). The result type is float_of_t<T>: T for floating types,
// float32 for integers and bool.
template <class T, class F, class Ref>
void check_unary(const char* what, double lo, double hi, F f, Ref ref) {
  const auto a = random_array<T>(N, lo, hi, true);
  const auto e = f(a.cview(S));
  STATIC_REQUIRE(std::is_same_v<typename decltype(e)::value_type, fusex::float_of_t<T>>);
  check_expr(what, e, S, [&](std::size_t i) { return ref(static_cast<double>(value_of(a[i]))); });
}

}  // namespace

#define FXT_UNARY(fn, lo, hi, ref_expr) \
  check_unary<T>(                       \
      #fn "(x)", lo, hi, [](const auto& v) { return fusex::fn(v); }, [](double x) { return ref_expr; })

TEMPLATE_TEST_CASE("math functions on every dtype", "[ops][math]", FXT_ALL_DTYPES) {
  using T = TestType;
  FXT_UNARY(exp, -4, 4, std::exp(x));
  FXT_UNARY(exp2, -5, 5, std::exp2(x));
  FXT_UNARY(expm1, -2, 2, std::expm1(x));
  FXT_UNARY(log, 0.01, 50, std::log(x));
  FXT_UNARY(log2, 0.01, 50, std::log2(x));
  FXT_UNARY(log1p, -0.9, 50, std::log1p(x));
  FXT_UNARY(sqrt, 0.01, 100, std::sqrt(x));
  FXT_UNARY(rsqrt, 0.01, 100, 1.0 / std::sqrt(x));
  FXT_UNARY(cbrt, -100, 100, std::cbrt(x));
  FXT_UNARY(sin, -6.5, 6.5, std::sin(x));
  FXT_UNARY(cos, -6.5, 6.5, std::cos(x));
  FXT_UNARY(tan, -1.4, 1.4, std::tan(x));
  FXT_UNARY(tanh, -4, 4, std::tanh(x));
  FXT_UNARY(erf, -3, 3, std::erf(x));
  FXT_UNARY(sigmoid, -12, 12, 1.0 / (1.0 + std::exp(-x)));
  FXT_UNARY(silu, -12, 12, x / (1.0 + std::exp(-x)));
  FXT_UNARY(gelu, -5, 5, 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
  FXT_UNARY(gelu_tanh, -5, 5, 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x))));
  // Documented: log(1 + exp(x)), and x itself above 20 (PyTorch's threshold).
  FXT_UNARY(softplus, -15, 40, x > 20 ? x : std::log1p(std::exp(x)));
}

TEMPLATE_TEST_CASE("pow on every dtype", "[ops][math]", FXT_ALL_DTYPES) {
  using T = TestType;
  const auto a = random_array<T>(N, 0.1, 4, true);
  const auto b = random_array<T>(N, -3, 3, false);
  const auto x = a.cview(S), y = b.cview(S);
  auto A = [&](std::size_t i) { return static_cast<double>(value_of(a[i])); };
  auto B = [&](std::size_t i) { return static_cast<double>(value_of(b[i])); };
  STATIC_REQUIRE(std::is_same_v<typename decltype(fusex::pow(x, y))::value_type, fusex::float_of_t<T>>);
  check_expr("pow(x, y)", fusex::pow(x, y), S, [&](std::size_t i) { return std::pow(A(i), B(i)); });
  check_expr("pow(x, 2)", fusex::pow(x, 2), S, [&](std::size_t i) { return A(i) * A(i); });
  check_expr("pow(x, 0.5)", fusex::pow(x, 0.5), S, [&](std::size_t i) { return std::sqrt(A(i)); });
  check_expr("pow(2, y)", fusex::pow(2, y), S, [&](std::size_t i) { return std::exp2(B(i)); });
}

TEMPLATE_TEST_CASE("math functions at special values", "[ops][math][semantics]", FXT_FLOAT_DTYPES) {
  using T = TestType;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto a = from_list<T>({0.0, -0.0, -1.0, inf, -inf, nan, 30.0, -30.0});
  const auto x = a.view({8});
  auto A = [&](std::size_t i) { return value_of(a[i]); };
  check_expr("log(x)", fusex::log(x), {8}, [&](std::size_t i) { return std::log(A(i)); });
  check_expr("sqrt(x)", fusex::sqrt(x), {8}, [&](std::size_t i) { return std::sqrt(A(i)); });
  check_expr("rsqrt(x)", fusex::rsqrt(x), {8}, [&](std::size_t i) { return 1.0 / std::sqrt(A(i)); });
  check_expr("exp(x)", fusex::exp(x), {8}, [&](std::size_t i) { return std::exp(A(i)); });  // exp(30): inf in float16
  check_expr("tanh(x)", fusex::tanh(x), {8}, [&](std::size_t i) { return std::tanh(A(i)); });
  check_expr("sigmoid(x)", fusex::sigmoid(x), {8}, [&](std::size_t i) { return 1.0 / (1.0 + std::exp(-A(i))); });
  check_expr("relu(x)", fusex::relu(x), {8},
             [&](std::size_t i) { return std::isnan(A(i)) ? A(i) : (A(i) > 0 ? A(i) : 0.0); });
  // softplus is x itself above 20 (as in PyTorch).
  check_expr("softplus(x)", fusex::softplus(x), {8},
             [&](std::size_t i) { return A(i) > 20 ? A(i) : std::log1p(std::exp(A(i))); });
}
