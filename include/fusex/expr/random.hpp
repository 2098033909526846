#pragma once
/// \file
/// Counter-based random numbers as expressions: Philox4x32-10 (Salmon et al., SC'11; the cipher
/// behind cuRAND's Philox and PyTorch's CUDA generator, with its own counter layout here, so the
/// same seed gives other numbers than theirs) over each element's row-major linear index.
/// A (seed, offset) pair fully determines every value: element i of a shape is word i % 4 of
/// Philox4x32-10 with key (seed's low and high words) and counter (i / 4 low, high, offset low,
/// high), whatever the launch configuration, vector width, 32-bit pieces or backend (host or GPU).
/// Calls with different offsets (one per step, say) draw independent streams.
///
///   fusex::eval(y, fusex::dropout(x, 0.1, seed, step), s);   // one kernel, no mask in memory
///   fusex::eval(noise, fusex::normal(noise.shape(), seed, 0), s);

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/index.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/operators.hpp>
#include <fusex/expr/ops.hpp>

#include <cstdint>
#include <string>

namespace fusex {

namespace detail {

/// Philox4x32-10: the 128-bit block `ctr` enciphered under the 64-bit key `key` (ten rounds).
/// Checked against Random123's known-answer vectors (tests/expr/test_random_host.cpp).
FUSEX_HD FUSEX_FORCEINLINE void philox4x32_10(const std::uint32_t (&ctr)[4], const std::uint32_t (&key)[2],
                                              std::uint32_t (&out)[4]) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;  // multipliers
  constexpr std::uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;  // Weyl key increments
  std::uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  std::uint32_t k0 = key[0], k1 = key[1];
  FUSEX_UNROLL
  for (int r = 0; r < 10; ++r) {
#if defined(__CUDA_ARCH__)
    const std::uint32_t hi0 = __umulhi(m0, c0), hi1 = __umulhi(m1, c2);
#else
    const std::uint32_t hi0 = static_cast<std::uint32_t>((std::uint64_t{m0} * c0) >> 32);
    const std::uint32_t hi1 = static_cast<std::uint32_t>((std::uint64_t{m1} * c2) >> 32);
#endif
    const std::uint32_t lo0 = m0 * c0, lo1 = m1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += w0;
    k1 += w1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/// The four words of block `i / 4` of the stream (seed, offset).
FUSEX_HD FUSEX_FORCEINLINE void philox_block(std::uint64_t seed, std::uint64_t offset, std::int64_t i,
                                             std::uint32_t (&out)[4]) {
  const std::uint64_t q = static_cast<std::uint64_t>(i) >> 2;
  const std::uint32_t ctr[4] = {static_cast<std::uint32_t>(q), static_cast<std::uint32_t>(q >> 32),
                                static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32)};
  const std::uint32_t key[2] = {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  philox4x32_10(ctr, key, out);
}

/// Word i % 4 of block i / 4.
FUSEX_HD FUSEX_FORCEINLINE std::uint32_t philox_word(std::uint64_t seed, std::uint64_t offset, std::int64_t i) {
  std::uint32_t w[4];
  philox_block(seed, offset, i, w);
  const int lane = static_cast<int>(static_cast<std::uint64_t>(i) & 3u);
  return lane == 0 ? w[0] : lane == 1 ? w[1] : lane == 2 ? w[2] : w[3];
}

}  // namespace detail

namespace ops {

/// What the random ops share: a result of type R from the int64 linear index, and the stream.
/// `Derived` gives `from_block(w, k)`: element k (0..3) of a block from its four words.
template <class R, class Derived>
struct random_op {
  /// Marks a counter-based random op (its elementwise kernels are register-capped).
  static constexpr bool counter_based_random = true;
  template <class I>
  using result = R;
  template <std::size_t, class I>
  using operand = std::int64_t;
  std::uint64_t seed = 0, offset = 0;
  /// A random_generator's offset in device memory, added to `offset` when the kernel runs (so a
  /// captured graph draws new numbers on each replay); nullptr: none.
  const std::int64_t* base = nullptr;

