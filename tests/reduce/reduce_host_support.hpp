#pragma once
// Helpers for the host reduction tests: host buffers with poisoned guard elements, random inputs
// with fixed seeds, and an INDEPENDENT reference: every reduction written out in double (floating
// results) or int64 (integer and bool results) with plain loops over row-major indices. Nothing
// here calls fusex's op functors, its reduction table, its conversions or its planner; half and
// bfloat16 are converted with the CUDA headers' own routines.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace rxt {

using fusex::bfloat16;
using fusex::half;
using i8 = std::int8_t;
using u8 = std::uint8_t;
using i32 = std::int32_t;
using i64 = std::int64_t;

constexpr double nan_v = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_v = std::numeric_limits<double>::infinity();

template <class T>
inline constexpr bool is_fp =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// --- conversions -----------------------------------------------------------------------------------

template <class T>
double to_double(T x) {
  if constexpr (std::is_same_v<T, half>) return static_cast<double>(__half2float(x));
  else if constexpr (std::is_same_v<T, bfloat16>) return static_cast<double>(__bfloat162float(x));
  else return static_cast<double>(x);
}

/// Nearest-even conversion of a double to T (in range for integer T).
template <class T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, half>) return __double2half(x);
  else if constexpr (std::is_same_v<T, bfloat16>) return __double2bfloat16(x);
  else if constexpr (std::is_same_v<T, bool>) return x != 0.0;
  else return static_cast<T>(x);
}

/// A double rounded to T and back (identity for double).
template <class T>
double round_to(double x) {
  if constexpr (std::is_same_v<T, double>) return x;
  else return to_double(from_double<T>(x));
}

/// Unit roundoff of an accumulation type: float for float, half, bfloat16 and integer inputs of
/// float results, double for double.
template <class Acc>
constexpr double unit_roundoff() {
  if constexpr (std::is_same_v<Acc, double>) return 0x1p-53;
  else return 0x1p-24;
}

