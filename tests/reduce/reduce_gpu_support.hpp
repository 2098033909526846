#pragma once
// Helpers of the reduction GPU tests (test_reduce_*gpu.cu): a double-precision reference written
// with plain loops, the reduction and composite checks (device result into a poisoned destination,
// compared with the reference), and the bodies of the test cases that are instantiated per dtype
// in several translation units so that they compile in parallel.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "composite_reference.hpp"
#include "gpu_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace reduce_gpu_test {

using namespace fusex_test;

enum class kind { sum, prod, mean, max, min, argmax, argmin, any, all, l1, l2, linf, var, stddev, lse };

// Reference reduction over the axes in `mask`, in double, plain loops; results in row-major order
// of the kept dimensions.
inline std::vector<double> reference(const std::vector<double>& x, const std::vector<std::int64_t>& shape,
                                     std::uint32_t mask, kind k, double correction = 1) {
  const int r = static_cast<int>(shape.size());
  std::vector<std::int64_t> stride(r, 1);
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  std::int64_t K = 1, N = 1;
  for (int d = 0; d < r; ++d) ((mask >> d) & 1 ? N : K) *= shape[d];
  std::vector<double> out(static_cast<std::size_t>(K));
  for (std::int64_t kk = 0; kk < K; ++kk) {
    std::int64_t base = 0, rem = kk;
    for (int d = r - 1; d >= 0; --d)
      if (!((mask >> d) & 1)) {
        base += (rem % shape[d]) * stride[d];
        rem /= shape[d];
      }
    std::vector<double> v;
    for (std::int64_t n = 0; n < N; ++n) {
      std::int64_t off = base, rn = n;
      for (int d = r - 1; d >= 0; --d)
        if ((mask >> d) & 1) {
          off += (rn % shape[d]) * stride[d];
          rn /= shape[d];
        }
      v.push_back(x[static_cast<std::size_t>(off)]);
    }
    double a = 0;
    switch (k) {
      case kind::sum:
        for (double e : v) a += e;
        break;
      case kind::prod:
        a = 1;
        for (double e : v) a *= e;
        break;
      case kind::mean:
        for (double e : v) a += e;
        a /= double(v.size());
        break;
      case kind::max:
        a = -INFINITY;
        for (double e : v) a = std::isnan(e) || std::isnan(a) ? NAN : std::max(a, e);
        break;
      case kind::min:
        a = INFINITY;
        for (double e : v) a = std::isnan(e) || std::isnan(a) ? NAN : std::min(a, e);
        break;
      case kind::argmax: {
        std::size_t b = 0;
        for (std::size_t i = 1; i < v.size(); ++i)
          if (!std::isnan(v[b]) && (std::isnan(v[i]) || v[i] > v[b])) b = i;
        a = double(b);
        break;
      }
      case kind::argmin: {
        std::size_t b = 0;
        for (std::size_t i = 1; i < v.size(); ++i)
          if (!std::isnan(v[b]) && (std::isnan(v[i]) || v[i] < v[b])) b = i;
        a = double(b);
        break;
      }
      case kind::any:
        a = 0;
        for (double e : v) a = a || e != 0;
        break;
      case kind::all:
        a = 1;
        for (double e : v) a = a && e != 0;
        break;
      case kind::l1:
        for (double e : v) a += std::fabs(e);
        break;
      case kind::l2:
        for (double e : v) a += e * e;
        a = std::sqrt(a);
        break;
      case kind::linf:
        for (double e : v) a = std::max(a, std::fabs(e));
        break;
      case kind::var:
      case kind::stddev: {
        double m = 0;
        for (double e : v) m += e;
        m /= double(v.size());
        for (double e : v) a += (e - m) * (e - m);
        a /= (double(v.size()) - correction);
        if (k == kind::stddev) a = std::sqrt(a);
        break;
      }
      case kind::lse: {
        double m = -INFINITY;
        for (double e : v) m = std::max(m, e);
        for (double e : v) a += std::exp(e - m);
        a = m + std::log(a);
        break;
      }
    }
    out[static_cast<std::size_t>(kk)] = a;
  }
  return out;
}

