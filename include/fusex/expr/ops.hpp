#pragma once
/// \file
/// The op table: every built-in elementwise operation, defined once as a `__host__ __device__`
/// functor that the device kernels and the host backend both call.
///
/// An op declares its name, its result type given its operands' element types (`result`), and
/// the compute type each operand is converted to before the call (`operand`). Adding an op means
/// adding one functor here and one front-end function in expr/operators.hpp (see docs/design.md).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>

#include <fusex/core/detail/limits.hpp>

#include <cstddef>
#include <cstdint>
#include <math.h>
#include <type_traits>

namespace fusex {
namespace detail {

template <std::size_t I, class T, class... Ts>
struct nth_type {
  using type = typename nth_type<I - 1, Ts...>::type;
};
template <class T, class... Ts>
struct nth_type<0, T, Ts...> {
  using type = T;
};
template <std::size_t I, class... Ts>
using nth_t = typename nth_type<I, Ts...>::type;

// Float/double overloads of the C math functions, usable in host and device code. rsqrt uses the
// device intrinsic where there is one.
namespace math {
#define FUSEX_MATH_UNARY(name, fcall, dcall)                            \
  FUSEX_HD FUSEX_FORCEINLINE float name(float x) { return ::fcall(x); } \
  FUSEX_HD FUSEX_FORCEINLINE double name(double x) { return ::dcall(x); }
FUSEX_MATH_UNARY(exp, expf, exp)
FUSEX_MATH_UNARY(exp2, exp2f, exp2)
FUSEX_MATH_UNARY(expm1, expm1f, expm1)
FUSEX_MATH_UNARY(log, logf, log)
FUSEX_MATH_UNARY(log2, log2f, log2)
FUSEX_MATH_UNARY(log1p, log1pf, log1p)
FUSEX_MATH_UNARY(sqrt, sqrtf, sqrt)
FUSEX_MATH_UNARY(cbrt, cbrtf, cbrt)
FUSEX_MATH_UNARY(sin, sinf, sin)
FUSEX_MATH_UNARY(cos, cosf, cos)
FUSEX_MATH_UNARY(tan, tanf, tan)
FUSEX_MATH_UNARY(tanh, tanhf, tanh)
FUSEX_MATH_UNARY(erf, erff, erf)
FUSEX_MATH_UNARY(floor, floorf, floor)
FUSEX_MATH_UNARY(ceil, ceilf, ceil)
FUSEX_MATH_UNARY(rint, rintf, rint)
FUSEX_MATH_UNARY(trunc, truncf, trunc)
FUSEX_MATH_UNARY(fabs, fabsf, fabs)
#undef FUSEX_MATH_UNARY
FUSEX_HD FUSEX_FORCEINLINE float pow(float a, float b) { return ::powf(a, b); }
FUSEX_HD FUSEX_FORCEINLINE double pow(double a, double b) { return ::pow(a, b); }
FUSEX_HD FUSEX_FORCEINLINE float fmod(float a, float b) { return ::fmodf(a, b); }
FUSEX_HD FUSEX_FORCEINLINE double fmod(double a, double b) { return ::fmod(a, b); }
FUSEX_HD FUSEX_FORCEINLINE float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
FUSEX_HD FUSEX_FORCEINLINE double fma(double a, double b, double c) { return ::fma(a, b, c); }
FUSEX_HD FUSEX_FORCEINLINE float rsqrt(float x) {
#if FUSEX_DEVICE_PASS
  return ::rsqrtf(x);
#else
  return 1.0f / ::sqrtf(x);
#endif
}
FUSEX_HD FUSEX_FORCEINLINE double rsqrt(double x) {
#if FUSEX_DEVICE_PASS
  return ::rsqrt(x);
#else
  return 1.0 / ::sqrt(x);
#endif
}
/// exp(d) for the terms of a sum of exponentials shifted by their maximum (d <= 0; logsumexp and
/// softmax): on the device, float32 as 2^(d log2 e), one multiply and one `ex2.approx.ftz`
/// (MUFU.EX2), against about eight instructions for `expf` (and five for `__expf`, which tests
/// for results below 2^-126). The error, about 2 + 1.2|d| ulp, grows where the term e^d is small,
/// so a sum that includes its maximum term (e^0 = 1) stays within a few ulp; results below 2^-126
/// flush to 0, which such a sum cannot see. Where exp is the result (an expression's `exp`, the
/// epilogue of softmax) the accurate `expf` stays. (The subtraction stays a separate FADD: folded
/// into an FFMA with a precomputed shift * log2(e), a maximum above FLT_MAX / log2(e) overflows to
/// infinity and the row's largest term becomes 0.)
FUSEX_HD FUSEX_FORCEINLINE float exp_shifted(float d) {
#if FUSEX_DEVICE_PASS
  const float t = d * 1.44269504088896341f;  // log2(e)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
#else
  return ::expf(d);
#endif
}
FUSEX_HD FUSEX_FORCEINLINE double exp_shifted(double d) { return ::exp(d); }
template <class T>
FUSEX_HD FUSEX_FORCEINLINE bool negative(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0);
  else return false;
}
template <class T>
FUSEX_HD FUSEX_FORCEINLINE bool isnan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}
/// Maximum and minimum that propagate NaN (as torch.maximum): one instruction for float32 on
/// sm_80 and later (max.NaN, min.NaN), where the portable form takes a compare, a NaN test and a
/// select (a softmax's row maximum is one per element).
template <class T>
FUSEX_HD FUSEX_FORCEINLINE T max_nan(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else
#endif
  {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return a > b ? a : b;
  }
}
template <class T>
FUSEX_HD FUSEX_FORCEINLINE T min_nan(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, float>) {
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else
#endif
  {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return a < b ? a : b;
  }
}
}  // namespace math
// Integer arithmetic wraps (two's complement), as documented in docs/ops.md. Signed overflow is
// undefined behaviour in C++, so int32 and int64 add, sub, mul, neg and abs compute in the unsigned
// type of the same width (narrower types are promoted to int first and cannot overflow).
template <class C, bool = std::is_integral_v<C>&& std::is_signed_v<C> && (sizeof(C) >= sizeof(int))>
struct wrap_type {
  using type = C;
};
template <class C>
struct wrap_type<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <class C>
using wrap_t = typename wrap_type<C>::type;
}  // namespace detail