template <class T>
std::uint64_t bits_of(const T& x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

// --- host buffers ------------------------------------------------------------------------------------

/// Number of poisoned guard elements after every destination.
constexpr std::size_t guard = 8;

/// A heap array of n elements plus `guard` guard elements, value-initialised.
template <class T>
class host_array {
 public:
  explicit host_array(std::size_t n) : p_(new T[n + guard]()), n_(n) {}
  T* data() const noexcept { return p_.get(); }
  std::size_t size() const noexcept { return n_; }
  T& operator[](std::size_t i) const noexcept { return p_[i]; }
  fusex::view<T> view(const fusex::shape_t& s) const { return fusex::make_view(p_.get(), s); }
  fusex::view<const T> cview(const fusex::shape_t& s) const { return fusex::make_view<const T>(p_.get(), s); }
  /// Every element, guards included, set to the byte pattern 0x5A (floating types: also a value
  /// that no test expects; 0x5A5A is 203.25 as half and 1.5e16 as bfloat16).
  void poison() const { std::memset(static_cast<void*>(p_.get()), 0x5A, (n_ + guard) * sizeof(T)); }
  bool guards_intact() const {
    for (std::size_t i = n_; i < n_ + guard; ++i) {
      std::uint64_t expect = 0;
      std::memset(&expect, 0x5A, sizeof(T));
      if (bits_of(p_[i]) != expect) return false;
    }
    return true;
  }
  std::vector<double> values() const {
    std::vector<double> v(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      if constexpr (std::is_same_v<T, bool>) v[i] = static_cast<double>(bits_of(p_[i]));  // raw byte
      else v[i] = to_double(p_[i]);
    }
    return v;
  }

 private:
  std::unique_ptr<T[]> p_;
  std::size_t n_;
};

/// A host array of the given values, each converted to T.
template <class T>
host_array<T> from_values(const std::vector<double>& v) {
  host_array<T> a(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) a[i] = from_double<T>(v[i]);
  return a;
}

// --- random inputs -------------------------------------------------------------------------------

/// A generator with a fixed seed per use, so that every test case is reproducible on its own.
inline std::mt19937_64 make_rng(std::uint64_t seed) { return std::mt19937_64(0x7e57ed0000ull + seed); }

/// A non-zero value of T: floating types uniform in [-8, 8] (|x| >= 0.01, rounded to T); int8
/// [-100, 100]; uint8 [1, 255]; int32 [-40000, 40000]; int64 [-2e9, 2e9]; bool: a fair coin.
template <class T>
T random_default(std::mt19937_64& g) {
  if constexpr (std::is_same_v<T, bool>) {
    return std::bernoulli_distribution(0.5)(g);
  } else if constexpr (is_fp<T>) {
    std::uniform_real_distribution<double> d(-8, 8);
    for (;;) {
      const T x = from_double<T>(d(g));
      const double v = to_double(x);
      if (std::fabs(v) >= 0.01 && std::fabs(v) <= 8) return x;
    }
  } else {
    i64 lo = 0, hi = 0;
    if constexpr (std::is_same_v<T, i8>) lo = -100, hi = 100;
    else if constexpr (std::is_same_v<T, u8>) lo = 1, hi = 255;
    else if constexpr (std::is_same_v<T, i32>) lo = -40000, hi = 40000;
    else lo = -2000000000, hi = 2000000000;
    std::uniform_int_distribution<i64> d(lo, hi);
    for (;;) {
      const i64 v = d(g);
      if (v != 0) return static_cast<T>(v);
    }
  }
}

/// Inputs for products: floating magnitudes in [0.8, 1.25] with a random sign; integers mostly +-1
/// with 5% +-2 (uint8: 1 or 2); bool: mostly true.
template <class T>
T random_for_prod(std::mt19937_64& g) {
  std::uniform_real_distribution<double> u(0, 1);
  const bool negative = u(g) < 0.5;
  if constexpr (std::is_same_v<T, bool>) {
    return u(g) < 0.9;
  } else if constexpr (is_fp<T>) {
    const double m = 0.8 + 0.45 * u(g);
    return from_double<T>(negative ? -m : m);
  } else {
    const i64 m = u(g) < 0.05 ? 2 : 1;
    if constexpr (std::is_signed_v<T>) return static_cast<T>(negative ? -m : m);
    else return static_cast<T>(m);
  }
}

/// Zero with probability `p_zero`, else a random_default value.
template <class T>
T random_sparse(std::mt19937_64& g, double p_zero) {
  std::uniform_real_distribution<double> u(0, 1);
  if (u(g) < p_zero) return from_double<T>(0);
  if constexpr (std::is_same_v<T, bool>) return true;
  else return random_default<T>(g);
}

// --- shapes and axes, computed by the test ---------------------------------------------------------

using shape_v = std::vector<i64>;

inline i64 count(const shape_v& s) {
  i64 n = 1;
  for (i64 e : s) n *= e;
  return n;
}

/// Bit d set: axis d reduced. Negative axes count from the end.
inline std::uint32_t mask_of(const std::vector<int>& axes, int rank) {
  std::uint32_t m = 0;
  for (int a : axes) m |= 1u << (a < 0 ? a + rank : a);
  return m;
}

inline shape_v reduced_shape(const shape_v& s, std::uint32_t mask, bool keep) {
  shape_v out;
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (mask & (1u << d)) {
      if (keep) out.push_back(1);
    } else {
      out.push_back(s[d]);
    }
  }
  return out;
}

inline fusex::shape_t to_shape(const shape_v& s) {
  fusex::shape_t out;
  for (i64 e : s) out.push_back(e);
  return out;
}

/// For each output (row-major over the kept axes), the reduced elements of the row-major array `x`
/// of shape `s`, in row-major order of the reduced axes.
inline std::vector<std::vector<double>> groups(const std::vector<double>& x, const shape_v& s, std::uint32_t mask) {
  const int r = static_cast<int>(s.size());
  std::vector<i64> stride(static_cast<std::size_t>(r), 1);
  for (int d = r - 2; d >= 0; --d)
    stride[static_cast<std::size_t>(d)] = stride[static_cast<std::size_t>(d) + 1] * s[static_cast<std::size_t>(d) + 1];
  std::vector<int> kept, red;
  for (int d = 0; d < r; ++d) ((mask >> d) & 1u ? red : kept).push_back(d);
  shape_v ks, rs;
  for (int d : kept) ks.push_back(s[static_cast<std::size_t>(d)]);
  for (int d : red) rs.push_back(s[static_cast<std::size_t>(d)]);
  const i64 K = count(ks), N = count(rs);
  std::vector<std::vector<double>> out(static_cast<std::size_t>(K));
  // Odometers over the kept and the reduced axes, last axis fastest.
  std::vector<i64> ki(kept.size(), 0);
  for (i64 k = 0; k < K; ++k) {
    i64 base = 0;
    for (std::size_t j = 0; j < kept.size(); ++j) base += ki[j] * stride[static_cast<std::size_t>(kept[j])];
    std::vector<i64> ri(red.size(), 0);
    for (i64 n = 0; n < N; ++n) {
      i64 off = base;
      for (std::size_t j = 0; j < red.size(); ++j) off += ri[j] * stride[static_cast<std::size_t>(red[j])];
      out[static_cast<std::size_t>(k)].push_back(x[static_cast<std::size_t>(off)]);
      for (int j = static_cast<int>(red.size()) - 1; j >= 0; --j) {
        if (++ri[static_cast<std::size_t>(j)] < rs[static_cast<std::size_t>(j)]) break;
        ri[static_cast<std::size_t>(j)] = 0;
      }
    }
    for (int j = static_cast<int>(kept.size()) - 1; j >= 0; --j) {
      if (++ki[static_cast<std::size_t>(j)] < ks[static_cast<std::size_t>(j)]) break;
      ki[static_cast<std::size_t>(j)] = 0;
    }
  }
  return out;
}

