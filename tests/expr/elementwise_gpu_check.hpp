#pragma once
// Shared checks for the elementwise GPU tests: evaluate an expression of host-given inputs (random
// non-zero values, or explicit edge values) on the device into a poisoned output, through the run's
// launch path (fusex_test::run: eager, or captured into a graph and replayed), and compare with a
// reference computed on the host: in double (floating results, within the dtype's tolerance) or
// exactly in 64-bit integers (integer and bool results: full-range int64 values do not fit a double).
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusex_test {

/// The result type of `make_expr` applied to views of Ts.
template <class MakeExpr, class... Ts>
using expr_result_t =
    typename decltype(std::declval<MakeExpr&>()(fusex::make_view(static_cast<Ts*>(nullptr), {0})...))::value_type;

/// One input on the device: uploaded at construction, viewed as rank 1.
template <class T>
struct device_input {
  device_array<T> d;
  explicit device_input(const host_vector<T>& h) : d(h.size()) { d.upload(h); }
  fusex::view<T> view() const { return fusex::make_view(d.data(), {static_cast<std::int64_t>(d.size())}); }
};

/// Evaluates make_expr(views of the inputs) into a poisoned output on the device through the run's
/// launch path and returns the output. All inputs have one length.
template <class... Ts, class MakeExpr>
host_vector<expr_result_t<MakeExpr, Ts...>> evaluate_on_device(MakeExpr make_expr, const host_vector<Ts>&... in) {
  using R = expr_result_t<MakeExpr, Ts...>;
  const std::size_t sizes[] = {in.size()...};
  const std::size_t n = sizes[0];
  for (std::size_t s : sizes) REQUIRE(s == n);
  std::tuple<device_input<Ts>...> dev(in...);
  device_array<R> y(n);
  y.poison();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t s) {
    std::apply(
        [&](const auto&... d) {
          fusex::eval(fusex::make_view(y.data(), {static_cast<std::int64_t>(n)}), make_expr(d.view()...), s);
        },
        dev);
  });
  return y.download();
}

/// The largest finite value of a floating type, as a double.
template <class T>
double highest_finite() {
  if constexpr (std::is_same_v<T, fusex::half>) return std::ldexp(2 - std::ldexp(1.0, -10), 15);  // 65504
  else if constexpr (std::is_same_v<T, fusex::bfloat16>) return std::ldexp(2 - std::ldexp(1.0, -7), 127);
  else return static_cast<double>(std::numeric_limits<T>::max());
}

/// A double reference value as it is once stored as R: beyond the largest finite value of R by at
/// least half an ulp it is ±inf (round to nearest), else rounded to R. (For float32, converting such
/// a double with static_cast would be undefined behaviour.)
template <class R>
double stored_as(double v) {
  if constexpr (fusex::is_floating_v<R> && !std::is_same_v<R, double>) {
    constexpr int mantissa = std::is_same_v<R, fusex::half> ? 10 : (std::is_same_v<R, fusex::bfloat16> ? 7 : 23);
    const double overflow = highest_finite<R>() + std::ldexp(highest_finite<R>(), -(mantissa + 2));  // + half an ulp
    if (std::isfinite(v) && std::fabs(v) >= overflow) return std::copysign(std::numeric_limits<double>::infinity(), v);
  }
  return round_to<R>(v);
}

/// Evaluates make_expr over the given inputs on the device and compares with ref(inputs as double)
/// elementwise: within tolerance<R>() for floating results, exactly for others (the reference is
/// rounded to R first, overflowing to ±inf as a store to R would).
template <class... Ts, class MakeExpr, class Ref>
void check_values(const char* name, MakeExpr make_expr, Ref ref, const host_vector<Ts>&... in) {
  using R = expr_result_t<MakeExpr, Ts...>;
  using T0 = std::tuple_element_t<0, std::tuple<Ts...>>;
  INFO("op " << name << ", input " << fusex::dtype_name<T0>() << ", result " << fusex::dtype_name<R>() << ", launch "
             << launch_path_name());
  const auto got = evaluate_on_device<Ts...>(make_expr, in...);
  const std::size_t n = got.size();
  std::vector<double> expect(n);
  for (std::size_t i = 0; i < n; ++i) expect[i] = stored_as<R>(ref(to_double(in[i])...));
  const double tol = fusex::is_floating_v<R> ? tolerance<R>() : 0;
  const std::string err = compare(got, expect, tol);
  INFO(err);
  CHECK(err.empty());
}

/// The value of an integer or bool element as a 64-bit integer.
template <class T>
long long to_ll(T x) {
  return static_cast<long long>(x);
}
inline long long to_ll(boolean b) { return b.v ? 1 : 0; }