inline double identity(double v) { return v; }

// Unit roundoff of the type fusex accumulates a reduction of T in (docs/reductions.md,
// "Accumulation"): float64 for double inputs; float32 for float, float16 and bfloat16 inputs and for
// the means, norms, var/std and logsumexp of integers. 0 where nothing is rounded: integer sums and
// products (int64), and max, min, the norm max, argmax, argmin, any and all, whose result is one of
// the inputs or a count.
template <class T>
double accumulation_u(kind k) {
  const bool selects = k == kind::max || k == kind::min || k == kind::linf || k == kind::argmax || k == kind::argmin ||
                       k == kind::any || k == kind::all;
  if (selects) return 0;
  if constexpr (std::is_same_v<T, double>) return 0x1p-53;
  else if constexpr (fusex::is_integer_v<T>) return k == kind::sum || k == kind::prod ? 0 : 0x1p-24;
  else return 0x1p-24;
}

// A bound on |computed - exact| for one output, before it is rounded to the result type, from the
// values `v` it reduces (after `pre`) and the exact result `ref`. The forward error bounds of
// summation and its relatives (Higham, Accuracy and Stability of Numerical Algorithms, ch. 4), with
// g = (ceil(log2 n) + 32) u: the bound of a tree of partial sums over per-thread runs of at most 32
// elements, how fusex's row and block kernels reduce. Its column kernels run longer sequential
// runs, for which g is not a proof, but rounding errors over random data grow like sqrt(run) and
// stay far below it. Each bound is doubled (k = 2) for the rounding of the final division, square
// root or addition and of the bound's own terms. `fast_exp`: the relative error of the device's
// exp on the float path (ex2.approx, 2^-22 relative, plus the rounding of (x - max) log2 e).
inline double reduction_error_bound(kind k, const std::vector<double>& v, double ref, double u, double correction,
                                    double fast_exp) {
  if (u == 0 || v.empty()) return 0;
  const double n = static_cast<double>(v.size());
  const double g = (std::ceil(std::log2(n)) + 32) * u;
  double sum_abs = 0, sum_sq = 0, max_abs = 0;
  for (double e : v) {
    sum_abs += std::fabs(e);
    sum_sq += e * e;
    max_abs = std::max(max_abs, std::fabs(e));
  }
  const double a = std::fabs(ref);
  double b = 0;
  switch (k) {
    case kind::sum:
    case kind::l1: b = g * sum_abs; break;                                     // |sum error| <= g sum|x|
    case kind::mean: b = g * sum_abs / n + u * a; break;                       // the sum's, / n, + the division
    case kind::prod: b = (n + 1) * u * a; break;                               // n - 1 products, each u relative
    case kind::l2: b = a > 0 ? (g + u) * sum_sq / (2 * a) + u * a : 0; break;  // sqrt halves the sum's relative error
    case kind::var:
    case kind::stddev: {
      // Welford's updates (and the merges of partial results) also round the running mean, whose
      // error then enters every later term: no bound of the tree form holds for long runs. Over
      // random data these errors add like a random walk, sqrt(n) u; gw allows 8 times that. The
      // error scales with sum x^2, which covers the cancellation of a mean far from 0.
      const double gw = std::max(g, 8 * std::sqrt(n) * u);
      const double var_bound = (gw + 4 * u) * sum_sq / (n - correction);
      b = k == kind::var ? var_bound : (a > 0 ? var_bound / (2 * a) + u * a : std::sqrt(var_bound));
      break;
    }
    case kind::lse: {
      // log(S) moves by S's relative error. The running (max, sum) pairs rescale the sum at every new
      // maximum, each rescale an exp and a multiply: as for var, a random walk, sqrt(n) u, allowed 8x.
      const double gw = std::max(g, 8 * std::sqrt(n) * u);
      b = gw + fast_exp + 8 * u * (1 + max_abs) + 2 * u * a;
      break;
    }
    default: b = 0; break;
  }
  return 2 * b;
}

