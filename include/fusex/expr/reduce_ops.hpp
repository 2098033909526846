#pragma once
/// \file
/// The reduction table: every reduction, defined once as a `__host__ __device__` functor with an
/// accumulator (`acc<T>`), its identity, how one value enters it (`lift`), how two accumulators
/// combine (`combine`, associative; ties and order handled so results are deterministic), and how
/// the final value is produced (`finish`, given the number of reduced elements).
///
/// Accumulation types: float for float16, bfloat16 and float32; double for float64; int64 for
/// integer and bool sums and products.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/expr/ops.hpp>

#include <fusex/core/detail/limits.hpp>

#include <cstdint>
#include <type_traits>

namespace fusex::reduce_ops {

namespace detail {
template <class T>
using float_acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
// Sums and products: floats in float (double for double), integers and bool in int64.
template <class T>
using sum_acc = std::conditional_t<is_floating_v<T>, float_acc<T>, std::int64_t>;
template <class T>
using sum_result = std::conditional_t<is_floating_v<T>, T, std::int64_t>;
}  // namespace detail

struct sum {
  static constexpr const char* name = "sum";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = detail::sum_acc<T>;
  template <class T>
  using result = detail::sum_result<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return acc<T>(0);
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    return static_cast<acc<T>>(x);
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    return a + b;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t) const {
    return static_cast<compute_t<result<T>>>(a);
  }
};

struct prod {
  static constexpr const char* name = "prod";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = detail::sum_acc<T>;
  template <class T>
  using result = detail::sum_result<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return acc<T>(1);
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    return static_cast<acc<T>>(x);
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    return a * b;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t) const {
    return static_cast<compute_t<result<T>>>(a);
  }
};

/// Arithmetic mean; integers average in float32. The mean of nothing is NaN (0/0), as in NumPy.
struct mean {
  static constexpr const char* name = "mean";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = detail::float_acc<float_of_t<T>>;
  template <class T>
  using result = float_of_t<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return acc<T>(0);
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    return static_cast<acc<T>>(x);
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    return a + b;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t n) const {
    return static_cast<compute_t<result<T>>>(a / static_cast<acc<T>>(n));
  }
};

/// Maximum; NaN propagates (as torch.amax). Undefined over nothing (fusex raises an error).
struct max {
  static constexpr const char* name = "max";
  static constexpr bool needs_elements = true;
  template <class T>
  using acc = compute_t<T>;
  template <class T>
  using result = T;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    if constexpr (std::is_floating_point_v<acc<T>>) return -fusex::detail::limits<acc<T>>::infinity();
    else return fusex::detail::limits<acc<T>>::lowest();
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    return x;
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    return ops::maximum{}(a, b);
  }
  template <class T>
  FUSEX_HD compute_t<T> finish(acc<T> a, std::int64_t) const {
    return a;
  }
};

/// Minimum; NaN propagates (as torch.amin). Undefined over nothing.
struct min {
  static constexpr const char* name = "min";
  static constexpr bool needs_elements = true;
  template <class T>
  using acc = compute_t<T>;
  template <class T>
  using result = T;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    if constexpr (std::is_floating_point_v<acc<T>>) return fusex::detail::limits<acc<T>>::infinity();
    else return fusex::detail::limits<acc<T>>::max();
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    return x;
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    return ops::minimum{}(a, b);
  }
  template <class T>
  FUSEX_HD compute_t<T> finish(acc<T> a, std::int64_t) const {
    return a;
  }
};

template <class C>
struct value_index {
  C value;
  std::int64_t index;
};

namespace detail {
// argmax and argmin differ only in which of two values wins. `Better` is strict; ties go to the
// first index and a NaN beats any number (its first occurrence wins), as in PyTorch.
template <class Better, class Extreme>
struct arg_reduce {
  static constexpr bool needs_elements = true;
  template <class T>
  using acc = value_index<compute_t<T>>;
  template <class T>
  using result = std::int64_t;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return {Extreme{}.template identity<T>(), -1};
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t i) const {
    return {x, i};
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool an = fusex::detail::math::isnan(a.value), bn = fusex::detail::math::isnan(b.value);
    if (an || bn) {
      if (an && bn) return a.index < b.index ? a : b;
      return an ? a : b;
    }
    if (Better{}(a.value, b.value)) return a;
    if (Better{}(b.value, a.value)) return b;
    return a.index < b.index ? a : b;
  }
  template <class T>
  FUSEX_HD std::int64_t finish(acc<T> a, std::int64_t) const {
    return a.index;
  }
};
struct greater_than {
  template <class C>
  FUSEX_HD bool operator()(C a, C b) const {
    return a > b;
  }
};
struct less_than {
  template <class C>
  FUSEX_HD bool operator()(C a, C b) const {
    return a < b;
  }
};
}  // namespace detail

