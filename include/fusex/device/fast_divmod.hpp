#pragma once
/// \file
/// Division by a run-time constant divisor with a precomputed multiplier (Granlund-Montgomery),
/// for the index arithmetic of 32-bit kernels; 64-bit indices divide directly.

#include <fusex/config.hpp>

#include <cstdint>

namespace fusex::detail {

template <class Index>
struct fast_divmod;

/// Valid for dividends and divisors below 2^31.
template <>
struct fast_divmod<std::uint32_t> {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 0;
  std::uint32_t shift = 0;

  fast_divmod() = default;
  explicit fast_divmod(std::uint32_t d) : divisor(d) {
    while (shift < 32 && (std::uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<std::uint32_t>(((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - d)) / d + 1);
  }
  FUSEX_HD FUSEX_FORCEINLINE std::uint32_t div(std::uint32_t n) const {
#if FUSEX_DEVICE_PASS
    const std::uint32_t hi = __umulhi(n, multiplier);
#else
    const std::uint32_t hi = static_cast<std::uint32_t>((std::uint64_t{n} * multiplier) >> 32);
#endif
    return (hi + n) >> shift;
  }
  FUSEX_HD FUSEX_FORCEINLINE void divmod(std::uint32_t n, std::uint32_t& q, std::uint32_t& r) const {
    q = div(n);
    r = n - q * divisor;
  }
};

template <>
struct fast_divmod<std::uint64_t> {
  std::uint64_t divisor = 1;

  fast_divmod() = default;
  explicit fast_divmod(std::uint64_t d) : divisor(d) {}
  FUSEX_HD FUSEX_FORCEINLINE std::uint64_t div(std::uint64_t n) const { return n / divisor; }
  FUSEX_HD FUSEX_FORCEINLINE void divmod(std::uint64_t n, std::uint64_t& q, std::uint64_t& r) const {
    q = n / divisor;
    r = n - q * divisor;
  }
};

}  // namespace fusex::detail