// Reduces x (shape, axes in `mask`) on the device through the run's launch path into a poisoned
// destination and compares with the double reference of the values `pre` maps x to: exactly for the
// results that are one of the inputs or a count, else |got - ref| <= eps(R)/2 |ref| (rounding to
// the result type R) + the accumulation bound above (per output) + R's smallest subnormal.
template <class T, class MakeExpr>
void check_reduction(const char* name, const std::vector<std::int64_t>& shape, std::uint32_t mask, MakeExpr make,
                     kind k, double lo, double hi, double correction = 1, double (*pre)(double) = identity) {
  fusex::shape_t s;
  std::int64_t n = 1;
  for (auto e : shape) {
    s.push_back(e);
    n *= e;
  }
  using R = typename decltype(make(fusex::make_view(static_cast<T*>(nullptr), fusex::shape_t{0})))::value_type;
  const auto hx = random_values<T>(static_cast<std::size_t>(n), lo, hi, 4242u + static_cast<unsigned>(n));
  std::vector<double> xd(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) xd[i] = pre(to_double(hx[i]));
  const auto ref = reference(xd, shape, mask, k, correction);
  // The values each output reduces, in the reference's order, for the per-output bounds.
  std::vector<double> bound(ref.size(), 0.0);
  const double u = accumulation_u<T>(k);
  if (u > 0) {
    const int r = static_cast<int>(shape.size());
    std::vector<std::int64_t> kept;
    for (int d = 0; d < r; ++d)
      if (!((mask >> d) & 1)) kept.push_back(shape[static_cast<std::size_t>(d)]);
    std::vector<std::vector<double>> groups(ref.size());
    std::vector<std::int64_t> idx(static_cast<std::size_t>(r), 0);
    for (std::size_t flat = 0; flat < xd.size(); ++flat) {
      std::size_t out = 0;
      for (int d = 0; d < r; ++d)
        if (!((mask >> d) & 1))
          out = out * static_cast<std::size_t>(shape[static_cast<std::size_t>(d)]) +
                static_cast<std::size_t>(idx[static_cast<std::size_t>(d)]);
      groups[out].push_back(xd[flat]);
      for (int d = r - 1; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < shape[static_cast<std::size_t>(d)]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
    const double fast_exp = std::is_same_v<T, double> ? 0.0 : 0x1p-22 + 0x1p-21;
    for (std::size_t i = 0; i < ref.size(); ++i)
      bound[i] = reduction_error_bound(k, groups[i], ref[i], u, correction, fast_exp) * (1 + epsilon_of<R>());
  }
  device_array<T> x(static_cast<std::size_t>(n));
  device_array<R> y(ref.size());
  x.upload(hx);
  y.poison();
  stream_guard sg;
  const auto e = make(fusex::make_view(x.data(), s));
  INFO("reduction " << name << " of " << fusex::dtype_name<T>() << " " << s.str() << " -> " << fusex::dtype_name<R>()
                    << ", " << launch_path_name());
  INFO(fusex::explain(fusex::make_view(y.data(), e.shape()), e));
  run(sg.s, [&](cudaStream_t st) { fusex::eval(fusex::make_view(y.data(), e.shape()), e, st); });
  const bool floating = fusex::is_floating_v<R>;
  // Integer and bool results, and results of selecting reductions: exact (rounding a selected
  // input to R is exact, since R is T for those).
  const comparison c = compare_within(y.download(), ref, floating ? epsilon_of<R>() / 2 : 0.0,
                                      floating ? denorm_min_of<R>() : 0.0, &bound);
  INFO(c.first << "worst |got - ref| / tolerance " << c.worst_ratio << " at output " << c.worst);
  CHECK(c.ok());
}

// Composite check: y = f(x, residual, gamma, beta) over [rows, cols] of composite_data<T>, against
// composite_reference (composite_reference.hpp: the data, references and tolerances the host
// self-check test_tolerance_selfcheck_host.cpp proves able to fail). The one-kernel guarantee is
// checked on a capture that is never launched (its kernel nodes counted); the work itself runs
// once, through the run's launch path (fusex_test::run: eager, or captured and replayed).
template <class T, class Make>
void check_composite(composite_test::composite op, std::int64_t rows, std::int64_t cols, Make make,
                     const char* plan_says = nullptr) {
  INFO(composite_test::composite_name(op)
       << " [" << rows << ", " << cols << "] " << fusex::dtype_name<T>() << ", " << launch_path_name());
  const auto d = composite_test::make_composite_data<T>(rows, cols);
  device_array<T> x(rows * cols), res(rows * cols), g(cols), b(cols), y(rows * cols);
  x.upload(d.x);
  res.upload(d.r);
  g.upload(d.g);
  b.upload(d.b);
  y.poison();
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {rows, cols});
  auto rv = fusex::make_view(res.data(), {rows, cols});
  auto gv = fusex::make_view(g.data(), {cols});
  auto bv = fusex::make_view(b.data(), {cols});
  auto yv = fusex::make_view(y.data(), {rows, cols});
  const auto e = make(xv, rv, gv, bv);
  const std::string plan = fusex::explain(yv, e);
  INFO(plan);
  CHECK(plan.find("1 kernel (row reduction") != std::string::npos);
  if (plan_says != nullptr) CHECK(plan.find(plan_says) != std::string::npos);
  {
    cudaGraph_t graph = nullptr;
    FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
    try {
      fusex::eval(yv, e, sg.s);
    } catch (...) {
      cudaStreamEndCapture(sg.s, &graph);  // ends the capture so that the stream stays usable
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &graph));
    CHECK(count_kernel_nodes(graph) == 1);
    FUSEX_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  run(sg.s, [&](cudaStream_t s) { fusex::eval(yv, e, s); });
  const auto verdict =
      composite_test::check_composite_output<T>(composite_test::composite_reference(op, d), y.download());
  INFO(verdict.describe());
  CHECK(verdict.ok());
}

// "gpu: reductions over every axis set match a double reference", for input dtype T.
template <class T>
void every_axis_set() {
  // {rows, cols} shapes exercise: last axis (row kernel), axis 0 (thread kernel), all axes (block kernel).
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{37, 129}, std::vector<std::int64_t>{5, 3, 1000}}) {
    const int r = static_cast<int>(shape.size());
    const std::uint32_t last = 1u << (r - 1), first = 1u, all = (1u << r) - 1;
    for (std::uint32_t mask : {last, first, all, r == 3 ? 5u : 1u}) {
      std::vector<int> av;
      for (int d = 0; d < r; ++d)
        if ((mask >> d) & 1) av.push_back(d);
      const fusex::axes ax(av);
      check_reduction<T>(
          "sum", shape, mask, [&](auto x) { return fusex::sum(x, ax); }, kind::sum, -2, 2);
      check_reduction<T>(
          "mean", shape, mask, [&](auto x) { return fusex::mean(x * 2, ax); }, kind::mean, -1, 1, 1,
          [](double v) { return 2 * v; });
      check_reduction<T>(
          "amax", shape, mask, [&](auto x) { return fusex::amax(x, ax); }, kind::max, -5, 5);
      check_reduction<T>(
          "amin", shape, mask, [&](auto x) { return fusex::amin(x, ax); }, kind::min, -5, 5);
      check_reduction<T>(
          "norm l2", shape, mask, [&](auto x) { return fusex::norm(x, ax); }, kind::l2, -2, 2);
      check_reduction<T>(
          "norm l1", shape, mask, [&](auto x) { return fusex::norm(x, ax, fusex::norm_kind::l1); }, kind::l1, -2, 2);
      check_reduction<T>(
          "norm max", shape, mask, [&](auto x) { return fusex::norm(x, ax, fusex::norm_kind::max); }, kind::linf, -2,
          2);
      check_reduction<T>(
          "var", shape, mask, [&](auto x) { return fusex::var(x, ax); }, kind::var, -2, 2);
      check_reduction<T>(
          "stddev pop", shape, mask, [&](auto x) { return fusex::stddev(x, ax, 0.0); }, kind::stddev, -2, 2, 0.0);
      check_reduction<T>(
          "logsumexp", shape, mask, [&](auto x) { return fusex::logsumexp(x, ax); }, kind::lse, -3, 3);
      check_reduction<T>(
          "argmax", shape, mask, [&](auto x) { return fusex::argmax(x, ax); }, kind::argmax, -100, 100);
      check_reduction<T>(
          "argmin", shape, mask, [&](auto x) { return fusex::argmin(x, ax); }, kind::argmin, -100, 100);
      check_reduction<T>(
          "any", shape, mask, [&](auto x) { return fusex::any(x > 1.9f, ax); }, kind::any, -2, 2, 1,
          [](double v) { return v > 1.9 ? 1.0 : 0.0; });
      check_reduction<T>(
          "all", shape, mask, [&](auto x) { return fusex::all(x > -1.99f, ax); }, kind::all, -2, 2, 1,
          [](double v) { return v > -1.99 ? 1.0 : 0.0; });
    }
  }
}

