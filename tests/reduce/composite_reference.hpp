#pragma once
// The composites' test data (softmax, log_softmax, layer_norm, rms_norm with epilogues), their
// double-precision references, the error each op may have on the device, and the check that
// compares an output with them. Shared by the GPU test (check_composite in reduce_gpu_support.hpp)
// and the host self-check of these tolerances (test_tolerance_selfcheck_host.cpp), which feeds the
// same check outputs known to be wrong and requires a mismatch: host code only (compiles with g++).
//
// Tolerance of every composite, per element (T the output type, eps(T) its machine epsilon):
//   |got - ref| <= eps(T)/2 * |ref| + err * (1 + eps(T)/2) + denorm_min(T)/2
// ref: the exact result in double (not rounded to T). eps(T)/2 |ref|: the one rounding of the
// output to T (normal range); denorm_min(T)/2: the same below T's normal range. err: the bound of
// the device's float arithmetic (half and bfloat16 compute in float too), written next to each op
// in composite_reference() from the quantities of the row (its maximum, range, mean, variance).
#include "gpu_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace composite_test {

using namespace fusex_test;

/// The composites the GPU test evaluates, each with its epilogue.
enum class composite {
  softmax_res,      ///< softmax(x + residual) * gamma
  log_softmax_res,  ///< log_softmax(x + residual) + beta
  layer_norm_res,   ///< layer_norm(x + residual) * gamma + beta
  softmax,          ///< softmax(x) * gamma
  layer_norm,       ///< layer_norm(x) * gamma + beta
  rms_norm,         ///< rms_norm(x) * gamma
  rms_norm_res,     ///< rms_norm(x + residual) * gamma
};

inline const char* composite_name(composite c) {
  switch (c) {
    case composite::softmax_res: return "softmax(x + residual) * gamma";
    case composite::log_softmax_res: return "log_softmax(x + residual) + beta";
    case composite::layer_norm_res: return "layer_norm(x + residual) * gamma + beta";
    case composite::softmax: return "softmax(x) * gamma";
    case composite::layer_norm: return "layer_norm(x) * gamma + beta";
    case composite::rms_norm: return "rms_norm(x) * gamma";
    case composite::rms_norm_res: return "rms_norm(x + residual) * gamma";
  }
  return "?";
}

inline bool has_residual(composite c) {
  return c == composite::softmax_res || c == composite::log_softmax_res || c == composite::layer_norm_res ||
         c == composite::rms_norm_res;
}

/// The shapes the composites run at: 17 rows of each of these column counts.
inline constexpr std::int64_t composite_rows = 17;
inline constexpr std::int64_t composite_cols[] = {1, 7, 128, 1000, 4096, 8192, 16384};

/// The eps arguments of layer_norm and rms_norm (fusex's defaults, which the tests use).
inline constexpr double layer_norm_eps = 1e-5;
inline constexpr double rms_norm_eps = 1e-6;

/// Unit roundoff of the device's arithmetic for these ops: float (the compute type of float, half
/// and bfloat16 alike).
inline constexpr double u_f = 0x1p-24;

/// Roundings of the accumulator an element's contribution to a row reduction of n elements passes
/// through. The row kernel (reduce_plan.hpp) runs a row on a group of at most 256 threads
/// (row_max_threads); each thread folds, one after the other, at most 32 elements (row_cache_chunks
/// vectors, up to 32 at vector width 8) or ceil(n / 256) where the group is full; its chunks then
/// meet in a tree of at most 2 levels and the group's threads in one of at most 8. A tree over n
/// elements never has more than n levels. (Rows split across blocks, rule 2, only happen above 65536
/// columns with few rows: not among these shapes.)
inline double sum_depth(std::int64_t n) {
  const double per_thread = std::max(32.0, std::ceil(static_cast<double>(n) / 256.0));
  return std::min(static_cast<double>(n), per_thread + 10);
}