/// Index of the maximum along the reduced axes (row-major over several axes); the first index on
/// ties; a NaN counts as the maximum (as torch.argmax).
struct argmax : detail::arg_reduce<detail::greater_than, max> {
  static constexpr const char* name = "argmax";
};

/// Index of the minimum; first index on ties; a NaN counts as the minimum (as torch.argmin).
struct argmin : detail::arg_reduce<detail::less_than, min> {
  static constexpr const char* name = "argmin";
};

/// True if any element is non-zero (false over nothing).
struct any {
  static constexpr const char* name = "any";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = bool;
  template <class T>
  using result = bool;
  template <class T>
  FUSEX_HD bool identity() const {
    return false;
  }
  template <class T>
  FUSEX_HD bool lift(compute_t<T> x, std::int64_t) const {
    return x != compute_t<T>(0);
  }
  template <class T>
  FUSEX_HD bool combine(bool a, bool b) const {
    return a || b;
  }
  template <class T>
  FUSEX_HD bool finish(bool a, std::int64_t) const {
    return a;
  }
};

/// True if every element is non-zero (true over nothing).
struct all {
  static constexpr const char* name = "all";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = bool;
  template <class T>
  using result = bool;
  template <class T>
  FUSEX_HD bool identity() const {
    return true;
  }
  template <class T>
  FUSEX_HD bool lift(compute_t<T> x, std::int64_t) const {
    return x != compute_t<T>(0);
  }
  template <class T>
  FUSEX_HD bool combine(bool a, bool b) const {
    return a && b;
  }
  template <class T>
  FUSEX_HD bool finish(bool a, std::int64_t) const {
    return a;
  }
};

/// Vector norms: kind 1 is L1 (sum of |x|), 2 is L2 (square root of the sum of squares), 0 is
/// the max norm (largest |x|).
struct norm {
  static constexpr const char* name = "norm";
  static constexpr bool needs_elements = false;
  int kind = 2;
  template <class T>
  using acc = detail::float_acc<float_of_t<T>>;
  template <class T>
  using result = float_of_t<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return acc<T>(0);
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    const acc<T> v = static_cast<acc<T>>(x);
    if (kind == 2) return v * v;
    return v < acc<T>(0) ? -v : v;
  }
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    if (kind == 0) return ops::maximum{}(a, b);
    return a + b;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t) const {
    if (kind == 2) return static_cast<compute_t<result<T>>>(fusex::detail::math::sqrt(a));
    return static_cast<compute_t<result<T>>>(a);
  }
};

template <class C>
struct welford {
  C count;
  C mean;
  C m2;
};

