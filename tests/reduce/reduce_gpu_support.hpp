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
      case kind::sum: for (double e : v) a += e; break;
      case kind::prod: a = 1; for (double e : v) a *= e; break;
      case kind::mean: for (double e : v) a += e; a /= double(v.size()); break;
      case kind::max: a = -INFINITY; for (double e : v) a = std::isnan(e) || std::isnan(a) ? NAN : std::max(a, e); break;
      case kind::min: a = INFINITY; for (double e : v) a = std::isnan(e) || std::isnan(a) ? NAN : std::min(a, e); break;
      case kind::argmax: { std::size_t b = 0; for (std::size_t i = 1; i < v.size(); ++i) if (!std::isnan(v[b]) && (std::isnan(v[i]) || v[i] > v[b])) b = i; a = double(b); break; }
      case kind::argmin: { std::size_t b = 0; for (std::size_t i = 1; i < v.size(); ++i) if (!std::isnan(v[b]) && (std::isnan(v[i]) || v[i] < v[b])) b = i; a = double(b); break; }
      case kind::any: a = 0; for (double e : v) a = a || e != 0; break;
      case kind::all: a = 1; for (double e : v) a = a && e != 0; break;
      case kind::l1: for (double e : v) a += std::fabs(e); break;
      case kind::l2: for (double e : v) a += e * e; a = std::sqrt(a); break;
      case kind::linf: for (double e : v) a = std::max(a, std::fabs(e)); break;
      case kind::var: case kind::stddev: {
        double m = 0; for (double e : v) m += e; m /= double(v.size());
        for (double e : v) a += (e - m) * (e - m);
        a /= (double(v.size()) - correction);
        if (k == kind::stddev) a = std::sqrt(a);
        break;
      }
      case kind::lse: { double m = -INFINITY; for (double e : v) m = std::max(m, e); for (double e : v) a += std::exp(e - m); a = m + std::log(a); break; }
    }
    out[static_cast<std::size_t>(kk)] = a;
  }
  return out;
}

inline double identity(double v) { return v; }

// `pre` maps each input value to what the reduction sees (the expression's elementwise part).
template <class T, class MakeExpr>
void check_reduction(const char* name, const std::vector<std::int64_t>& shape, std::uint32_t mask, MakeExpr make,
                     kind k, double lo, double hi, double tol_scale = 1, double correction = 1,
                     double (*pre)(double) = identity) {
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
  auto ref = reference(xd, shape, mask, k, correction);
  for (auto& v : ref) v = round_to<R>(v);
  device_array<T> x(static_cast<std::size_t>(n));
  device_array<R> y(ref.size());
  x.upload(hx);
  y.poison();
  stream_guard sg;
  const auto e = make(fusex::make_view(x.data(), s));
  INFO("reduction " << name << " of " << fusex::dtype_name<T>() << " " << s.str() << " -> " << fusex::dtype_name<R>());
  INFO(fusex::explain(fusex::make_view(y.data(), e.shape()), e));
  run(sg.s, [&](cudaStream_t st) { fusex::eval(fusex::make_view(y.data(), e.shape()), e, st); });
  double tol = fusex::is_floating_v<R> ? tolerance<R>() * tol_scale : 0;
  if (fusex::is_floating_v<R> && !std::is_same_v<R, double>) tol = std::max(tol, 1e-5 * tol_scale);
  const std::string err = compare(y.download(), ref, tol);
  INFO(err);
  CHECK(err.empty());
}

// Composite check: y = f(x, residual, gamma, beta) over [rows, cols] of composite_data<T>, against
// composite_reference (composite_reference.hpp: the data, references and tolerances the host
// self-check test_tolerance_selfcheck_host.cpp proves able to fail). The one-kernel guarantee is
// checked on a capture that is never launched (its kernel nodes counted); the work itself runs
// once, through the run's launch path (fusex_test::run: eager, or captured and replayed).
template <class T, class Make>
void check_composite(composite_test::composite op, std::int64_t rows, std::int64_t cols, Make make,
                     const char* plan_says = nullptr) {
  INFO(composite_test::composite_name(op) << " [" << rows << ", " << cols << "] " << fusex::dtype_name<T>() << ", "
                                          << launch_path_name());
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
  const auto verdict = composite_test::check_composite_output<T>(composite_test::composite_reference(op, d), y.download());
  INFO(verdict.describe());
  CHECK(verdict.ok());
}