/// The built-in operations. Users normally reach them through the functions and operators in
/// <fusex/expr/operators.hpp>; the functors are public so they can be reused in fusex::map.
namespace ops {

/// Result: the promoted type of the operands; every operand computed in its compute type.
struct promoting_op {
  template <class... T>
  using result = promote_all_t<T...>;
  template <std::size_t I, class... T>
  using operand = compute_t<promote_all_t<T...>>;
};
/// Result: the floating type of the promoted operands (integers and bool give float32).
struct floating_op {
  template <class... T>
  using result = float_of_t<promote_all_t<T...>>;
  template <std::size_t I, class... T>
  using operand = compute_t<float_of_t<promote_all_t<T...>>>;
};
/// Result: bool; operands compared in their promoted compute type.
struct predicate_op {
  template <class... T>
  using result = bool;
  template <std::size_t I, class... T>
  using operand = compute_t<promote_all_t<T...>>;
};
/// Result: bool; operands converted to bool.
struct logical_op {
  template <class... T>
  using result = bool;
  template <std::size_t I, class... T>
  using operand = bool;
};

// --- arithmetic -------------------------------------------------------------------------------
struct add : promoting_op {
  static constexpr const char* name = "add";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    using W = detail::wrap_t<C>;
    return static_cast<C>(static_cast<W>(a) + static_cast<W>(b));
  }
};
struct sub : promoting_op {
  static constexpr const char* name = "sub";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    using W = detail::wrap_t<C>;
    return static_cast<C>(static_cast<W>(a) - static_cast<W>(b));
  }
};
struct mul : promoting_op {
  static constexpr const char* name = "mul";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    using W = detail::wrap_t<C>;
    return static_cast<C>(static_cast<W>(a) * static_cast<W>(b));
  }
};
/// Division. Integers divide truncating toward zero, as in C++; an integer division by zero gives
/// 0 (on the device and the host alike, never a trap), and the minimum value divided by -1 wraps.
struct div : promoting_op {
  static constexpr const char* name = "div";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return static_cast<C>(C(0) - static_cast<std::make_unsigned_t<C>>(a));
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};
/// Remainder with the sign of the dividend (C++ `%` and fmod); integer x % 0 gives 0.
struct mod : promoting_op {
  static constexpr const char* name = "mod";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
      }
      return static_cast<C>(a % b);
    } else {
      return detail::math::fmod(a, b);
    }
  }
};
struct neg : promoting_op {
  static constexpr const char* name = "neg";
  template <class C>
  FUSEX_HD C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return -a;
    else return static_cast<C>(detail::wrap_t<C>(0) - static_cast<detail::wrap_t<C>>(a));
  }
};
struct abs : promoting_op {
  static constexpr const char* name = "abs";
  template <class C>
  FUSEX_HD C operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return detail::math::fabs(a);
    else if constexpr (std::is_unsigned_v<C>) return a;
    else return a < C(0) ? static_cast<C>(detail::wrap_t<C>(0) - static_cast<detail::wrap_t<C>>(a)) : a;
  }
};
/// Elementwise maximum; NaN propagates (as torch.maximum).
struct maximum : promoting_op {
  static constexpr const char* name = "max";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return detail::math::max_nan(a, b);
  }
};
/// Elementwise minimum; NaN propagates (as torch.minimum).
struct minimum : promoting_op {
  static constexpr const char* name = "min";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return detail::math::min_nan(a, b);
  }
};
/// clamp(x, lo, hi) = min(max(x, lo), hi); NaN in x propagates.
struct clamp : promoting_op {
  static constexpr const char* name = "clamp";
  template <class C>
  FUSEX_HD C operator()(C x, C lo, C hi) const {
    return minimum{}(maximum{}(x, lo), hi);
  }
};
/// fma(a, b, c) = a * b + c, with one rounding for floating types.
struct fma : promoting_op {
  static constexpr const char* name = "fma";
  template <class C>
  FUSEX_HD C operator()(C a, C b, C c) const {
    if constexpr (std::is_floating_point_v<C>) return detail::math::fma(a, b, c);
    else return add{}(mul{}(a, b), c);
  }
};