/// Variance (Kind 0) or standard deviation (Kind 1) with a correction (1: sample, 0: population),
/// by Welford's algorithm with Chan's combination: one pass, numerically stable.
template <int Kind>
struct variance {
  static constexpr const char* name = Kind == 0 ? "var" : "std";
  static constexpr bool needs_elements = false;
  double correction = 1;
  template <class T>
  using acc = welford<detail::float_acc<float_of_t<T>>>;
  template <class T>
  using result = float_of_t<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    return {0, 0, 0};
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    using C = detail::float_acc<float_of_t<T>>;
    return {C(1), static_cast<C>(x), C(0)};
  }
  /// Branch-free (no divergent region in the warp and block reductions): empty sides need no
  /// test (an empty side has count 0 and mean 0, so the weights give the other side back
  /// exactly), and equal counts, the common case in a balanced reduction tree, skip the
  /// division (b.count / n is exactly 1/2 then).
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    using C = detail::float_acc<float_of_t<T>>;
    const C n = a.count + b.count;
    const C delta = b.mean - a.mean;
    const C wb = a.count == b.count ? C(0.5) : b.count / n;
    const C mean = a.mean + delta * wb;
    // delta * delta * a.count * wb is 0 when a side is empty, unless delta is infinite (an
    // infinite mean makes the variance NaN in finish whatever m2 holds).
    const C m2 = a.m2 + b.m2 + delta * delta * a.count * wb;
    if (a.count == C(0)) return b;  // (selects: both sides are computed above)
    return {n, mean, m2};
  }
  /// W values at once (W a power of two): their own mean and squared deviations, exactly as
  /// Chan's combination would give them, without a division per element.
  template <class T, int W>
  FUSEX_HD acc<T> lift_vec(const compute_t<T> (&x)[W], std::int64_t) const {
    using C = detail::float_acc<float_of_t<T>>;
    // The mean as a sum of x / W (exact scaling: W is a power of two), so that values near the
    // type's largest do not overflow the sum where one-by-one Welford would not.
    C m = C(0);
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) m += static_cast<C>(x[l]) * (C(1) / C(W));
    C m2 = C(0);
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) {
      const C d = static_cast<C>(x[l]) - m;
      m2 += d * d;
    }
    return {C(W), m, m2};
  }
  // The two-level form (used where the row is in registers; see has_two_level): the mean, then
  // the sum of squared deviations from it. The first sweep sums x / 2^13 (exact scaling), so it
  // cannot overflow where the values do not (as lift_vec's x / W), for rows of at most
  // two_level_max_count elements: the register cache's largest row (checked where it is used).
  static constexpr int two_level_max_count = 8192;
  template <class T>
  using pre_acc = detail::float_acc<float_of_t<T>>;
  template <class T>
  FUSEX_HD pre_acc<T> pre_identity() const {
    return pre_acc<T>(0);
  }
  template <class T, int W>
  FUSEX_HD pre_acc<T> pre_lift_vec(const compute_t<T> (&x)[W]) const {
    constexpr pre_acc<T> scale = pre_acc<T>(1) / pre_acc<T>(two_level_max_count);
    pre_acc<T> s = static_cast<pre_acc<T>>(x[0]) * scale;
    FUSEX_UNROLL
    for (int l = 1; l < W; ++l) s += static_cast<pre_acc<T>>(x[l]) * scale;
    return s;
  }
  template <class T>
  FUSEX_HD pre_acc<T> pre_combine(pre_acc<T> a, pre_acc<T> b) const {
    return a + b;
  }
  template <class T>
  FUSEX_HD pre_acc<T> pre_finish(pre_acc<T> a, std::int64_t n) const {
    return a / static_cast<pre_acc<T>>(n) * static_cast<pre_acc<T>>(two_level_max_count);
  }
  template <class T, int W>
  FUSEX_HD pre_acc<T> post_lift_vec(const compute_t<T> (&x)[W], pre_acc<T> mean) const {
    pre_acc<T> s = pre_acc<T>(0);
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) {
      const pre_acc<T> d = static_cast<pre_acc<T>>(x[l]) - mean;
      s += d * d;
    }
    return s;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish_two_level(pre_acc<T> mean, pre_acc<T> m2, std::int64_t n) const {
    return finish<T>(acc<T>{static_cast<pre_acc<T>>(n), mean, m2}, n);
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t) const {
    using C = detail::float_acc<float_of_t<T>>;
    const C denom = a.count - static_cast<C>(correction);
    C v = denom > C(0) ? a.m2 / denom : fusex::detail::limits<C>::quiet_NaN();  // too few elements
    // An infinite or NaN element leaves the mean non-finite: the variance is NaN (as torch.var),
    // whatever the order in which partial results were combined.
    if (fusex::detail::math::isnan(a.mean - a.mean)) v = fusex::detail::limits<C>::quiet_NaN();
    if constexpr (Kind == 1) v = fusex::detail::math::sqrt(v);
    return static_cast<compute_t<result<T>>>(v);
  }
};

template <class C>
struct max_sum {
  C max;
  C sum;
};