/// The inputs of the composites, as T (uploaded to the device) and as double: x in [-3, 3],
/// residual in [-1, 1], gamma in [0.5, 1.5], beta in [-0.5, 0.5], never zero, fixed seeds.
template <class T>
struct composite_data {
  std::int64_t rows = 0, cols = 0;
  host_vector<T> x, r, g, b;
  std::vector<double> xd, rd, gd, bd;
};

template <class T>
composite_data<T> make_composite_data(std::int64_t rows, std::int64_t cols) {
  composite_data<T> d;
  d.rows = rows;
  d.cols = cols;
  const auto n = static_cast<std::size_t>(rows * cols), c = static_cast<std::size_t>(cols);
  d.x = random_values<T>(n, -3, 3, 7);
  d.r = random_values<T>(n, -1, 1, 8);
  d.g = random_values<T>(c, 0.5, 1.5, 9);
  d.b = random_values<T>(c, -0.5, 0.5, 10);
  auto dbl = [](const host_vector<T>& h) {
    std::vector<double> v(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) v[i] = to_double(h[i]);
    return v;
  };
  d.xd = dbl(d.x);
  d.rd = dbl(d.r);
  d.gd = dbl(d.g);
  d.bd = dbl(d.b);
  return d;
}

/// What a composite's output should be: the exact values, the absolute error bound of the device's
/// float arithmetic per element, and for softmax the log of the output computed independently (from
/// log_softmax: (v - max) - log(sum) + log(gamma), not as the log of `value`).
struct composite_expected {
  std::vector<double> value, err, log_value;
};

/// A row's softmax quantities in double: maximum, minimum, the sum z of exp(v - max), log z.
struct softmax_row {
  double m = -INFINITY, lo = INFINITY, z = 0, log_z = 0;
};
inline softmax_row softmax_stats(const std::vector<double>& v) {
  softmax_row s;
  for (double e : v) s.m = std::max(s.m, e), s.lo = std::min(s.lo, e);
  for (double e : v) s.z += std::exp(e - s.m);
  s.log_z = std::log(s.z);
  return s;
}

/// A row's moments in double: the mean, the variance with `correction` (0: population, as
/// layer_norm; 1: sample, which the self-check uses as a wrong implementation), mean |v|, mean v^2.
struct moments_row {
  double mean = 0, var = 0, mean_abs = 0, mean_sq = 0;
};
inline moments_row moments(const std::vector<double>& v, double correction = 0) {
  moments_row m;
  const double n = static_cast<double>(v.size());
  for (double e : v) m.mean += e, m.mean_abs += std::fabs(e), m.mean_sq += e * e;
  m.mean /= n;
  m.mean_abs /= n;
  m.mean_sq /= n;
  double m2 = 0;
  for (double e : v) m2 += (e - m.mean) * (e - m.mean);
  m.var = m2 / (n - correction);  // n - 1 = 0 (one column, sample variance): 0 / 0, NaN
  return m;
}

