#pragma once
// Helpers for the host elementwise tests: host buffers, poisoning, random inputs, an independent
// double / int64 view of every element type, and comparison with per-dtype tolerances.
//
// Nothing here calls fusex's op functors, its conversions or its planner: references are computed
// by the tests in plain double (floating results) or int64 (integer and bool results) arithmetic,
// and conversions use the CUDA headers' own half/bfloat16 routines.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <tuple>
#include <string>
#include <type_traits>
#include <vector>

namespace fxt {

using fusex::bfloat16;
using fusex::half;
using i8 = std::int8_t;
using u8 = std::uint8_t;
using i32 = std::int32_t;
using i64 = std::int64_t;

template <class T>
inline constexpr bool is_fp =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// The reference type of T: double for floating types, int64 for integers and bool.
template <class T>
using ref_t = std::conditional_t<is_fp<T>, double, i64>;

// --- conversions (CUDA's routines for half/bfloat16, plain C++ otherwise) --------------------------

template <class T>
double to_double(T x) {
  if constexpr (std::is_same_v<T, half>) return static_cast<double>(__half2float(x));
  else if constexpr (std::is_same_v<T, bfloat16>) return static_cast<double>(__bfloat162float(x));
  else return static_cast<double>(x);
}

/// Nearest-even conversion of a double to T (values must be in T's range for integer T).
template <class T>
T from_double(double x) {
  if constexpr (std::is_same_v<T, half>) return __double2half(x);
  else if constexpr (std::is_same_v<T, bfloat16>) return __double2bfloat16(x);
  else if constexpr (std::is_same_v<T, bool>) return x != 0.0;
  else return static_cast<T>(x);
}

/// The bytes of one element as an unsigned integer (bool elements are read as their byte, so
/// that a poisoned bool is seen as the value 0x5A rather than read as an invalid bool).
template <class T>
std::uint64_t bits_of(const T& x) {
  std::uint64_t b = 0;
  std::memcpy(&b, &x, sizeof(T));
  return b;
}

/// An element's value in its reference type: double for floating types, int64 for integers, and
/// for bool the raw byte (0 or 1 when valid).
template <class T>
ref_t<T> value_of(const T& x) {
  if constexpr (is_fp<T>) return to_double(x);
  else if constexpr (std::is_same_v<T, bool>) return static_cast<i64>(bits_of(x));
  else return static_cast<i64>(x);
}

/// Reduces a mathematical integer result modulo 2^bits of T (two's complement), as a store to T
/// of a wider integer does. For bool: non-zero is true.
template <class T>
i64 wrap(i64 v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0 ? 1 : 0;
  } else if constexpr (sizeof(T) == 8) {
    return v;
  } else {
    constexpr int bits = static_cast<int>(8 * sizeof(T));
    const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
    const std::uint64_t u = static_cast<std::uint64_t>(v) & mask;
    if constexpr (std::is_signed_v<T>) {
      if (u >= (std::uint64_t{1} << (bits - 1))) return static_cast<i64>(u) - (i64{1} << bits);
    }
    return static_cast<i64>(u);
  }
}

/// T's finite range as doubles.
template <class T>
double lowest() {
  if constexpr (std::is_same_v<T, half>) return -65504.0;
  else if constexpr (std::is_same_v<T, bfloat16>) return -3.3895313892515355e38;
  else if constexpr (std::is_same_v<T, bool>) return 0.0;
  else return static_cast<double>(std::numeric_limits<T>::lowest());
}
template <class T>
double highest() {
  if constexpr (std::is_same_v<T, half>) return 65504.0;
  else if constexpr (std::is_same_v<T, bfloat16>) return 3.3895313892515355e38;
  else if constexpr (std::is_same_v<T, bool>) return 1.0;
  else return static_cast<double>(std::numeric_limits<T>::max());
}

// --- host buffers ----------------------------------------------------------------------------------

/// A heap array of T (std::vector<bool> has no data()), value-initialised.
template <class T>
class host_array {
 public:
  explicit host_array(std::size_t n) : p_(new T[n > 0 ? n : 1]()), n_(n) {}
  T* data() const noexcept { return p_.get(); }
  std::size_t size() const noexcept { return n_; }
  T& operator[](std::size_t i) const noexcept { return p_[i]; }
  /// A contiguous view of the first numel(shape) elements.
  fusex::view<T> view(const fusex::shape_t& shape) const { return fusex::make_view(p_.get(), shape); }
  fusex::view<const T> cview(const fusex::shape_t& shape) const { return fusex::make_view<const T>(p_.get(), shape); }

