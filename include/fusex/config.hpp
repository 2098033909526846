#pragma once
/// \file
/// Compiler portability macros. fusex headers compile with nvcc (device code enabled) and with a
/// plain C++17 compiler (host backend only).

#if defined(__CUDACC__)
#define FUSEX_HD __host__ __device__
#define FUSEX_DEVICE __device__
#define FUSEX_FORCEINLINE __forceinline__
#else
#define FUSEX_HD
#define FUSEX_DEVICE
#define FUSEX_FORCEINLINE inline
#endif

// Loop unrolling hint for device code (plain C++ compilers would warn about an unknown pragma).
#if defined(__CUDA_ARCH__)
#define FUSEX_UNROLL _Pragma("unroll")
#else
#define FUSEX_UNROLL
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
#define FUSEX_DEVICE_PASS 1
#else
#define FUSEX_DEVICE_PASS 0
#endif

namespace fusex {
/// The largest tensor rank fusex handles. Rank is a run-time property (one kernel per expression
/// whatever the ranks of its operands), bounded by this constant.
inline constexpr int max_rank = 8;
}  // namespace fusex