/// The expected output of composite `c` over the data, per row. `variance_correction` 1 makes
/// layer_norm's reference use the sample variance: only the self-check's mutation asks for it.
template <class T>
composite_expected composite_reference(composite c, const composite_data<T>& d, double variance_correction = 0) {
  const std::int64_t rows = d.rows, cols = d.cols;
  const double u = u_f;
  const double depth = sum_depth(cols);
  const bool res = has_residual(c);
  composite_expected e;
  e.value.resize(static_cast<std::size_t>(rows * cols));
  e.err.resize(e.value.size());
  if (c == composite::softmax || c == composite::softmax_res) e.log_value.resize(e.value.size());
  std::vector<double> v(static_cast<std::size_t>(cols));
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::size_t o = static_cast<std::size_t>(row * cols);
    for (std::size_t j = 0; j < v.size(); ++j) v[j] = d.xd[o + j] + (res ? d.rd[o + j] : 0.0);
    // v = x + residual is computed in float on the device: off by u|v| (exact for bfloat16 data).
    auto v_err = [&](std::size_t j) { return res ? u * std::fabs(v[j]) : 0.0; };
    switch (c) {
      case composite::softmax:
      case composite::softmax_res:
      case composite::log_softmax_res: {
        const softmax_row s = softmax_stats(v);
        const double lse = s.m + s.log_z, range = s.m - s.lo;
        // The sum z of exp(v - max) (logsumexp): each term's ex2.approx is within 2 + 1.2|d| ulp
        // (ops.hpp, exp_shifted; |d| <= the row's range; an ulp is at most 2u of the value) after
        // the subtraction d = v - max (u|d|), and at each of the `depth` levels of the sum the
        // one-pass combine rounds two products and a sum (3u) and rescales a side by another
        // ex2.approx of a shift within the range. All terms are positive: relative errors,
        // (depth + 1) levels of 3u + 2u(2 + 1.2 range) + u range.
        const double ex2 = 2 * u * (2 + 1.2 * range) + u * range;
        const double z_rel = (depth + 1) * (3 * u + ex2);
        // v = x + residual rounded in float moves each term e^v by u|v|, relatively.
        double v_max_abs = 0;
        for (double a : v) v_max_abs = std::max(v_max_abs, std::fabs(a));
        const double terms_rel = res ? u * v_max_abs : 0.0;
        // lse = max + log z: the error of z becomes an absolute one, logf adds 1 ulp of log z
        // (<= 2u |log z|), the sum rounds once (u |lse|).
        const double lse_err =
            (z_rel + terms_rel) * (1 + z_rel + terms_rel) + 2 * u * std::fabs(s.log_z) + u * std::fabs(lse);
        for (std::size_t j = 0; j < v.size(); ++j) {
          const double t = v[j] - s.m - s.log_z;  // log_softmax, exact
          // The epilogue's t = v - lse in float: lse's error, v's, and the subtraction's (u|t|).
          const double t_err = lse_err + v_err(j) + u * std::fabs(t);
          if (c == composite::log_softmax_res) {
            // log_softmax + beta: one more rounding of the sum (u |result|): absolute errors.
            e.value[o + j] = t + d.bd[j];
            e.err[o + j] = t_err + u * (std::fabs(t) + std::fabs(d.bd[j]));
          } else {
            // softmax * gamma = expf(t) * gamma: t's error is a relative one of the output
            // (e^err - 1), expf adds 2 ulp (4u) and the product with gamma one rounding (u).
            const double out = std::exp(v[j] - s.m) / s.z * d.gd[j];
            e.value[o + j] = out;
            e.err[o + j] = std::expm1(t_err + 5 * u) * std::fabs(out);
            e.log_value[o + j] = t + std::log(d.gd[j]);
          }
        }
        break;
      }
      case composite::layer_norm:
      case composite::layer_norm_res: {
        const moments_row m = moments(v, variance_correction);
        const double sd = std::sqrt(m.var + layer_norm_eps), rs = 1 / sd;
        // The mean (Welford/Chan, or the two-level sum of x / 2^13): each combine rounds the
        // difference of the sides' means, its product with a weight and the sum (3u of the
        // sides' mean magnitudes), weighted in the row's mean by the combined part's share of the
        // row: at most 3u mean|v| per level over the whole row.
        // (With the residual, v's rounding in float adds u mean|v| to the mean and 2u of mean(v^2)
        // to the variance.)
        const double mean_err = (3 * (depth + 1) + (res ? 1 : 0)) * u * m.mean_abs;
        // The variance: each combine rounds m2_a + m2_b + delta^2 * count_a * weight (5
        // roundings of non-negative terms, summing to the combined part's m2) and feeds the
        // means' errors through delta: 6u of the row's m2 per level, and relative to the
        // variance mean(v^2) / var (a row far from zero mean loses precision in the differences).
        const double var_rel = (6 * (depth + 1) + (res ? 2 : 0)) * u * (m.var > 0 ? m.mean_sq / m.var : 1);
        // rsqrt(var + eps): half the variance's relative error, plus rsqrtf's 2 ulp (4u).
        const double rs_rel = 0.5 * var_rel * m.var / (m.var + layer_norm_eps) + 4 * u;
        for (std::size_t j = 0; j < v.size(); ++j) {
          const double dev = v[j] - m.mean, z = dev * rs;
          // z = (v - mean) * rsqrt: the mean's and v's errors through rsqrt, the subtraction's
          // rounding (u|dev|), rsqrt's relative error and the product's rounding (u|z|); then
          // * gamma (u) and + beta (u of the result's parts): absolute, since + beta may cancel.
          const double z_err = (mean_err + v_err(j) + u * std::fabs(dev)) * rs + (rs_rel + u) * std::fabs(z);
          const double zg = z * d.gd[j];
          e.value[o + j] = zg + d.bd[j];
          e.err[o + j] = z_err * d.gd[j] * (1 + 2 * u) + u * std::fabs(zg) + u * (std::fabs(zg) + std::fabs(d.bd[j]));
        }
        break;
      }
      case composite::rms_norm:
      case composite::rms_norm_res: {
        double ms = 0;
        for (double a : v) ms += a * a;
        ms /= static_cast<double>(v.size());
        // mean(v^2): positive terms, each squared with one rounding, summed over `depth` levels
        // and divided by n: relative (depth + 2)u; v's own rounding counts twice in v^2.
        const double ms_rel = (depth + 2) * u + (res ? 2 * u : 0);
        // v * rsqrt(ms + eps) * gamma: half of mean(v^2)'s error, rsqrtf's 2 ulp (4u), two
        // products (2u) and v's rounding: relative errors.
        const double rel = 0.5 * ms_rel + 6 * u + (res ? u : 0);
        const double r = 1 / std::sqrt(ms + rms_norm_eps);
        for (std::size_t j = 0; j < v.size(); ++j) {
          e.value[o + j] = v[j] * r * d.gd[j];
          e.err[o + j] = rel * std::fabs(e.value[o + j]);
        }
        break;
      }
    }
  }
  return e;
}