 private:
  std::unique_ptr<T[]> p_;
  std::size_t n_;
};

/// Fills with NaN (floating types) or the byte pattern 0x5A (integers and bool).
template <class T>
void poison(const host_array<T>& a) {
  if constexpr (is_fp<T>) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = from_double<T>(std::numeric_limits<double>::quiet_NaN());
  } else {
    std::memset(static_cast<void*>(a.data()), 0x5A, a.size() * sizeof(T));
  }
}

/// True when the element still holds the poison written by poison().
template <class T>
bool is_poisoned(const T& x) {
  if constexpr (is_fp<T>) {
    return std::isnan(to_double(x));
  } else {
    std::uint64_t expect = 0;
    std::memset(&expect, 0x5A, sizeof(T));
    return bits_of(x) == expect;
  }
}

template <class T>
host_array<T> filled(std::size_t n, double value) {
  host_array<T> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = from_double<T>(value);
  return a;
}

template <class T>
host_array<T> from_list(std::initializer_list<double> values) {
  host_array<T> a(values.size());
  std::size_t i = 0;
  for (double v : values) a[i++] = from_double<T>(v);
  return a;
}

// --- random inputs ---------------------------------------------------------------------------------

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(0x5eed2026u);
  return g;
}

/// A value of T drawn uniformly from [lo, hi] intersected with T's range (integers: whole numbers;
/// floating types: rounded to T). With `nonzero`, zero is never drawn (nor, for floating types,
/// values within 1e-3 of the range's width of zero). bool: a fair coin, or always true when lo > 0.
template <class T>
T random_value(double lo, double hi, bool nonzero = true) {
  auto& g = rng();
  if constexpr (std::is_same_v<T, bool>) {
    (void)hi;
    (void)nonzero;
    return lo > 0 ? true : std::bernoulli_distribution(0.5)(g);
  } else if constexpr (is_fp<T>) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (;;) {
      const T x = from_double<T>(d(g));
      const double v = to_double(x);
      if (v < lo || v > hi) continue;  // rounding to T may step outside the range
      if (nonzero && std::fabs(v) < 1e-3 * (hi - lo)) continue;
      return x;
    }
  } else {
    const double l = std::ceil(std::max(lo, lowest<T>())), h = std::floor(std::min(hi, highest<T>()));
    std::uniform_int_distribution<i64> d(static_cast<i64>(l), static_cast<i64>(h));
    for (;;) {
      const i64 v = d(g);
      if (nonzero && v == 0) continue;
      return static_cast<T>(v);
    }
  }
}

template <class T>
host_array<T> random_array(std::size_t n, double lo, double hi, bool nonzero = true) {
  host_array<T> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = random_value<T>(lo, hi, nonzero);
  return a;
}

/// A typical range of test inputs for T (no overflow of products for int32/int64).
template <class T>
void default_range(double& lo, double& hi) {
  if constexpr (is_fp<T>) {
    lo = -8;
    hi = 8;
  } else if constexpr (std::is_same_v<T, i8>) {
    lo = -100;
    hi = 100;
  } else if constexpr (std::is_same_v<T, u8>) {
    lo = 0;
    hi = 255;
  } else if constexpr (std::is_same_v<T, i32>) {
    lo = -40000;
    hi = 40000;
  } else if constexpr (std::is_same_v<T, i64>) {
    lo = -2e9;
    hi = 2e9;
  } else {
    lo = 0;
    hi = 1;
  }
}

template <class T>
host_array<T> random_default(std::size_t n, bool nonzero = true) {
  double lo = 0, hi = 0;
  default_range<T>(lo, hi);
  return random_array<T>(n, lo, hi, nonzero);
}

// --- comparison ------------------------------------------------------------------------------------

struct tolerance {
  double rel;
  double abs;
};

/// Tolerance of a result stored as T, compared with a reference rounded to T: float ~1e-6 relative
/// (a few units in the last place), half ~1e-3 and bfloat16 ~8e-3 (one unit in the last place:
/// they compute in float32 and round once, so they may round the other way from the reference);
/// the absolute part covers cancellation near zero. Integers and bool are compared exactly.
template <class T>
constexpr tolerance tolerance_of() {
  if constexpr (std::is_same_v<T, float>) return {1e-6, 1e-6};
  else if constexpr (std::is_same_v<T, double>) return {1e-12, 1e-12};
  else if constexpr (std::is_same_v<T, half>) return {1e-3, 1e-5};
  else if constexpr (std::is_same_v<T, bfloat16>) return {8e-3, 1e-5};
  else return {0, 0};
}

