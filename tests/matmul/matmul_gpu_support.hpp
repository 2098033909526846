#pragma once
// Helpers of the matmul GPU tests: device operands with their host copies, a double-precision
// reference product, and the tolerances per dtype.
//
// Tolerances (|got - ref| <= tol * max(1, |ref|), the reference computed in double from the same
// rounded inputs, inputs uniform in [-1, 1] without zeros):
//   float32 output   4e-6 (the store) + 2e-6 * sqrt(K) (float32 accumulation in any order)
//   float16 output   2e-3 (the store's rounding) + the same accumulation term
//   bfloat16 output  1.6e-2 + the same accumulation term
//   gelu_tanh through cuBLASLt's epilogue: + 2e-4 (its tanh is a fast approximation)
//   an epilogue cuBLASLt computes in part (route 3): + the output dtype's term once more (that
//   part is stored in the destination's dtype before the rest runs)
//   TF32 (opt-in) is not compared at float32 precision: 2e-3 * sqrt(K)
//
// Launch paths: every checked evaluation is submitted through fusex_test::run, so CTest runs the
// program eagerly and (test_matmul_gpu.graph) captured by fusex::graph_capture and replayed. Under
// graph_capture cuBLASLt's workspace comes from the capture's graph-private pool (64 MiB reserved;
// the chooser allows at most 32 MiB), so the captured call uses the same plan (and tolerances) as
// the eager one; only a raw cudaStreamBeginCapture gets the no-workspace plan.
#include <fusex/fusex.hpp>
#include <fusex/matmul.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace matmul_test {

using fusex_test::device_array;
using fusex_test::host_vector;

/// A device operand: host values, device copy, and a view (possibly strided) over it.
template <class T>
struct operand {
  host_vector<T> host;
  device_array<T> dev;
  fusex::view<T> v;
  operand(std::size_t n, double lo, double hi, unsigned seed)
      : host(fusex_test::random_values<T>(n, lo, hi, seed)), dev(n) {
    dev.upload(host);
  }
  /// The view over the device copy.
  fusex::view<T> on_device(fusex::shape_t s) { return v = fusex::view<T>(dev.data(), s); }
  fusex::view<T> on_device(fusex::shape_t s, fusex::strides_t st) { return v = fusex::view<T>(dev.data(), s, st); }
  /// The same layout over the host copy.
  fusex::view<T> on_host() const { return fusex::view<T>(const_cast<T*>(host.data()), v.shape(), v.strides()); }
};

template <class T>
double at(const fusex::view<T>& x, std::int64_t z, std::int64_t i, std::int64_t j) {
  const int r = x.rank();
  std::int64_t off = i * x.strides()[r - 2] + j * x.strides()[r - 1];
  if (r == 3 && x.shape()[0] > 1) off += z * x.strides()[0];
  return fusex::convert<double>(x.data()[off]);
}

/// The product of two host views in double: [batch, M, N] row-major.
struct product {
  std::int64_t b = 1, m = 0, n = 0, k = 0;
  std::vector<double> v;
  double operator()(std::int64_t z, std::int64_t i, std::int64_t j) const {
    return v[static_cast<std::size_t>((z * m + i) * n + j)];
  }
};
template <class T>
product reference_product(const fusex::view<T>& a, const fusex::view<T>& b) {
  product p;
  const int ra = a.rank(), rb = b.rank();
  p.m = a.shape()[ra - 2];
  p.n = b.shape()[rb - 1];
  p.k = a.shape()[ra - 1];
  const std::int64_t ba = ra == 3 ? a.shape()[0] : 1, bb = rb == 3 ? b.shape()[0] : 1;
  p.b = ba == 1 ? bb : ba;
  p.v.assign(static_cast<std::size_t>(p.b * p.m * p.n), 0.0);
  for (std::int64_t z = 0; z < p.b; ++z)
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (std::int64_t kk = 0; kk < p.k; ++kk) s += at(a, z, i, kk) * at(b, z, kk, j);
        p.v[static_cast<std::size_t>((z * p.m + i) * p.n + j)] = s;
      }
  return p;
}

template <class T>
double tolerance(std::int64_t k) {
  return fusex_test::tolerance<T>() + 2e-6 * std::sqrt(static_cast<double>(k > 0 ? k : 1));
}