/// The linear comparison (every composite) and, for softmax, the comparison in log space.
struct composite_verdict {
  comparison linear, log;
  bool ok() const { return linear.ok() && log.ok(); }
  std::string describe() const {
    std::string s;
    if (!linear.ok()) s += std::to_string(linear.mismatches) + " mismatch(es):\n" + linear.first;
    if (!log.ok()) s += std::to_string(log.mismatches) + " mismatch(es) in log space:\n" + log.first;
    return s;
  }
};

/// Checks an output of T against a composite's expected values at the tolerance stated at the top
/// of this file; softmax also as log(got) against the log-space reference, at the same tolerance
/// carried into log space (|log got - log ref| <= -log(1 - tol / ref)): a probability far below 1
/// is checked to its own relative precision through an independent formula.
template <class T>
composite_verdict check_composite_output(const composite_expected& e, const host_vector<T>& got) {
  constexpr double half_eps = epsilon_of<T>() / 2, floor = denorm_min_of<T>() / 2;
  std::vector<double> abs(e.err.size());
  for (std::size_t i = 0; i < abs.size(); ++i) abs[i] = e.err[i] * (1 + half_eps);
  composite_verdict v;
  v.linear = compare_within(got, e.value, half_eps, floor, &abs);
  if (!e.log_value.empty() && got.size() == e.log_value.size()) {
    std::vector<double> lg(got.size()), lref(got.size()), ltol(got.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double g = to_double(got[i]), ref = std::exp(e.log_value[i]);
      const double tol = half_eps * ref + floor + abs[i];
      lg[i] = g > 0 ? std::log(g) : (g == 0 ? -INFINITY : NAN);
      lref[i] = e.log_value[i];
      // Where the tolerance reaches the value itself (a result that may round to 0), only the
      // upper side remains: compared as log(got) <= log(ref + tol), with got = 0 allowed.
      if (tol < ref) {
        ltol[i] = -std::log1p(-tol / ref);
      } else {
        lg[i] = std::max(lg[i], lref[i]);  // below the reference: within tolerance
        ltol[i] = std::log1p(tol / ref);
      }
    }
    // log(got) is a double of its own (not T): compared as doubles with the per-element tolerance.
    v.log = compare_within(lg, lref, 0, 0, &ltol);
  }
  return v;
}

}  // namespace composite_test
