#pragma once
/// \file
/// Compiler portability macros. fusex headers compile with nvcc (device code enabled) and with a
/// plain C++17 compiler (host backend only).

#if defined(__CUDACC__)
#define FUSEX_HD __host__ __device__
#define FUSEX_DEVICE __device__
#define FUSEX_FORCEINLINE __forceinline__
#define FUSEX_NOINLINE __noinline__
#else
#define FUSEX_HD
#define FUSEX_DEVICE
#define FUSEX_FORCEINLINE inline
#if defined(_MSC_VER)
#define FUSEX_NOINLINE __declspec(noinline)
#else
#define FUSEX_NOINLINE __attribute__((noinline))
#endif
#endif

// Loop unrolling hints for device code (plain C++ compilers would warn about an unknown pragma):
// unroll, and keep rolled (one copy of the body where the compiler would otherwise unroll).
#if defined(__CUDA_ARCH__)
#define FUSEX_UNROLL _Pragma("unroll")
#define FUSEX_NO_UNROLL _Pragma("unroll 1")
#else
#define FUSEX_UNROLL
#define FUSEX_NO_UNROLL
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
#define FUSEX_DEVICE_PASS 1
#else
#define FUSEX_DEVICE_PASS 0
#endif

// Separate compilation (opt-in, docs/design.md "Separate compilation"): with FUSEX_SEPARATE_COMPILATION
// defined (the CMake target fusex::compiled defines it for its users), the bodies of fusex's
// non-template host code -- the arena, the device and pinned resources, the planners and
// broadcasting -- are compiled once, in the fusex_compiled library, instead of in every
// translation unit that includes fusex. Without it fusex is header-only. FUSEX_BUILDING_LIBRARY is
// defined by that library's one source file. One program uses one mode: a function that is inline
// in some translation units and the library's in others is an ODR violation (default_pinned_resource
// would have two statics).
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
// The library is compiled by the host compiler without nvcc's --default-stream per-thread: its
// CUDA calls and its test for the per-thread stream (cuda_backend::is_thread_bound) would treat
// stream 0 as the legacy stream while the user's code means each thread's own.
#if defined(FUSEX_SEPARATE_COMPILATION) && !defined(FUSEX_BUILDING_LIBRARY) && \
    defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "fusex: fusex::compiled (FUSEX_SEPARATE_COMPILATION) supports the legacy default stream only; with --default-stream per-thread link fusex::fusex (header-only)"
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