/// The expected destination (in its memory order, for `dst_strides` over [batch?, M, N]) from
/// f(product value, batch, row, column), rounded to T.
template <class T>
std::vector<double> expected(const product& p, const fusex::view<T>& dst,
                             const std::function<double(double, std::int64_t, std::int64_t, std::int64_t)>& f) {
  std::int64_t span = 0;
  for (int d = 0; d < dst.rank(); ++d) span += (dst.shape()[d] - 1) * dst.strides()[d];
  std::vector<double> r(static_cast<std::size_t>(span + 1), std::nan(""));
  const int R = dst.rank();
  for (std::int64_t z = 0; z < p.b; ++z)
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        std::int64_t off = i * dst.strides()[R - 2] + j * dst.strides()[R - 1] + (R == 3 ? z * dst.strides()[0] : 0);
        r[static_cast<std::size_t>(off)] = fusex_test::round_to<T>(f(p(z, i, j), z, i, j));
      }
  return r;
}

/// Downloads `n` elements (poisoned ones stay NaN and match only NaN in the reference).
template <class T>
std::string check(const device_array<T>& d, const std::vector<double>& ref, double tol) {
  auto got = d.download();
  got.resize(ref.size());
  return fusex_test::compare(got, ref, tol);
}

inline double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
inline double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
inline double silu_ref(double x) { return x / (1 + std::exp(-x)); }

inline fusex::matmul_options path(fusex::matmul_path p) {
  fusex::matmul_options o;
  o.path = p;
  return o;
}

/// Captures `body` (enqueueing on `s`) into a graph and returns its number of kernel nodes.
template <class F>
std::size_t kernel_nodes_of(cudaStream_t s, F&& body) {
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    throw;
  }
  cudaGraph_t g = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  const std::size_t n = fusex_test::count_kernel_nodes(g);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  return n;
}

// The paths, linear operands with their reference product, one evaluation checked against the
// reference, and every epilogue form: shared by the test_matmul_*gpu.cu translation units.

inline const fusex::matmul_path all_paths[] = {fusex::matmul_path::automatic, fusex::matmul_path::cublaslt,
                                               fusex::matmul_path::fusex};

inline const char* path_name(fusex::matmul_path p) {
  return p == fusex::matmul_path::automatic ? "automatic" : (p == fusex::matmul_path::cublaslt ? "cublaslt" : "fusex");
}

// x [M, K], w [N, K] (linear's layout), bias [N], residual [M, N], column vector [M, 1].
template <class T>
struct linear_setup {
  std::int64_t M, N, K;
  operand<T> x, w, bias, res, col;
  product P;
  linear_setup(std::int64_t m, std::int64_t n, std::int64_t k, unsigned seed)
      : M(m),
        N(n),
        K(k),
        x(static_cast<std::size_t>(m * k), -1, 1, seed),
        w(static_cast<std::size_t>(n * k), -1, 1, seed + 1),
        bias(static_cast<std::size_t>(n), -1, 1, seed + 2),
        res(static_cast<std::size_t>(m * n), -1, 1, seed + 3),
        col(static_cast<std::size_t>(m), -1, 1, seed + 4) {
    x.on_device({M, K});
    w.on_device({N, K});
    bias.on_device({N});
    res.on_device({M, N});
    col.on_device({M, 1});
    P = reference_product(x.on_host(), w.on_host().t());
  }
  double b(std::int64_t j) const { return fusex::convert<double>(bias.host[static_cast<std::size_t>(j)]); }
  double r(std::int64_t i, std::int64_t j) const {
    return fusex::convert<double>(res.host[static_cast<std::size_t>(i * N + j)]);
  }
  double c(std::int64_t i) const { return fusex::convert<double>(col.host[static_cast<std::size_t>(i)]); }
};

using ref_fn = std::function<double(double, std::int64_t, std::int64_t, std::int64_t)>;

// Evaluates `e` into a poisoned [M, N] destination of Out (row-major unless `col_major`) and
// compares with the reference.
template <class Out, class E>
void check_eval(cudaStream_t s, const product& P, const E& e, const ref_fn& f, double tol, bool col_major = false) {
  device_array<Out> out(static_cast<std::size_t>(P.b * P.m * P.n));
  out.poison();
  fusex::view<Out> o =
      col_major ? fusex::view<Out>(out.data(), {P.m, P.n}, {1, P.m})
                : (P.b > 1 ? fusex::view<Out>(out.data(), {P.b, P.m, P.n}) : fusex::view<Out>(out.data(), {P.m, P.n}));
  INFO(fusex::explain(o, e));
  INFO("launch " << fusex_test::launch_path_name());
  fusex_test::run(s, [&](cudaStream_t st) { fusex::eval(o, e, st); });
  const std::string m = check(out, expected(P, o, f), tol);
  INFO(m);
  CHECK(m.empty());
}