/// Evaluates make_expr over the given integer (or bool) inputs on the device and compares exactly
/// with ref(inputs as long long), which returns the expected value as long long.
template <class... Ts, class MakeExpr, class Ref>
void check_exact(const char* name, MakeExpr make_expr, Ref ref, const host_vector<Ts>&... in) {
  using R = expr_result_t<MakeExpr, Ts...>;
  static_assert(!fusex::is_floating_v<R>, "check_exact compares integer and bool results");
  using T0 = std::tuple_element_t<0, std::tuple<Ts...>>;
  INFO("op " << name << ", input " << fusex::dtype_name<T0>() << ", result " << fusex::dtype_name<R>() << ", launch "
             << launch_path_name());
  const auto got = evaluate_on_device<Ts...>(make_expr, in...);
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const long long want = ref(to_ll(in[i])...), g = to_ll(got[i]);
    if (g == want) continue;
    if (bad++ == 0) {
      std::string args;
      for (long long a : {to_ll(in[i])...}) args += (args.empty() ? "" : ", ") + std::to_string(a);
      first = "element " + std::to_string(i) + " (" + args + "): got " + std::to_string(g) + ", expected " +
              std::to_string(want);
    }
  }
  INFO(bad << " mismatches; first: " << first);
  CHECK(bad == 0);
}

// Evaluates make_expr(view of x) into y on the device and compares with ref(double) elementwise.
template <class T, class MakeExpr, class Ref>
void check_unary(const char* name, MakeExpr make_expr, Ref ref, double lo, double hi, std::size_t n = 4099) {
  check_values<T>(name, make_expr, ref, random_values<T>(n, lo, hi, 1234u + static_cast<unsigned>(n)));
}

template <class T, class MakeExpr, class Ref>
void check_binary(const char* name, MakeExpr make_expr, Ref ref, double lo, double hi, std::size_t n = 2053) {
  check_values<T, T>(name, make_expr, ref, random_values<T>(n, lo, hi, 77u), random_values<T>(n, lo, hi, 78u));
}

// Integer reference arithmetic in T's wrap-around semantics (for operands that fit a double).
template <class T>
double wrap(long long v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return static_cast<double>(static_cast<T>(v));
}

/// The value of integer type T whose two's-complement bits are the low 8 * sizeof(T) bits of u:
/// wrap-around written out bit by bit, independent of the library's own casts.
template <class T>
long long wrap_bits(std::uint64_t u) {
  constexpr int bits = static_cast<int>(8 * sizeof(T));
  const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << bits) - 1);
  u &= mask;
  if (std::is_signed_v<T> && ((u >> (bits - 1)) & 1u) != 0) return -static_cast<long long>(~u & mask) - 1;
  return static_cast<long long>(u);
}
/// The two's-complement bits of v (a conversion to unsigned is defined modulo 2^64).
inline std::uint64_t bits_of(long long v) { return static_cast<std::uint64_t>(v); }

/// n uniformly random values over T's whole range (zeros included).
template <class T>
host_vector<T> full_range_values(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<long long> d(static_cast<long long>(std::numeric_limits<T>::min()),
                                             static_cast<long long>(std::numeric_limits<T>::max()));
  host_vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

/// The integer edge values of T: its minimum and maximum and their neighbours, -2 .. 2, half the
/// extremes (the signed ones only where T is signed).
template <class T>
std::vector<long long> integer_edges() {
  const long long lo = static_cast<long long>(std::numeric_limits<T>::min());
  const long long hi = static_cast<long long>(std::numeric_limits<T>::max());
  std::vector<long long> out;
  for (long long v : {lo, lo + 1, lo / 2, -2LL, -1LL, 0LL, 1LL, 2LL, hi / 2, hi - 1, hi}) {
    bool seen = false;
    for (long long o : out) seen = seen || o == v;
    if (!seen && v >= lo && v <= hi) out.push_back(v);
  }
  return out;
}

/// Every pair of `xs` x `ys` (first operand, second operand), then `random` pairs of full-range
/// random values: the inputs of a binary integer check.
template <class T>
std::pair<host_vector<T>, host_vector<T>> pairs_then_random(const std::vector<long long>& xs,
                                                            const std::vector<long long>& ys, std::size_t random,
                                                            unsigned seed) {
  host_vector<T> a, b;
  for (long long x : xs)
    for (long long y : ys) {
      a.push_back(static_cast<T>(x));
      b.push_back(static_cast<T>(y));
    }
  const auto ra = full_range_values<T>(random, seed), rb = full_range_values<T>(random, seed + 1);
  a.insert(a.end(), ra.begin(), ra.end());
  b.insert(b.end(), rb.begin(), rb.end());
  return {a, b};
}

}  // namespace fusex_test