// --- the reference reductions ----------------------------------------------------------------------

enum class rk { sum, prod, mean, amax, amin, argmax, argmin, any, all, l1, l2, linf, var, stddev, logsumexp };

inline const char* rk_name(rk k) {
  switch (k) {
    case rk::sum: return "sum";
    case rk::prod: return "prod";
    case rk::mean: return "mean";
    case rk::amax: return "amax";
    case rk::amin: return "amin";
    case rk::argmax: return "argmax";
    case rk::argmin: return "argmin";
    case rk::any: return "any";
    case rk::all: return "all";
    case rk::l1: return "norm L1";
    case rk::l2: return "norm L2";
    case rk::linf: return "norm max";
    case rk::var: return "var";
    case rk::stddev: return "stddev";
    case rk::logsumexp: return "logsumexp";
  }
  return "?";
}

/// A reference value and the absolute rounding error the accumulation may add (a bound for
/// recursive summation: about n * u * sum|terms|, u the accumulator's unit roundoff).
struct ref_value {
  double value;
  double err;
};

/// The reduction `k` of the values `v` (exact in double for everything the tests feed it, or
/// within double's own rounding), with the error bound of an accumulation of unit roundoff `u`.
inline ref_value reference(rk k, const std::vector<double>& v, double u, double correction = 1) {
  const double n = static_cast<double>(v.size());
  bool any_nan = false;
  for (double e : v) any_nan = any_nan || std::isnan(e);
  switch (k) {
    case rk::sum: {
      double s = 0, a = 0;
      for (double e : v) s += e, a += std::fabs(e);
      return {s, (n + 1) * u * a};
    }
    case rk::prod: {
      double p = 1;
      for (double e : v) p *= e;
      return {p, (n + 1) * u * std::fabs(p)};
    }
    case rk::mean: {
      if (v.empty()) return {nan_v, 0};
      double s = 0, a = 0;
      for (double e : v) s += e, a += std::fabs(e);
      return {s / n, (n + 2) * u * a / n};
    }
    case rk::amax:
    case rk::amin: {
      if (any_nan) return {nan_v, 0};
      double m = v.at(0);
      for (double e : v) m = k == rk::amax ? (e > m ? e : m) : (e < m ? e : m);
      return {m, 0};
    }
    case rk::argmax:
    case rk::argmin: {  // the first NaN, else the first extreme value
      std::size_t best = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(v[i])) return {static_cast<double>(i), 0};
        if (k == rk::argmax ? v[i] > v[best] : v[i] < v[best]) best = i;
      }
      return {static_cast<double>(best), 0};
    }
    case rk::any: {
      bool r = false;
      for (double e : v) r = r || e != 0;
      return {r ? 1.0 : 0.0, 0};
    }
    case rk::all: {
      bool r = true;
      for (double e : v) r = r && e != 0;
      return {r ? 1.0 : 0.0, 0};
    }
    case rk::l1: {
      double s = 0;
      for (double e : v) s += std::fabs(e);
      return {s, (n + 2) * u * s};
    }
    case rk::l2: {
      double s = 0;
      for (double e : v) s += e * e;
      return {std::sqrt(s), (n + 4) * u * std::sqrt(s)};
    }
    case rk::linf: {
      if (any_nan) return {nan_v, 0};
      double m = 0;
      for (double e : v) m = std::max(m, std::fabs(e));
      return {m, 2 * u * m};
    }
    case rk::var:
    case rk::stddev: {
      const double denom = n - correction;
      if (denom <= 0) return {nan_v, 0};
      double mean = 0;
      for (double e : v) mean += e;
      mean /= n;
      double m2 = 0, sq = 0;
      for (double e : v) m2 += (e - mean) * (e - mean), sq += e * e;
      const double var = m2 / denom, err = (n + 8) * u * sq / denom;
      if (k == rk::var) return {var, err};
      const double sd = std::sqrt(var);
      return {sd, sd > 0 ? std::min(std::sqrt(err), err / sd) : std::sqrt(err)};
    }
    case rk::logsumexp: {
      if (v.empty()) return {-inf_v, 0};
      if (any_nan) return {nan_v, 0};
      double m = -inf_v;
      for (double e : v) m = std::max(m, e);
      if (std::isinf(m)) return {m, 0};
      double s = 0;
      for (double e : v) s += std::exp(e - m);
      return {m + std::log(s), (n + 8) * u * (1 + std::fabs(m))};
    }
  }
  return {nan_v, 0};
}

