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

// Separate compilation (opt-in, docs/design.md "Compile time"): with FUSEX_SEPARATE_COMPILATION
// defined (the CMake target fusex::compiled defines it for its users), the bodies of fusex's
// non-template host code -- the arena, the device and pinned resources -- are compiled once, in
// the fusex_compiled library, instead of in every translation unit that includes fusex. Without
// it fusex is header-only. FUSEX_BUILDING_LIBRARY is defined by that library's one source file.
// FUSEX_DETAIL_HOST_BODIES: whether this pass compiles those bodies (never nvcc's device pass,
// which analyses host code without generating it). FUSEX_DECL: how such a non-template function is
// declared and defined: inline in a header-only build, once in the library otherwise, and not
// inline in the device pass (which sees the declaration only: an inline one would draw cicc's
// "referenced but not defined" warning).
#if !defined(__CUDA_ARCH__) && (!defined(FUSEX_SEPARATE_COMPILATION) || defined(FUSEX_BUILDING_LIBRARY))
#define FUSEX_DETAIL_HOST_BODIES 1
#else
#define FUSEX_DETAIL_HOST_BODIES 0
#endif
#if defined(FUSEX_SEPARATE_COMPILATION) || defined(__CUDA_ARCH__)
#define FUSEX_DECL
#else
#define FUSEX_DECL inline
#endif

namespace fusex {
/// The largest tensor rank fusex handles. Rank is a run-time property (one kernel per expression
/// whatever the ranks of its operands), bounded by this constant.
inline constexpr int max_rank = 8;
}  // namespace fusex