/// log(sum(exp(x))), computed stably in one pass (running maximum and rescaled sum).
struct logsumexp {
  static constexpr const char* name = "logsumexp";
  static constexpr bool needs_elements = false;
  template <class T>
  using acc = max_sum<detail::float_acc<float_of_t<T>>>;
  template <class T>
  using result = float_of_t<T>;
  template <class T>
  FUSEX_HD acc<T> identity() const {
    using C = detail::float_acc<float_of_t<T>>;
    return {-fusex::detail::limits<C>::infinity(), C(0)};
  }
  template <class T>
  FUSEX_HD acc<T> lift(compute_t<T> x, std::int64_t) const {
    using C = detail::float_acc<float_of_t<T>>;
    return {static_cast<C>(x), C(1)};
  }
  /// Branch-free, so the warp and block reductions run without divergent regions: the side
  /// holding the maximum scales by exp(0) = 1 exactly (exp(inf - inf) would be NaN when the
  /// maximum is +inf, and two -inf maxima sum their counts), an empty side (max -inf, sum 0)
  /// contributes 0, and a NaN on either side gives {NaN, 1}.
  template <class T>
  FUSEX_HD acc<T> combine(acc<T> a, acc<T> b) const {
    using C = detail::float_acc<float_of_t<T>>;
    const bool nan = fusex::detail::math::isnan(a.max) || fusex::detail::math::isnan(b.max);
    const C m = a.max > b.max ? a.max : b.max;
    const C ea = fusex::detail::math::exp_shifted(a.max == m ? C(0) : a.max - m);
    const C eb = fusex::detail::math::exp_shifted(b.max == m ? C(0) : b.max - m);
    const C s = a.sum * ea + b.sum * eb;
    return {nan ? a.max + b.max : m, nan ? C(1) : s};
  }
  /// W values at once: their maximum, then one exp per value (folding them one by one rescales
  /// the running sum with a second exp per value, in a dependent chain). No branches: the
  /// maximum itself takes exp(0) = 1 (also at +-inf), and a NaN is selected at the end.
  template <class T, int W>
  FUSEX_HD acc<T> lift_vec(const compute_t<T> (&x)[W], std::int64_t) const {
    using C = detail::float_acc<float_of_t<T>>;
    C m = static_cast<C>(x[0]);
    bool nan = fusex::detail::math::isnan(m);
    FUSEX_UNROLL
    for (int l = 1; l < W; ++l) {
      const C v = static_cast<C>(x[l]);
      nan = nan || fusex::detail::math::isnan(v);
      m = v > m ? v : m;
    }
    C s = C(0);
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) {
      const C v = static_cast<C>(x[l]);
      s += fusex::detail::math::exp_shifted(v == m ? C(0) : v - m);
    }
    if (nan) return {fusex::detail::limits<C>::quiet_NaN(), C(1)};
    return {m, s};
  }
  // The two-level form (used where the row is in registers; see has_two_level): the maximum m
  // (NaN propagating), then the sum of exp(x - m) with no rescaling. An infinite m shifts by 0
  // instead (one test per row, not a select per element as in lift_vec): at +inf the sum is
  // +inf or more and the result +inf; at -inf every element is -inf, the sum 0 and the result
  // -inf, as the one-pass form gives.
  static constexpr int two_level_max_count = 1 << 30;  // (no limit of its own)
  template <class T>
  using pre_acc = detail::float_acc<float_of_t<T>>;
  template <class T>
  FUSEX_HD pre_acc<T> pre_identity() const {
    return -fusex::detail::limits<pre_acc<T>>::infinity();
  }
  template <class T>
  FUSEX_HD pre_acc<T> pre_combine(pre_acc<T> a, pre_acc<T> b) const {
    return fusex::detail::math::max_nan(a, b);
  }
  template <class T, int W>
  FUSEX_HD pre_acc<T> pre_lift_vec(const compute_t<T> (&x)[W]) const {
    pre_acc<T> m = static_cast<pre_acc<T>>(x[0]);
    FUSEX_UNROLL
    for (int l = 1; l < W; ++l) m = pre_combine<T>(m, static_cast<pre_acc<T>>(x[l]));
    return m;
  }
  template <class T>
  FUSEX_HD pre_acc<T> pre_finish(pre_acc<T> m, std::int64_t) const {
    return m - m == m - m ? m : (fusex::detail::math::isnan(m) ? m : pre_acc<T>(0));  // +-inf: 0
  }
  template <class T, int W>
  FUSEX_HD pre_acc<T> post_lift_vec(const compute_t<T> (&x)[W], pre_acc<T> shift) const {
    pre_acc<T> s = pre_acc<T>(0);
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) s += fusex::detail::math::exp_shifted(static_cast<pre_acc<T>>(x[l]) - shift);
    return s;
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish_two_level(pre_acc<T> shift, pre_acc<T> s, std::int64_t) const {
    return static_cast<compute_t<result<T>>>(shift + fusex::detail::math::log(s));
  }
  template <class T>
  FUSEX_HD compute_t<result<T>> finish(acc<T> a, std::int64_t) const {
    return static_cast<compute_t<result<T>>>(a.max + fusex::detail::math::log(a.sum));
  }
};

}  // namespace fusex::reduce_ops
