#pragma once
/// \file
/// Element types fusex supports, their names, the type each is computed in, conversions between
/// them, and the type-promotion rule.
///
/// Promotion (documented in docs/ops.md): categories rank bool < integer < floating point.
/// - Two types of different categories promote to the one of the higher category
///   (int32 + float16 -> float16, bool + int8 -> int8).
/// - Two floating types: float16 + bfloat16 -> float32, otherwise the wider one.
/// - Two integer types: the wider one; int8 + uint8 -> int32 (fusex has no int16);
///   uint8 + a wider signed type -> that signed type.
/// - A C++ arithmetic scalar is "weak": it takes the tensor operand's type when its category is
///   not higher (x_half * 2.0 stays float16); a floating scalar with an integer or bool tensor
///   gives float32; an integer scalar with a bool tensor gives int64.
/// float16 and bfloat16 values are computed in float32; intermediate results of a fused expression
/// stay in float32 and are rounded only where stored or explicitly cast.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fusex/config.hpp>
#include <fusex/core/dtype_id.hpp>

#include <cstdint>
#include <type_traits>

namespace fusex {

using half = __half;             ///< IEEE float16
using bfloat16 = __nv_bfloat16;  ///< bfloat16

/// True for the element types fusex supports.
template <class T>
inline constexpr bool is_dtype_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16> ||
    std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;

template <class T>
inline constexpr bool is_floating_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool is_integer_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

/// The dtype_id of an element type.
template <class T>
constexpr dtype_id dtype_of() {
  if constexpr (std::is_same_v<T, float>) return dtype_id::float32;
  else if constexpr (std::is_same_v<T, double>) return dtype_id::float64;
  else if constexpr (std::is_same_v<T, half>) return dtype_id::float16;
  else if constexpr (std::is_same_v<T, bfloat16>) return dtype_id::bfloat16;
  else if constexpr (std::is_same_v<T, std::int8_t>) return dtype_id::int8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return dtype_id::uint8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return dtype_id::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return dtype_id::int64;
  else if constexpr (std::is_same_v<T, bool>) return dtype_id::boolean;
  else return dtype_id::user;
}

/// The name of an element type, as the plan printer and error messages show it.
template <class T>
constexpr const char* dtype_name() {
  return dtype_name(dtype_of<T>());
}

namespace detail {
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<half> {
  using type = float;
};
template <>
struct compute_type<bfloat16> {
  using type = float;
};

template <class T>
constexpr int category() {  // 0 bool, 1 integer, 2 floating
  return std::is_same_v<T, bool> ? 0 : (is_floating_v<T> ? 2 : 1);
}

template <class A, class B>
constexpr auto promote_impl() {
  if constexpr (std::is_same_v<A, B>) {
    return A{};
  } else if constexpr (category<A>() != category<B>()) {
    if constexpr (category<A>() > category<B>()) return A{};
    else return B{};
  } else if constexpr (is_floating_v<A>) {
    if constexpr ((std::is_same_v<A, half> && std::is_same_v<B, bfloat16>) ||
                  (std::is_same_v<A, bfloat16> && std::is_same_v<B, half>)) {
      return float{};
    } else if constexpr (sizeof(A) >= sizeof(B)) {
      return A{};
    } else {
      return B{};
    }
  } else {  // two distinct integer types
    if constexpr (sizeof(A) == sizeof(B)) {
      return std::int32_t{};  // int8 + uint8 (fusex has no int16)
    } else if constexpr (sizeof(A) > sizeof(B)) {
      return A{};
    } else {
      return B{};
    }
  }
}

// Floating result for math functions: integers and bool compute in float32.
template <class T>
struct float_of {
  using type = std::conditional_t<is_floating_v<T>, T, float>;
};
}  // namespace detail

/// The type a value of T is computed in (float for float16/bfloat16, T otherwise).
template <class T>
using compute_t = typename detail::compute_type<T>::type;

/// The promoted type of two element types (see the file comment for the rule).
template <class A, class B>
using promote_t = decltype(detail::promote_impl<A, B>());

/// The promoted type of one or more element types.
template <class T, class... Ts>
struct promote_all {
  using type = T;
};
template <class A, class B, class... Ts>
struct promote_all<A, B, Ts...> {
  using type = typename promote_all<promote_t<A, B>, Ts...>::type;
};
template <class... Ts>
using promote_all_t = typename promote_all<Ts...>::type;

/// The floating type an integer or bool computes math functions in (float32), or T itself.
template <class T>
using float_of_t = typename detail::float_of<T>::type;

/// Converts between any two supported element types (and their compute types), rounding to
/// nearest even for float16 and bfloat16; a non-zero value converts to true.
template <class To, class From>
FUSEX_HD FUSEX_FORCEINLINE To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<From, half>) {
    return convert<To>(__half2float(x));
  } else if constexpr (std::is_same_v<From, bfloat16>) {
    return convert<To>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<To, half>) {
    if constexpr (std::is_same_v<From, double>) return __double2half(x);
    else return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    if constexpr (std::is_same_v<From, double>) return __double2bfloat16(x);
    else return __float2bfloat16_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace fusex