/// Row-kernel launch shapes for a scope (the tests' shapes are small, so the automatic choices
/// give them one vector per thread and blocks of several rows): row_spread(true) runs one row
/// per block; row_vectors(4) sizes groups for four vectors per thread, as larger plans have,
/// which covers the cached path's chunks past the end of the row (e.g. 1000 columns: 64 threads x
/// 4 float4, the last chunk partly outside).
struct row_spread : scoped_setting<bool> {
  explicit row_spread(bool on) : scoped_setting<bool>(fusex::detail::row_tuning_state().spread_small, on) {}
};
struct row_vectors : scoped_setting<int> {
  explicit row_vectors(int n) : scoped_setting<int>(fusex::detail::row_tuning_state().vectors_per_thread, n) {}
};

// "gpu: softmax, log_softmax, layer_norm, rms_norm with epilogues are one kernel", for dtype T, at
// the shapes of composite_reference.hpp (the tolerances are there, with their reasons).
template <class T>
void composites() {
  using composite_test::composite;
  for (const std::int64_t cols : composite_test::composite_cols) {
    const std::int64_t rows = composite_test::composite_rows;
    check_composite<T>(composite::softmax_res, rows, cols,
                       [](auto x, auto r, auto g, auto) { return fusex::softmax(x + r) * g; });
    check_composite<T>(composite::log_softmax_res, rows, cols,
                       [](auto x, auto r, auto, auto b) { return fusex::log_softmax(x + r) + b; });
    check_composite<T>(composite::layer_norm_res, rows, cols,
                       [](auto x, auto r, auto g, auto b) { return fusex::layer_norm(x + r, g, b); });
    // Without the residual: the forms the static path runs (the roles the structure predicts)
    // wherever the row is kept in registers (vectorised rows of up to 4096 columns; 8192 for
    // 2-byte types, which keep 32 elements per thread).
    const std::int64_t width = std::int64_t{16} / std::int64_t{sizeof(T)};
    const std::int64_t longest_cached = sizeof(T) == 2 ? 8192 : 4096;
    const char* cached = cols % width == 0 && cols > 1 && cols <= longest_cached ? "static path" : nullptr;
    check_composite<T>(
        composite::softmax, rows, cols, [](auto x, auto, auto g, auto) { return fusex::softmax(x) * g; }, cached);
    check_composite<T>(
        composite::layer_norm, rows, cols, [](auto x, auto, auto g, auto b) { return fusex::layer_norm(x, g, b); },
        cached);
    check_composite<T>(
        composite::rms_norm, rows, cols, [](auto x, auto, auto g, auto) { return fusex::rms_norm(x, g); }, cached);
    check_composite<T>(composite::rms_norm_res, rows, cols,
                       [](auto x, auto r, auto g, auto) { return fusex::rms_norm(x + r, g); });
  }
}

// The body of "gpu: softmax, log_softmax, layer_norm, rms_norm with epilogues are one kernel" for
// dtype T, under three launch shapes of the row kernel (one translation unit per dtype group).
template <class T>
void composites_in_every_launch_shape() {
  SECTION("several rows per block") {
    const row_spread spread(false);
    composites<T>();
  }
  SECTION("few rows spread one per block") {
    const row_spread spread(true);
    composites<T>();
  }
  SECTION("four vectors per thread (the larger plans' group size)") {
    const row_vectors four(4);
    composites<T>();
  }
}

}  // namespace reduce_gpu_test
