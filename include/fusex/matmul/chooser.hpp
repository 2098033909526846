#pragma once
/// \file
/// The path chooser: fusex's own GEMM kernel (small M, the launch-bound regime) or cuBLASLt.
/// A threshold table by dtype, set from H200 measurements (bench/matmul's small-M sweep);
/// settable at run time. Pure host code.

#include <fusex/config.hpp>
#include <fusex/matmul/node.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fusex {

/// Thresholds of the path chooser (docs/matmul.md, "Choosing a path"). For each dtype class the
/// fusex kernel is chosen when M <= m_max, M*N <= mn_max and N*K <= nk_max; cuBLASLt otherwise.
///
/// Set from bench_matmul's chooser sweep on the H200 (M 1..64, N = K 256..8192, 20 chained layers
/// replayed from a graph): in float32 the fusex kernel wins exactly where
/// M*N <= 32768 (its blocks own 32 outputs each; beyond that cuBLASLt fills the GPU better); in
/// bfloat16 where M*N <= 16384 and N*K <= 2^24 (cuBLASLt's tensor cores win sooner, and at
/// 8192 x 8192 weights even at M = 1). float16 shares the bfloat16 row (not swept).
struct matmul_chooser_settings {
  std::int64_t fp32_m_max = 64;                      ///< float32: fusex kernel up to this M ...
  std::int64_t fp32_mn_max = 32768;                  ///< ... when M*N is at most this ...
  std::int64_t fp32_nk_max = std::int64_t{1} << 26;  ///< ... and N*K at most this
  std::int64_t half_m_max = 64;                      ///< float16/bfloat16: fusex kernel up to this M ...
  std::int64_t half_mn_max = 16384;                  ///< ... when M*N is at most this ...
  std::int64_t half_nk_max = std::int64_t{1} << 24;  ///< ... and N*K at most this
  /// The largest workspace cuBLASLt may use per call (32 MiB is what cuBLAS itself uses on Hopper).
  std::size_t max_workspace_bytes = std::size_t{32} << 20;
};

namespace detail {
struct chooser_state {
  std::atomic<std::int64_t> v[7];
  chooser_state() { store(matmul_chooser_settings{}); }
  void store(const matmul_chooser_settings& s) {
    v[0] = s.fp32_m_max;
    v[1] = s.fp32_mn_max;
    v[2] = s.fp32_nk_max;
    v[3] = s.half_m_max;
    v[4] = s.half_mn_max;
    v[5] = s.half_nk_max;
    v[6] = static_cast<std::int64_t>(s.max_workspace_bytes);
  }
  matmul_chooser_settings load() const {
    matmul_chooser_settings s;
    s.fp32_m_max = v[0];
    s.fp32_mn_max = v[1];
    s.fp32_nk_max = v[2];
    s.half_m_max = v[3];
    s.half_mn_max = v[4];
    s.half_nk_max = v[5];
    s.max_workspace_bytes = static_cast<std::size_t>(v[6].load());
    return s;
  }
};
inline chooser_state& chooser() {
  static chooser_state s;
  return s;
}
}  // namespace detail

/// The chooser's current thresholds.
inline matmul_chooser_settings matmul_chooser() { return detail::chooser().load(); }
/// Replaces the chooser's thresholds (takes effect for later evaluations; thread-safe, each field
/// atomically).
inline void set_matmul_chooser(const matmul_chooser_settings& s) { detail::chooser().store(s); }

namespace detail {
/// Whether the chooser picks the fusex kernel for a product of these dimensions; `why` gets the
/// rule that decided (static text).
inline bool choose_fusex_kernel(dtype_id dtype, const gemm_dims& g, const matmul_chooser_settings& s,
                                const char*& why) {
  const bool fp32 = dtype == dtype_id::float32;
  const std::int64_t m_max = fp32 ? s.fp32_m_max : s.half_m_max;
  const std::int64_t mn_max = fp32 ? s.fp32_mn_max : s.half_mn_max;
  const std::int64_t nk_max = fp32 ? s.fp32_nk_max : s.half_nk_max;
  if (g.m > m_max) {
    why = "M is above the chooser's m_max for this dtype";
    return false;
  }
  if (g.m * g.n > mn_max) {
    why = "M*N is above the chooser's mn_max for this dtype";
    return false;
  }
  if (g.n * g.k > nk_max) {
    why = "N*K is above the chooser's nk_max for this dtype";
    return false;
  }
  why = "M, M*N and N*K are within the chooser's thresholds for this dtype";
  return true;
}
}  // namespace detail

}  // namespace fusex
