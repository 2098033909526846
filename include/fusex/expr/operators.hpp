#pragma once
/// \file
/// The front end: C++ operators and named functions that build expression nodes from views,
/// tensors, expressions and scalars. Nothing here computes; see fusex::eval.

#include <fusex/core/dtype.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/ops.hpp>

#include <type_traits>

namespace fusex {

namespace detail {
template <class... X>
inline constexpr bool valid_operands_v = (is_operand_v<X> || ...) && ((is_operand_v<X> || is_scalar_v<X>)&&...);

template <class X>
using operand_dtype_t =
    std::conditional_t<is_operand_v<X>, typename value_type_of<X>::type, scalar_dtype_t<std::decay_t<X>>>;

template <class... X>
inline constexpr bool integral_operands_v = (std::is_integral_v<operand_dtype_t<X>> && ...);
template <class... X>
inline constexpr bool integer_operands_v = ((std::is_integral_v<operand_dtype_t<X>> &&
                                             !std::is_same_v<operand_dtype_t<X>, bool>)&&...);
}  // namespace detail

#define FUSEX_BINARY_OPERATOR(sym, op_type)                                              \
  template <class A, class B, std::enable_if_t<detail::valid_operands_v<A, B>, int> = 0> \
  auto operator sym(const A& a, const B& b) {                                            \
    return detail::make_map(ops::op_type{}, a, b);                                       \
  }
FUSEX_BINARY_OPERATOR(+, add)
FUSEX_BINARY_OPERATOR(-, sub)
FUSEX_BINARY_OPERATOR(*, mul)
FUSEX_BINARY_OPERATOR(/, div)
FUSEX_BINARY_OPERATOR(%, mod)
FUSEX_BINARY_OPERATOR(==, equal)
FUSEX_BINARY_OPERATOR(!=, not_equal)
FUSEX_BINARY_OPERATOR(<, less)
FUSEX_BINARY_OPERATOR(<=, less_equal)
FUSEX_BINARY_OPERATOR(>, greater)
FUSEX_BINARY_OPERATOR(>=, greater_equal)
FUSEX_BINARY_OPERATOR(&&, logical_and)
FUSEX_BINARY_OPERATOR(||, logical_or)
#undef FUSEX_BINARY_OPERATOR

#define FUSEX_BITWISE_OPERATOR(sym, op_type, requirement, message)                       \
  template <class A, class B, std::enable_if_t<detail::valid_operands_v<A, B>, int> = 0> \
  auto operator sym(const A& a, const B& b) {                                            \
    static_assert(detail::requirement<A, B>, message);                                   \
    return detail::make_map(ops::op_type{}, a, b);                                       \
  }
FUSEX_BITWISE_OPERATOR(&, bit_and, integral_operands_v, "fusex: operator& needs integer or bool operands")
FUSEX_BITWISE_OPERATOR(|, bit_or, integral_operands_v, "fusex: operator| needs integer or bool operands")
FUSEX_BITWISE_OPERATOR(^, bit_xor, integral_operands_v, "fusex: operator^ needs integer or bool operands")
FUSEX_BITWISE_OPERATOR(<<, shift_left, integer_operands_v, "fusex: operator<< needs integer operands")
FUSEX_BITWISE_OPERATOR(>>, shift_right, integer_operands_v, "fusex: operator>> needs integer operands")
#undef FUSEX_BITWISE_OPERATOR

template <class A, std::enable_if_t<is_operand_v<A>, int> = 0>
auto operator-(const A& a) {
  return detail::make_map(ops::neg{}, a);
}
template <class A, std::enable_if_t<is_operand_v<A>, int> = 0>
auto operator!(const A& a) {
  return detail::make_map(ops::logical_not{}, a);
}
template <class A, std::enable_if_t<is_operand_v<A>, int> = 0>
auto operator~(const A& a) {
  static_assert(detail::integral_operands_v<A>, "fusex: operator~ needs an integer or bool operand");
  return detail::make_map(ops::bit_not{}, a);
}

#define FUSEX_UNARY_FUNCTION(fn, op_type)                        \
  template <class A, std::enable_if_t<is_operand_v<A>, int> = 0> \
  auto fn(const A& a) {                                          \
    return detail::make_map(ops::op_type{}, a);                  \
  }
/// \name Elementwise functions of one operand
/// Each returns an expression; nothing is computed until the expression is evaluated.
///@{
FUSEX_UNARY_FUNCTION(abs, abs)
FUSEX_UNARY_FUNCTION(exp, exp)
FUSEX_UNARY_FUNCTION(exp2, exp2)
FUSEX_UNARY_FUNCTION(expm1, expm1)
FUSEX_UNARY_FUNCTION(log, log)
FUSEX_UNARY_FUNCTION(log2, log2)
FUSEX_UNARY_FUNCTION(log1p, log1p)
FUSEX_UNARY_FUNCTION(sqrt, sqrt)
FUSEX_UNARY_FUNCTION(rsqrt, rsqrt)
FUSEX_UNARY_FUNCTION(cbrt, cbrt)
FUSEX_UNARY_FUNCTION(sin, sin)
FUSEX_UNARY_FUNCTION(cos, cos)
FUSEX_UNARY_FUNCTION(tan, tan)
FUSEX_UNARY_FUNCTION(tanh, tanh)
FUSEX_UNARY_FUNCTION(erf, erf)
FUSEX_UNARY_FUNCTION(sigmoid, sigmoid)
FUSEX_UNARY_FUNCTION(relu, relu)
FUSEX_UNARY_FUNCTION(silu, silu)
FUSEX_UNARY_FUNCTION(gelu, gelu)
FUSEX_UNARY_FUNCTION(gelu_tanh, gelu_tanh)
FUSEX_UNARY_FUNCTION(softplus, softplus)
FUSEX_UNARY_FUNCTION(floor, floor)
FUSEX_UNARY_FUNCTION(ceil, ceil)
FUSEX_UNARY_FUNCTION(round, round)
FUSEX_UNARY_FUNCTION(trunc, trunc)
FUSEX_UNARY_FUNCTION(isnan, isnan)
FUSEX_UNARY_FUNCTION(isinf, isinf)
FUSEX_UNARY_FUNCTION(isfinite, isfinite)
FUSEX_UNARY_FUNCTION(logical_not, logical_not)
///@}
#undef FUSEX_UNARY_FUNCTION

#define FUSEX_BINARY_FUNCTION(fn, op_type)                                               \
  template <class A, class B, std::enable_if_t<detail::valid_operands_v<A, B>, int> = 0> \
  auto fn(const A& a, const B& b) {                                                      \
    return detail::make_map(ops::op_type{}, a, b);                                       \
  }
/// \name Elementwise functions of two operands
///@{
FUSEX_BINARY_FUNCTION(minimum, minimum)
FUSEX_BINARY_FUNCTION(maximum, maximum)
FUSEX_BINARY_FUNCTION(pow, pow)
FUSEX_BINARY_FUNCTION(fmod, mod)
FUSEX_BINARY_FUNCTION(logical_and, logical_and)
FUSEX_BINARY_FUNCTION(logical_or, logical_or)
///@}
#undef FUSEX_BINARY_FUNCTION

// max(x, -1) reads as "max over the last axis" to a PyTorch user but would be the elementwise
// maximum with -1: with a C++ number as an operand, max and min refuse to compile and name the two
// spellings that cannot be confused. Two tensor operands stay elementwise (as torch.max(a, b)).
#define FUSEX_MINMAX_FUNCTION(fn, op_type, message)                                      \
  template <class A, class B, std::enable_if_t<detail::valid_operands_v<A, B>, int> = 0> \
  auto fn(const A& a, const B& b) {                                                      \
    static_assert(is_operand_v<A> && is_operand_v<B>, message);                          \
    return detail::make_map(ops::op_type{}, a, b);                                       \
  }
/// max(a, b) of two tensor operands: their elementwise maximum (fusex::maximum). With a C++
/// number it does not compile: use maximum(x, s) for the elementwise maximum or amax(x, axis) to
/// reduce over an axis.
FUSEX_MINMAX_FUNCTION(max, maximum,
                      "fusex::max(x, s) with a C++ number s is ambiguous: write fusex::maximum(x, s) "
                      "for the elementwise maximum, or fusex::amax(x, axis) to reduce over an axis")
/// min(a, b) of two tensor operands: their elementwise minimum (see max).
FUSEX_MINMAX_FUNCTION(min, minimum,
                      "fusex::min(x, s) with a C++ number s is ambiguous: write fusex::minimum(x, s) "
                      "for the elementwise minimum, or fusex::amin(x, axis) to reduce over an axis")
#undef FUSEX_MINMAX_FUNCTION

/// leaky_relu(x, slope) = x > 0 ? x : slope * x.
template <class A, std::enable_if_t<is_operand_v<A>, int> = 0>
auto leaky_relu(const A& a, double negative_slope = 0.01) {
  ops::leaky_relu op;
  op.slope = negative_slope;
  return detail::make_map(op, a);
}

/// where(c, a, b): a where c is true, else b (c converts to bool; a and b promote).
template <class C, class A, class B, std::enable_if_t<detail::valid_operands_v<C, A, B>, int> = 0>
auto where(const C& c, const A& a, const B& b) {
  using ref = typename detail::ref_type<A, B>::type;
  auto ce = as_expr<bool>(c);
  auto ae = as_expr<ref>(a);
  auto be = as_expr<ref>(b);
  return map_node<ops::where, decltype(ce), decltype(ae), decltype(be)>(ops::where{}, ce, ae, be);
}

/// clamp(x, lo, hi) = min(max(x, lo), hi).
template <class X, class L, class H, std::enable_if_t<detail::valid_operands_v<X, L, H>, int> = 0>
auto clamp(const X& x, const L& lo, const H& hi) {
  return detail::make_map(ops::clamp{}, x, lo, hi);
}

/// fma(a, b, c) = a * b + c, rounded once for floating types.
template <class A, class B, class C, std::enable_if_t<detail::valid_operands_v<A, B, C>, int> = 0>
auto fma(const A& a, const B& b, const C& c) {
  return detail::make_map(ops::fma{}, a, b, c);
}

/// Converts an operand to element type T (rounding as a store to T would).
template <class T, class A, std::enable_if_t<is_operand_v<A>, int> = 0>
auto cast(const A& a) {
  return detail::make_map(ops::cast<T>{}, a);
}

/// Applies a user functor elementwise to the operands, fused like a built-in op. Operands are
/// passed in their compute types (float for half and bfloat16); the result type is what the
/// functor returns. The functor must be callable on the device (a `__host__ __device__` functor
/// or lambda; also on the host for fusex::host::eval). For an extended `__device__` lambda, whose
/// return type host code cannot see, name the result type: `fusex::map<float>(f, x)`.
template <class R = void, class F, class... X, std::enable_if_t<detail::valid_operands_v<X...>, int> = 0>
auto map(F f, const X&... x) {
#if defined(__CUDACC__) && defined(__CUDACC_EXTENDED_LAMBDA__)
  static_assert(!std::is_void_v<R> || !__nv_is_extended_device_lambda_closure_type(F),
                "fusex::map: the result type of an extended __device__ lambda cannot be deduced in host "
                "code; write fusex::map<ResultType>(lambda, ...) or use a __host__ __device__ lambda");
#endif
  return detail::make_map(detail::user_op<F, R>{f}, x...);
}

}  // namespace fusex