// --- comparison ------------------------------------------------------------------------------------

/// Output tolerance of a result stored as Out, against a reference rounded to Out: about one unit
/// in the last place (float32 a few), plus the accumulation bound `err`.
template <class Out>
bool close(double got, double want, double err) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  // rel: about one unit in the last place (a few for float32); tiny: the spacing of Out's
  // subnormals, one unit in the last place of the smallest values.
  double rel = 0, tiny = 0;
  if constexpr (std::is_same_v<Out, float>) rel = 1e-6, tiny = 0x1p-149;
  else if constexpr (std::is_same_v<Out, double>) rel = 1e-13, tiny = 0x1p-1074;
  else if constexpr (std::is_same_v<Out, half>) rel = 1e-3, tiny = 0x1p-24;
  else if constexpr (std::is_same_v<Out, bfloat16>) rel = 8e-3, tiny = 0x1p-133;
  const double w = round_to<Out>(want);
  return std::fabs(got - w) <= rel * std::fabs(w) + tiny + err * (1 + rel);
}

/// Compares a destination with references; integer and bool results exactly. Also checks that the
/// guard elements after the destination are untouched.
template <class Out>
void check_results(const std::string& what, const host_array<Out>& got, const std::vector<ref_value>& want) {
  REQUIRE(got.size() == want.size());
  std::ostringstream os;
  os.precision(17);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool ok = false;
    double g = 0;
    if constexpr (std::is_same_v<Out, bool>) {
      const auto byte = bits_of(got[i]);
      g = static_cast<double>(byte);
      ok = byte == (want[i].value != 0 ? 1u : 0u);
    } else if constexpr (is_fp<Out>) {
      g = to_double(got[i]);
      ok = close<Out>(g, want[i].value, want[i].err);
    } else {
      g = static_cast<double>(got[i]);
      ok = static_cast<i64>(got[i]) == static_cast<i64>(want[i].value);
    }
    if (!ok && bad++ < 8)
      os << "\n  [" << i << "] got " << g << ", want " << want[i].value << " (+- " << want[i].err << ")";
  }
  INFO(what << " (" << fusex::dtype_name<Out>() << "): " << bad << " mismatch(es) of " << want.size() << os.str());
  CHECK(bad == 0);
  INFO(what << ": an element after the destination was written");
  CHECK(got.guards_intact());
}

/// Evaluates `expr` on the host into a poisoned destination of the expression's own value type and
/// shape `s`, and returns it.
template <class E>
host_array<typename E::value_type> evaluate(const E& expr, const shape_v& s) {
  host_array<typename E::value_type> out(static_cast<std::size_t>(count(s)));
  out.poison();
  fusex::host::eval(out.view(to_shape(s)), expr);
  return out;
}

// --- the axis sets -----------------------------------------------------------------------------------

struct axis_case {
  const char* label;
  bool whole;             // f(x): every axis, no keepdim
  std::vector<int> list;  // f(x, axes[, keepdim])
  bool keep;
};

inline std::vector<axis_case> axis_cases() {
  std::vector<axis_case> c;
  c.push_back({"all axes f(x)", true, {}, false});
  const std::vector<std::pair<const char*, std::vector<int>>> sets = {
      {"{0}", {0}},         {"{1} (middle)", {1}},    {"{-1}", {-1}},
      {"{2}", {2}},         {"{0, 2}", {0, 2}},       {"{-1, -3}", {-1, -3}},
      {"{-2, 0}", {-2, 0}}, {"{0, 1, 2}", {0, 1, 2}}, {"{2, 0, 1}", {2, 0, 1}}};
  for (const auto& s : sets) {
    c.push_back({s.first, false, s.second, false});
    c.push_back({s.first, false, s.second, true});
  }
  return c;
}