/// Every epilogue form on every path for operand dtype T, against the reference (the heavy part of the
/// GPU suite: one translation unit per dtype, test_matmul_epilogue_*_gpu.cu).
template <class T>
void epilogue_forms(std::int64_t M, std::int64_t N, std::int64_t K) {
  fusex_test::stream_guard s;
  linear_setup<T> L(M, N, K, 100);
  const auto& P = L.P;
  auto x = L.x.v;
  auto w = L.w.v;
  auto bias = L.bias.v;
  auto res = L.res.v;
  const double tol = tolerance<T>(K);
  // Epilogues cuBLASLt computes in part (route 3): that part is rounded to T once more.
  const double tol_split = tol + fusex_test::tolerance<T>();
  for (auto p : all_paths) {
    INFO("path " << path_name(p) << ", " << fusex::dtype_name<T>() << " M N K " << M << " " << N << " " << K);
    const auto o = path(p);
    check_eval<T>(
        s.s, P, fusex::linear(x, w, o), [](double v, auto, auto, auto) { return v; }, tol);
    check_eval<T>(
        s.s, P, fusex::linear(x, w, bias, o), [&](double v, auto, auto, std::int64_t j) { return v + L.b(j); }, tol);
    check_eval<T>(
        s.s, P, fusex::relu(fusex::linear(x, w, bias, o)),
        [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); }, tol);
    check_eval<T>(
        s.s, P, fusex::gelu_tanh(fusex::linear(x, w, bias, o)),
        [&](double v, auto, auto, std::int64_t j) { return gelu_tanh_ref(v + L.b(j)); }, tol + 2e-4);
    check_eval<T>(
        s.s, P, fusex::gelu(fusex::linear(x, w, bias, o)),
        [&](double v, auto, auto, std::int64_t j) { return gelu_ref(v + L.b(j)); }, tol_split);
    check_eval<T>(
        s.s, P, fusex::silu(fusex::linear(x, w, bias, o)),
        [&](double v, auto, auto, std::int64_t j) { return silu_ref(v + L.b(j)); }, tol_split);
    check_eval<T>(
        s.s, P, 0.5f * fusex::linear(x, w, o) + res,
        [&](double v, auto, std::int64_t i, std::int64_t j) { return 0.5 * v + L.r(i, j); }, tol);
    check_eval<T>(
        s.s, P, fusex::relu(fusex::linear(x, w, bias, o) - 2.0f * res),
        [&](double v, auto, std::int64_t i, std::int64_t j) { return std::fmax(0.0, v + L.b(j) - 2 * L.r(i, j)); },
        tol);
    check_eval<T>(
        s.s, P, fusex::gelu_tanh(fusex::linear(x, w, bias, o)) * 0.5f + res,
        [&](double v, auto, std::int64_t i, std::int64_t j) { return gelu_tanh_ref(v + L.b(j)) * 0.5 + L.r(i, j); },
        tol_split + 2e-4);
    check_eval<T>(
        s.s, P, fusex::map([] __host__ __device__(float v) { return v * v - 1.0f; }, fusex::linear(x, w, o)),
        [](double v, auto, auto, auto) { return v * v - 1; }, tol_split * 4);
    // A bias along the rows: maps onto cuBLASLt with a column-major destination.
    check_eval<T>(
        s.s, P, fusex::relu(fusex::matmul(x, w.t(), o) + L.col.v),
        [&](double v, auto, std::int64_t i, auto) { return std::fmax(0.0, v + L.c(i)); }, tol, true);
    check_eval<T>(
        s.s, P, fusex::relu(fusex::matmul(x, w.t(), o) + L.col.v),
        [&](double v, auto, std::int64_t i, auto) { return std::fmax(0.0, v + L.c(i)); }, tol, false);
    // float32 destinations from any operand dtype (cuBLASLt writes float32 from float16/bfloat16).
    check_eval<float>(
        s.s, P, fusex::linear(x, w, o), [](double v, auto, auto, auto) { return v; }, tolerance<float>(K));
    // A float64 destination: cuBLASLt cannot write it, so GEMM + elementwise on the cuBLASLt path.
    check_eval<double>(
        s.s, P, fusex::relu(fusex::linear(x, w, bias, o)),
        [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); }, tolerance<float>(K));
    // In place: the residual is the destination.
    {
      device_array<T> inout(static_cast<std::size_t>(M * N));
      inout.upload(L.res.host);
      fusex::view<T> io(inout.data(), {M, N});
      fusex_test::run(s.s, [&](cudaStream_t st) { fusex::eval(io, fusex::linear(x, w, bias, o) + io, st); });
      const std::string m = check(
          inout,
          expected(P, io, [&](double v, auto, std::int64_t i, std::int64_t j) { return v + L.b(j) + L.r(i, j); }), tol);
      INFO(m);
      CHECK(m.empty());
    }
  }
}

}  // namespace matmul_test
