#pragma once
/// \file
/// The few numeric limits device code needs (infinity, NaN, lowest, max), for host and device.
/// `std::numeric_limits` is not callable from device code without --expt-relaxed-constexpr, and
/// `<cuda/std/limits>` costs nvcc time out of proportion to these four functions.

#include <fusex/config.hpp>

#include <cfloat>
#include <type_traits>

namespace fusex::detail {

template <class T, class = void>
struct limits;

template <>
struct limits<float> {
  FUSEX_HD static constexpr float infinity() noexcept { return __builtin_huge_valf(); }
  FUSEX_HD static constexpr float quiet_NaN() noexcept { return __builtin_nanf(""); }
  FUSEX_HD static constexpr float max() noexcept { return FLT_MAX; }
  FUSEX_HD static constexpr float lowest() noexcept { return -FLT_MAX; }
};
template <>
struct limits<double> {
  FUSEX_HD static constexpr double infinity() noexcept { return __builtin_huge_val(); }
  FUSEX_HD static constexpr double quiet_NaN() noexcept { return __builtin_nan(""); }
  FUSEX_HD static constexpr double max() noexcept { return DBL_MAX; }
  FUSEX_HD static constexpr double lowest() noexcept { return -DBL_MAX; }
};
template <>
struct limits<bool> {
  FUSEX_HD static constexpr bool max() noexcept { return true; }
  FUSEX_HD static constexpr bool lowest() noexcept { return false; }
};
// Integers: two's complement.
template <class T>
struct limits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  FUSEX_HD static constexpr T max() noexcept {
    using U = std::make_unsigned_t<T>;
    return std::is_signed_v<T> ? static_cast<T>(static_cast<U>(~U(0)) >> 1) : static_cast<T>(~U(0));
  }
  FUSEX_HD static constexpr T lowest() noexcept { return std::is_signed_v<T> ? static_cast<T>(-max() - 1) : T(0); }
};

}  // namespace fusex::detail