// fusex::axes from a run-time list (axes takes an initializer list or one int).
inline fusex::axes make_axes(const std::vector<int>& l) {
  if (l.size() == 1) return fusex::axes(l[0]);
  if (l.size() == 2) return fusex::axes{l[0], l[1]};
  REQUIRE(l.size() == 3);
  return fusex::axes{l[0], l[1], l[2]};
}

// --- building each reduction --------------------------------------------------------------------------
// All three forms of one reduction have the same expression type (the axes and keepdim are run-time
// values), so each (reduction, dtype) pair instantiates one evaluation.

#define RXT_MAKER(kind, fn)                                                                 \
  template <class X>                                                                        \
  auto make(std::integral_constant<rk, rk::kind>, const X& x, const axis_case& c, double) { \
    if (c.whole) return fusex::fn(x);                                                       \
    if (c.keep) return fusex::fn(x, make_axes(c.list), fusex::keepdim);                     \
    return fusex::fn(x, make_axes(c.list));                                                 \
  }
RXT_MAKER(sum, sum)
RXT_MAKER(prod, prod)
RXT_MAKER(mean, mean)
RXT_MAKER(amax, amax)
RXT_MAKER(amin, amin)
RXT_MAKER(argmax, argmax)
RXT_MAKER(argmin, argmin)
RXT_MAKER(any, any)
RXT_MAKER(all, all)
RXT_MAKER(logsumexp, logsumexp)
#undef RXT_MAKER

#define RXT_NORM_MAKER(kind, nk)                                                                \
  template <class X>                                                                            \
  auto make(std::integral_constant<rk, rk::kind>, const X& x, const axis_case& c, double) {     \
    if (c.whole) return fusex::norm(x, fusex::norm_kind::nk);                                   \
    if (c.keep) return fusex::norm(x, make_axes(c.list), fusex::norm_kind::nk, fusex::keepdim); \
    return fusex::norm(x, make_axes(c.list), fusex::norm_kind::nk);                             \
  }
RXT_NORM_MAKER(l1, l1)
RXT_NORM_MAKER(l2, l2)
RXT_NORM_MAKER(linf, max)
#undef RXT_NORM_MAKER

// var/stddev over every axis takes no correction (it is 1); the run skips f(x) for others.
#define RXT_VAR_MAKER(kind, fn)                                                                  \
  template <class X>                                                                             \
  auto make(std::integral_constant<rk, rk::kind>, const X& x, const axis_case& c, double corr) { \
    if (c.whole) return fusex::fn(x);                                                            \
    if (c.keep) return fusex::fn(x, make_axes(c.list), corr, fusex::keepdim);                    \
    return fusex::fn(x, make_axes(c.list), corr);                                                \
  }
RXT_VAR_MAKER(var, var)
RXT_VAR_MAKER(stddev, stddev)
#undef RXT_VAR_MAKER

// --- the documented result dtypes, written out independently ----------------------------------------

template <rk K, class T>
auto expected_result_impl() {
  constexpr bool fp = is_fp<T>;
  if constexpr (K == rk::sum || K == rk::prod) {
    if constexpr (fp) return T{};
    else return i64{};  // integer and bool sums and products: int64
  } else if constexpr (K == rk::amax || K == rk::amin) {
    return T{};
  } else if constexpr (K == rk::argmax || K == rk::argmin) {
    return i64{};
  } else if constexpr (K == rk::any || K == rk::all) {
    return bool{};
  } else {  // mean, norms, var, stddev, logsumexp: floating T stays, integers and bool give float32
    if constexpr (fp) return T{};
    else return float{};
  }
}
template <rk K, class T>
using expected_result = decltype(expected_result_impl<K, T>());

// The accumulator's unit roundoff: double for double inputs, float otherwise (integer results are
// exact and compared exactly).
template <class T>
double acc_roundoff() {
  return std::is_same_v<T, double> ? unit_roundoff<double>() : unit_roundoff<float>();
}

// --- exceptions (thrown_message<E>() is in tests/support/fusex_catch.hpp) ---------------------------

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace rxt

#define RXT_ALL_DTYPES \
  float, double, fusex::half, fusex::bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t, bool
#define RXT_NUMERIC_DTYPES \
  float, double, fusex::half, fusex::bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t
#define RXT_FLOAT_DTYPES float, double, fusex::half, fusex::bfloat16