// --- comparisons and logic --------------------------------------------------------------------
#define FUSEX_PREDICATE(op_name, text, expr)   \
  struct op_name : predicate_op {              \
    static constexpr const char* name = text;  \
    template <class C>                         \
    FUSEX_HD bool operator()(C a, C b) const { \
      return expr;                             \
    }                                          \
  };
FUSEX_PREDICATE(equal, "eq", a == b)
FUSEX_PREDICATE(not_equal, "ne", a != b)
FUSEX_PREDICATE(less, "lt", a < b)
FUSEX_PREDICATE(less_equal, "le", a <= b)
FUSEX_PREDICATE(greater, "gt", a > b)
FUSEX_PREDICATE(greater_equal, "ge", a >= b)
#undef FUSEX_PREDICATE
struct logical_and : logical_op {
  static constexpr const char* name = "logical_and";
  FUSEX_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct logical_or : logical_op {
  static constexpr const char* name = "logical_or";
  FUSEX_HD bool operator()(bool a, bool b) const { return a || b; }
};
struct logical_not : logical_op {
  static constexpr const char* name = "logical_not";
  FUSEX_HD bool operator()(bool a) const { return !a; }
};
struct isnan : predicate_op {
  static constexpr const char* name = "isnan";
  template <class C>
  FUSEX_HD bool operator()(C a) const {
    return detail::math::isnan(a);
  }
};
struct isinf : predicate_op {
  static constexpr const char* name = "isinf";
  template <class C>
  FUSEX_HD bool operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>)
      return a == fusex::detail::limits<C>::infinity() || a == -fusex::detail::limits<C>::infinity();
    else return false;
  }
};
struct isfinite : predicate_op {
  static constexpr const char* name = "isfinite";
  template <class C>
  FUSEX_HD bool operator()(C a) const {
    if constexpr (std::is_floating_point_v<C>) return !isnan{}(a) && !isinf{}(a);
    else return true;
  }
};