// "gpu: reductions over every axis set match a double reference", for input dtype T.
template <class T>
void every_axis_set() {
  const double ts = std::is_same_v<T, float> || std::is_same_v<T, double> ? 1 : 4;
  // {rows, cols} shapes exercise: last axis (row kernel), axis 0 (thread kernel), all axes (block kernel).
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{37, 129}, std::vector<std::int64_t>{5, 3, 1000}}) {
    const int r = static_cast<int>(shape.size());
    const std::uint32_t last = 1u << (r - 1), first = 1u, all = (1u << r) - 1;
    for (std::uint32_t mask : {last, first, all, r == 3 ? 5u : 1u}) {
      std::vector<int> av;
      for (int d = 0; d < r; ++d)
        if ((mask >> d) & 1) av.push_back(d);
      const fusex::axes ax(av);
      check_reduction<T>("sum", shape, mask, [&](auto x) { return fusex::sum(x, ax); }, kind::sum, -2, 2, ts * 4);
      check_reduction<T>("mean", shape, mask, [&](auto x) { return fusex::mean(x * 2, ax); }, kind::mean, -1, 1, ts * 4, 1,
                         [](double v) { return 2 * v; });
      check_reduction<T>("amax", shape, mask, [&](auto x) { return fusex::amax(x, ax); }, kind::max, -5, 5, ts);
      check_reduction<T>("amin", shape, mask, [&](auto x) { return fusex::amin(x, ax); }, kind::min, -5, 5, ts);
      check_reduction<T>("norm l2", shape, mask, [&](auto x) { return fusex::norm(x, ax); }, kind::l2, -2, 2, ts * 4);
      check_reduction<T>("norm l1", shape, mask, [&](auto x) { return fusex::norm(x, ax, fusex::norm_kind::l1); }, kind::l1, -2, 2, ts * 4);
      check_reduction<T>("norm max", shape, mask, [&](auto x) { return fusex::norm(x, ax, fusex::norm_kind::max); }, kind::linf, -2, 2, ts);
      check_reduction<T>("var", shape, mask, [&](auto x) { return fusex::var(x, ax); }, kind::var, -2, 2, ts * 8);
      check_reduction<T>("stddev pop", shape, mask, [&](auto x) { return fusex::stddev(x, ax, 0.0); }, kind::stddev, -2, 2, ts * 8, 0.0);
      check_reduction<T>("logsumexp", shape, mask, [&](auto x) { return fusex::logsumexp(x, ax); }, kind::lse, -3, 3, ts * 4);
      check_reduction<T>("argmax", shape, mask, [&](auto x) { return fusex::argmax(x, ax); }, kind::argmax, -100, 100);
      check_reduction<T>("argmin", shape, mask, [&](auto x) { return fusex::argmin(x, ax); }, kind::argmin, -100, 100);
      check_reduction<T>("any", shape, mask, [&](auto x) { return fusex::any(x > 1.9f, ax); }, kind::any, -2, 2, 1, 1,
                         [](double v) { return v > 1.9 ? 1.0 : 0.0; });
      check_reduction<T>("all", shape, mask, [&](auto x) { return fusex::all(x > -1.99f, ax); }, kind::all, -2, 2, 1, 1,
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
    check_composite<T>(composite::softmax, rows, cols, [](auto x, auto, auto g, auto) { return fusex::softmax(x) * g; },
                       cached);
    check_composite<T>(composite::layer_norm, rows, cols,
                       [](auto x, auto, auto g, auto b) { return fusex::layer_norm(x, g, b); }, cached);
    check_composite<T>(composite::rms_norm, rows, cols, [](auto x, auto, auto g, auto) { return fusex::rms_norm(x, g); },
                       cached);
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