inline bool close(double got, double want, tolerance t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= t.rel * std::fabs(want) + t.abs;
}

/// Collects mismatches of one result array and reports the first few.
class mismatch_report {
 public:
  explicit mismatch_report(std::string what) : what_(std::move(what)) {}
  template <class G, class W>
  void add(std::size_t i, G got, W want) {
    if (count_++ < 8) {
      os_.precision(17);
      os_ << "\n  [" << i << "] got " << got << ", want " << want;
    }
  }
  std::size_t count() const noexcept { return count_; }
  std::string text() const { return what_ + ": " + std::to_string(count_) + " mismatch(es)" + os_.str(); }

 private:
  std::string what_;
  std::size_t count_ = 0;
  std::ostringstream os_;
};

/// Compares element i of `got` (a result of type Out) with want[i], a reference in double (floating
/// Out) or int64 (integer Out, wrapped to Out; bool Out: non-zero is true). Not a template on the
/// reference's source, so that each Out instantiates it once.
template <class Out>
void check_values(const std::string& what, const host_array<Out>& got, const std::vector<ref_t<Out>>& want,
                  tolerance tol = tolerance_of<Out>()) {
  mismatch_report rep(what + " (" + fusex::dtype_name<Out>() + ")");
  for (std::size_t i = 0; i < want.size(); ++i) {
    if constexpr (is_fp<Out>) {
      // The reference is rounded once, to Out (so that it overflows to infinity where Out does);
      // the tolerance then allows about one unit in the last place of Out, or a few of float32.
      double w = want[i];
      if constexpr (!std::is_same_v<Out, double>) w = to_double(from_double<Out>(w));
      const double g = to_double(got[i]);
      if (!close(g, w, tol)) rep.add(i, g, w);
    } else {
      const i64 w = wrap<Out>(want[i]);
      const i64 g = value_of(got[i]);
      if (g != w) rep.add(i, g, w);
    }
  }
  INFO(rep.text());
  CHECK(rep.count() == 0);
}

/// The same with the reference given as a function of the index.
template <class Out, class Want>
void check_values(const std::string& what, const host_array<Out>& got, std::size_t n, Want want,
                  tolerance tol = tolerance_of<Out>()) {
  std::vector<ref_t<Out>> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<ref_t<Out>>(want(i));
  check_values<Out>(what, got, w, tol);
}

/// Evaluates `expr` on the host into a fresh poisoned destination of its own value type and `shape`,
/// and compares every element with want(i) (row-major index).
template <class E, class Want>
void check_expr(const std::string& what, const E& expr, const fusex::shape_t& shape, Want want,
                tolerance tol = tolerance_of<typename E::value_type>()) {
  using Out = typename E::value_type;
  const auto n = static_cast<std::size_t>(fusex::numel(shape));
  host_array<Out> out(n);
  poison(out);
  fusex::host::eval(out.view(shape), expr);
  check_values<Out>(what, out, n, want, tol);
}

// --- reference semantics shared by the op tests ----------------------------------------------------