// --- bitwise (integers and bool) --------------------------------------------------------------
struct bit_and : promoting_op {
  static constexpr const char* name = "bitwise_and";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return static_cast<C>(a & b);
  }
};
struct bit_or : promoting_op {
  static constexpr const char* name = "bitwise_or";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return static_cast<C>(a | b);
  }
};
struct bit_xor : promoting_op {
  static constexpr const char* name = "bitwise_xor";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return static_cast<C>(a ^ b);
  }
};
struct bit_not : promoting_op {
  static constexpr const char* name = "bitwise_not";
  template <class C>
  FUSEX_HD C operator()(C a) const {
    if constexpr (std::is_same_v<C, bool>) return !a;
    else return static_cast<C>(~a);
  }
};
/// a << b; a shift count outside [0, bits) gives 0.
struct shift_left : promoting_op {
  static constexpr const char* name = "shift_left";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    constexpr int bits = static_cast<int>(sizeof(C) * 8);
    if (detail::math::negative(b) || b >= C(bits)) return C(0);
    return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) << b);
  }
};
/// a >> b (arithmetic for signed types); a count outside [0, bits) gives 0, or -1 for negative a.
struct shift_right : promoting_op {
  static constexpr const char* name = "shift_right";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    constexpr int bits = static_cast<int>(sizeof(C) * 8);
    if (detail::math::negative(b) || b >= C(bits)) return detail::math::negative(a) ? C(-1) : C(0);
    return static_cast<C>(a >> b);
  }
};

// --- math functions (integers compute in float32) -----------------------------------------------
#define FUSEX_FLOAT_UNARY(op_name, text, body) \
  struct op_name : floating_op {               \
    static constexpr const char* name = text;  \
    template <class C>                         \
    FUSEX_HD C operator()(C x) const {         \
      body;                                    \
    }                                          \
  };
FUSEX_FLOAT_UNARY(exp, "exp", return detail::math::exp(x))
FUSEX_FLOAT_UNARY(exp2, "exp2", return detail::math::exp2(x))
FUSEX_FLOAT_UNARY(expm1, "expm1", return detail::math::expm1(x))
FUSEX_FLOAT_UNARY(log, "log", return detail::math::log(x))
FUSEX_FLOAT_UNARY(log2, "log2", return detail::math::log2(x))
FUSEX_FLOAT_UNARY(log1p, "log1p", return detail::math::log1p(x))
FUSEX_FLOAT_UNARY(sqrt, "sqrt", return detail::math::sqrt(x))
FUSEX_FLOAT_UNARY(rsqrt, "rsqrt", return detail::math::rsqrt(x))
FUSEX_FLOAT_UNARY(cbrt, "cbrt", return detail::math::cbrt(x))
FUSEX_FLOAT_UNARY(sin, "sin", return detail::math::sin(x))
FUSEX_FLOAT_UNARY(cos, "cos", return detail::math::cos(x))
FUSEX_FLOAT_UNARY(tan, "tan", return detail::math::tan(x))
FUSEX_FLOAT_UNARY(tanh, "tanh", return detail::math::tanh(x))
FUSEX_FLOAT_UNARY(erf, "erf", return detail::math::erf(x))
FUSEX_FLOAT_UNARY(sigmoid, "sigmoid", return C(1) / (C(1) + detail::math::exp(-x)))
FUSEX_FLOAT_UNARY(silu, "silu", return x / (C(1) + detail::math::exp(-x)))
/// gelu, erf form: x * (1 + erf(x / sqrt 2)) / 2.
FUSEX_FLOAT_UNARY(gelu, "gelu", return C(0.5) * x * (C(1) + detail::math::erf(x * C(0.70710678118654752440))))
/// gelu, tanh approximation: x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2.
FUSEX_FLOAT_UNARY(gelu_tanh, "gelu_tanh",
                  return C(0.5) * x *
                         (C(1) + detail::math::tanh(C(0.79788456080286535588) * (x + C(0.044715) * x * x * x))))