  /// The stream's offset for this evaluation.
  FUSEX_HD FUSEX_FORCEINLINE std::uint64_t stream_offset() const {
#if defined(__CUDA_ARCH__)
    return base == nullptr ? offset : offset + static_cast<std::uint64_t>(__ldg(base));
#else
    if (base != nullptr) {
      throw invalid_argument(
          "fusex: a random expression drawn from a fusex::random_generator reads its offset from device memory; "
          "evaluate it with fusex::eval (the host backend cannot)");
    }
    return offset;
#endif
  }

  /// The element at linear index i.
  FUSEX_HD FUSEX_FORCEINLINE R operator()(std::int64_t i) const {
    std::uint32_t w[4];
    detail::philox_block(seed, stream_offset(), i, w);
    const int k = static_cast<int>(static_cast<std::uint64_t>(i) & 3u);
    const Derived& d = static_cast<const Derived&>(*this);
    return k == 0 ? d.from_block(w, 0) : k == 1 ? d.from_block(w, 1) : k == 2 ? d.from_block(w, 2) : d.from_block(w, 3);
  }

  /// V lanes at once (map_eval's vector path): where they are whole aligned blocks of four
  /// consecutive indices (a contiguous destination's vectors), each block is enciphered once for
  /// its four elements instead of once per element; otherwise lane by lane. The same values.
  template <int V>
  FUSEX_HD FUSEX_FORCEINLINE void lanes(const std::int64_t (&i)[V], R (&out)[V]) const {
    if constexpr (V % 4 == 0) {
      bool blocks = (i[0] & 3) == 0;
      FUSEX_UNROLL
      for (int l = 1; l < V; ++l) blocks = blocks && i[l] == i[0] + l;
      if (blocks) {
        const std::uint64_t off = stream_offset();
        const Derived& d = static_cast<const Derived&>(*this);
        FUSEX_UNROLL
        for (int b = 0; b < V / 4; ++b) {
          std::uint32_t w[4];
          detail::philox_block(seed, off, i[4 * b], w);
          FUSEX_UNROLL
          for (int k = 0; k < 4; ++k) out[4 * b + k] = d.from_block(w, k);
        }
        return;
      }
    }
    FUSEX_UNROLL
    for (int l = 0; l < V; ++l) out[l] = (*this)(i[l]);
  }
};

/// The stream's raw 32-bit words (as int64 values in [0, 2^32)), one per linear index.
struct random_bits : random_op<std::int64_t, random_bits> {
  static constexpr const char* name = "random_bits";
  FUSEX_HD FUSEX_FORCEINLINE std::int64_t from_block(const std::uint32_t (&w)[4], int k) const {
    return static_cast<std::int64_t>(w[k]);
  }
};

/// Uniform on [0, 1): the word's top 24 bits times 2^-24, every float32 of that grid equally likely
/// (exact on every backend).
struct random_uniform : random_op<float, random_uniform> {
  static constexpr const char* name = "uniform";
  FUSEX_HD FUSEX_FORCEINLINE float from_block(const std::uint32_t (&w)[4], int k) const {
    return static_cast<float>(w[k] >> 8) * (1.0f / 16777216.0f);
  }
};

/// Standard normal (mean 0, deviation 1) by Box-Muller over the block's two word pairs: elements
/// 4q and 4q+1 are r cos t and r sin t of words 0 and 1 of block q, elements 4q+2 and 4q+3 the same
/// of words 2 and 3, with u1 = (w + 1) 2^-32 in (0, 1], r = sqrt(-2 ln u1), t = 2 pi w' 2^-32.
/// Computed in double and rounded to float: host and GPU agree to within their double math
/// libraries' last bits, so almost always exactly.
struct random_normal : random_op<float, random_normal> {
  static constexpr const char* name = "normal";
  FUSEX_HD FUSEX_FORCEINLINE float from_block(const std::uint32_t (&w)[4], int lane) const {
    const std::uint32_t a = lane < 2 ? w[0] : w[2], b = lane < 2 ? w[1] : w[3];
    constexpr double two_pi = 6.283185307179586476925286766559;
    constexpr double inv_2_32 = 1.0 / 4294967296.0;
    const double u1 = (static_cast<double>(a) + 1.0) * inv_2_32;
    const double t = two_pi * (static_cast<double>(b) * inv_2_32);
    const double r = detail::math::sqrt(-2.0 * detail::math::log(u1));
    return static_cast<float>((lane & 1) == 0 ? r * detail::math::cos(t) : r * detail::math::sin(t));
  }
};

}  // namespace ops

/// Where a draw's numbers come from: the seed and the offset, plus (from a random_generator) the
/// generator's offset in device memory, read when the kernel runs.
struct random_key {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
  const std::int64_t* base = nullptr;
};

namespace detail {
template <class Op>
auto random_of(const char* what, const shape_t& s, const random_key& key) {
  for (int d = 0; d < s.rank(); ++d) {  // (named here: linear_index would name itself)
    if (s[d] < 0) throw shape_error(std::string("fusex::") + what + ": shape " + s.str() + " has a negative extent");
  }
  Op op;
  op.seed = key.seed;
  op.offset = key.offset;
  op.base = key.base;
  return make_map(op, linear_index(s));
}
inline void check_probability(const char* what, double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw invalid_argument(std::string("fusex::") + what + ": p = " + std::to_string(p) +
                           " is not a probability (0 <= p <= 1)");
  }
}
}  // namespace detail

/// The raw Philox4x32-10 stream over shape `s` (int64 values in [0, 2^32)): for tests of the
/// generator and for users who derive their own distributions.
inline auto random_bits(const shape_t& s, const random_key& key) {
  return detail::random_of<ops::random_bits>("random_bits", s, key);
}
inline auto random_bits(const shape_t& s, std::uint64_t seed, std::uint64_t offset = 0) {
  return random_bits(s, random_key{seed, offset});
}
/// Uniform float32 values on [0, 1) over shape `s`, determined by (seed, offset).
inline auto uniform(const shape_t& s, const random_key& key) {
  return detail::random_of<ops::random_uniform>("uniform", s, key);
}
inline auto uniform(const shape_t& s, std::uint64_t seed, std::uint64_t offset = 0) {
  return uniform(s, random_key{seed, offset});
}
/// Standard normal float32 values over shape `s`, determined by (seed, offset).
inline auto normal(const shape_t& s, const random_key& key) {
  return detail::random_of<ops::random_normal>("normal", s, key);
}
inline auto normal(const shape_t& s, std::uint64_t seed, std::uint64_t offset = 0) {
  return normal(s, random_key{seed, offset});
}
/// Booleans over shape `s`, true with probability p (uniform(s, seed, offset) < p, with p rounded
/// to float32). Throws fusex::invalid_argument unless 0 <= p <= 1.
inline auto bernoulli(const shape_t& s, double p, const random_key& key) {
  detail::check_probability("bernoulli", p);
  return uniform(s, key) < static_cast<float>(p);
}
inline auto bernoulli(const shape_t& s, double p, std::uint64_t seed, std::uint64_t offset = 0) {
  return bernoulli(s, p, random_key{seed, offset});
}
/// Inverted dropout: each element of x kept with probability 1 - p and scaled by 1 / (1 - p), else
/// zero (a dropped NaN too), in x's floating type; the mask is bernoulli(x's shape, 1 - p, seed,
/// offset) recomputed in the kernel, never stored. p = 1 gives zeros. Throws
/// fusex::invalid_argument unless 0 <= p <= 1.
template <class X, std::enable_if_t<is_operand_v<X>, int> = 0>
auto dropout(const X& x, double p, const random_key& key) {
  static_assert(is_floating_v<result_t<X>>,
                "fusex::dropout: x must have a floating element type (float, double, half, bfloat16)");
  detail::check_probability("dropout", p);
  const auto e = as_expr(x);
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;  // (in x's type, as any scalar operand)
  return where(uniform(e.shape(), key) >= static_cast<float>(p), e * scale, 0);
}
template <class X, std::enable_if_t<is_operand_v<X>, int> = 0>
auto dropout(const X& x, double p, std::uint64_t seed, std::uint64_t offset = 0) {
  return dropout(x, p, random_key{seed, offset});
}

}  // namespace fusex