// Integer division truncates toward zero, as in C++; x / 0 is 0.
template <class R>
R div_ref(R a, R b) {
  if constexpr (std::is_floating_point_v<R>) return a / b;
  else return b == 0 ? R(0) : a / b;
}
// Remainder with the sign of the dividend (fmod for floating types); integer x % 0 is 0.
template <class R>
R mod_ref(R a, R b) {
  if constexpr (std::is_floating_point_v<R>) return std::fmod(a, b);
  else return b == 0 ? R(0) : a % b;
}
template <class R>
R min_ref(R a, R b) {
  if constexpr (std::is_floating_point_v<R>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  }
  return b < a ? b : a;
}
template <class R>
R max_ref(R a, R b) {
  if constexpr (std::is_floating_point_v<R>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  }
  return a < b ? b : a;
}
// Round to nearest, ties to even, written out.
inline double round_half_even(double x) {
  const double f = std::floor(x);
  const double d = x - f;
  if (d < 0.5) return f;
  if (d > 0.5) return f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// Zero in about 40% of the elements, otherwise a non-zero value of T's default range.
template <class T>
host_array<T> sparse_array(std::size_t n) {
  host_array<T> a = random_default<T>(n, true);
  for (std::size_t i = 0; i < n; ++i)
    if (random_value<bool>(0, 1) && random_value<bool>(0, 1)) a[i] = from_double<T>(0);
  for (std::size_t i = 0; i < n; i += 7) a[i] = from_double<T>(0);
  return a;
}

// --- exceptions ------------------------------------------------------------------------------------

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// Through the kernels' own planner and evaluators: evaluates `e` (planned for the float destination
/// `y` of shape [rows, cols], which must vectorise) work item by work item as the kernel would, with
/// its vector lanes, first whole and then split into 32-bit pieces (small limits stand in for 2^31),
/// and checks each element against `want(linear element of y)`.
template <class E, class Want>
void check_through_evaluators(const E& e, host_array<float>& y, i64 rows, i64 cols, const Want& want) {
  using namespace fusex::detail;
  const auto dst = std::make_tuple(y.view({rows, cols}));
  const auto pe = prepare(dst, e);
  REQUIRE(pe.layout.vector_width == 4);
  auto check_space = [&](const elementwise_layout& L, const std::vector<operand_layout>& ops, int V) {
    leaf_strides_source<std::uint32_t> src{ops.data() + 1, 0, 0};
    const auto ev = build_evaluator(e, src);
    const bool lazy = src.shares_lazy;
    // The elementwise kernel's trees (repeated leaves shared): with the leaves' roles tested, and
    // without where every repeated leaf is the first of its type's view (all_first).
    const bool all_first = leaves_all_first(ev);
    const auto lev = share_leaves<share_leaf_any>(ev);
    const auto fev = share_leaves<share_leaf_first>(ev);
    const auto p = make_elementwise_params<std::uint32_t>(L);
    const float* base = static_cast<const float*>(ops[0].data);
    for (std::uint32_t w = 0; w < static_cast<std::uint32_t>(L.work); ++w) {
      const auto c = V == 4 ? work_coord<4, fusex::max_rank>(p, w) : work_coord<1, fusex::max_rank>(p, w);
      std::int64_t off = 0;
      for (int d = 0; d < L.rank; ++d) off += static_cast<std::int64_t>(c.c[d]) * ops[0].s[d];
      const std::int64_t elem = (base - y.data()) + off;  // element of y
      // The evaluator tree with roles tested, the kernel's with its leaves shared, and (where the
      // launch would take them) that one's lazy forms.
      if (V == 4) {
        const auto v = load_scope<4>(ev, c, no_context{});
        const auto vl = load_scope<4>(lev, c, no_context{});
        const auto vz = load_scope<4, true>(lev, c, no_context{});
        const auto vf = load_scope<4, true>(fev, c, no_context{});
        for (int l = 0; l < 4; ++l) {
          CHECK(v.v[l] == want(elem + l));
          CHECK(vl.v[l] == want(elem + l));
          if (lazy) CHECK(vz.v[l] == want(elem + l));
          if (lazy && all_first) CHECK(vf.v[l] == want(elem + l));
        }
      } else {
        CHECK(load_scope<1>(ev, c, no_context{}).v[0] == want(elem));
        CHECK(load_scope<1>(lev, c, no_context{}).v[0] == want(elem));
        if (lazy) CHECK(load_scope<1, true>(lev, c, no_context{}).v[0] == want(elem));
        if (lazy && all_first) CHECK(load_scope<1, true>(fev, c, no_context{}).v[0] == want(elem));
      }
    }
  };
  std::vector<operand_layout> ops(pe.ops.begin(), pe.ops.end());
  check_space(pe.layout, ops, 4);
  for (i64 limit : {i64{16}, i64{24}, i64{40}}) {
    INFO("limit " << limit);
    const auto pieces = split_index32(pe.layout, ops.data(), static_cast<int>(ops.size()), limit);
    CHECK(pieces.size() > 1);
    i64 covered = 0;
    for (const auto& piece : pieces) {
      std::vector<operand_layout> po = ops;
      for (std::size_t i = 0; i < po.size(); ++i) po[i].data = piece.data[i];  // strides unchanged
      check_space(piece.layout, po, piece.layout.vector_width);
      covered += piece.layout.numel;
    }
    CHECK(covered == rows * cols);
  }
}

}  // namespace fxt

/// Every element type fusex supports.
#define FXT_ALL_DTYPES \
  float, double, fusex::half, fusex::bfloat16, std::int8_t, std::uint8_t, std::int32_t, std::int64_t, bool
#define FXT_FLOAT_DTYPES float, double, fusex::half, fusex::bfloat16
#define FXT_INT_DTYPES std::int8_t, std::uint8_t, std::int32_t, std::int64_t