/// softplus(x) = log(1 + exp(x)), linear above 20 as in PyTorch.
FUSEX_FLOAT_UNARY(softplus, "softplus", return x > C(20) ? x : detail::math::log1p(detail::math::exp(x)))
#undef FUSEX_FLOAT_UNARY

/// pow(a, b) in floating point (integers compute in float32).
struct pow : floating_op {
  static constexpr const char* name = "pow";
  template <class C>
  FUSEX_HD C operator()(C a, C b) const {
    return detail::math::pow(a, b);
  }
};

// --- rounding: identity on integers, result type unchanged ----------------------------------------
#define FUSEX_ROUNDING(op_name, text, fn)                                    \
  struct op_name : promoting_op {                                            \
    static constexpr const char* name = text;                                \
    template <class C>                                                       \
    FUSEX_HD C operator()(C x) const {                                       \
      if constexpr (std::is_floating_point_v<C>) return detail::math::fn(x); \
      else return x;                                                         \
    }                                                                        \
  };
FUSEX_ROUNDING(floor, "floor", floor)
FUSEX_ROUNDING(ceil, "ceil", ceil)
/// Rounds half to even (as torch.round and numpy.round).
FUSEX_ROUNDING(round, "round", rint)
FUSEX_ROUNDING(trunc, "trunc", trunc)
#undef FUSEX_ROUNDING

// --- activations --------------------------------------------------------------------------------
struct relu : promoting_op {
  static constexpr const char* name = "relu";
  template <class C>
  FUSEX_HD C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (x != x) return x;  // NaN propagates, as in PyTorch
    }
    return x > C(0) ? x : C(0);
  }
};
/// leaky_relu(x) = x > 0 ? x : slope * x.
struct leaky_relu : promoting_op {
  static constexpr const char* name = "leaky_relu";
  double slope = 0.01;
  template <class C>
  FUSEX_HD C operator()(C x) const {
    return x > C(0) ? x : static_cast<C>(x * static_cast<C>(slope));
  }
};

// --- selection and conversion -------------------------------------------------------------------
/// where(c, a, b): a where c is true, else b. The result promotes a and b; c converts to bool.
struct where {
  static constexpr const char* name = "where";
  template <class Cond, class A, class B>
  using result = promote_t<A, B>;
  template <std::size_t I, class Cond, class A, class B>
  using operand = std::conditional_t<I == 0, bool, compute_t<promote_t<A, B>>>;
  template <class C>
  FUSEX_HD C operator()(bool c, C a, C b) const {
    return c ? a : b;
  }
};

/// Conversion to T, rounding as a store to T would (so cast<half>(x) computes with half's
/// precision even though the value is carried in float32 afterwards).
template <class T>
struct cast {
  static_assert(is_dtype_v<T>, "fusex::cast<T>: T must be a supported element type");
  static constexpr const char* name = "cast";
  template <class A>
  using result = T;
  template <std::size_t I, class A>
  using operand = compute_t<A>;
  template <class C>
  FUSEX_HD compute_t<T> operator()(C x) const {
    return convert<compute_t<T>>(convert<T>(x));
  }
};

}  // namespace ops
}  // namespace fusex
