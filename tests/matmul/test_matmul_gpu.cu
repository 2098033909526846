// GPU tests of fusex matmul: every epilogue form on every path (one cuBLASLt call, GEMM +
// elementwise kernel, the fusex kernel), dtypes, transposed / column-major / batched operands, odd
// shapes, K = 0, and bad input, each against a double-precision host reference with poisoned
// outputs. Tolerances: matmul_gpu_support.hpp. (Small-M path, chains and graph node counts:
// test_matmul_small_m_gpu.cu.)
#include "matmul_gpu_support.hpp"

#include <array>
#include <cstdint>
#include <string>

using namespace matmul_test;
using fusex::bfloat16;
using fusex::half;

namespace {

const fusex::matmul_path all_paths[] = {fusex::matmul_path::automatic, fusex::matmul_path::cublaslt,
                                        fusex::matmul_path::fusex};

const char* path_name(fusex::matmul_path p) {
  return p == fusex::matmul_path::automatic ? "automatic" : (p == fusex::matmul_path::cublaslt ? "cublaslt" : "fusex");
}

// x [M, K], w [N, K] (linear's layout), bias [N], residual [M, N], column vector [M, 1].
template <class T>
struct linear_setup {
  std::int64_t M, N, K;
  operand<T> x, w, bias, res, col;
  product P;
  linear_setup(std::int64_t m, std::int64_t n, std::int64_t k, unsigned seed)
      : M(m), N(n), K(k), x(static_cast<std::size_t>(m * k), -1, 1, seed), w(static_cast<std::size_t>(n * k), -1, 1, seed + 1),
        bias(static_cast<std::size_t>(n), -1, 1, seed + 2), res(static_cast<std::size_t>(m * n), -1, 1, seed + 3),
        col(static_cast<std::size_t>(m), -1, 1, seed + 4) {
    x.on_device({M, K});
    w.on_device({N, K});
    bias.on_device({N});
    res.on_device({M, N});
    col.on_device({M, 1});
    P = reference_product(x.on_host(), w.on_host().t());
  }
  double b(std::int64_t j) const { return fusex::convert<double>(bias.host[static_cast<std::size_t>(j)]); }
  double r(std::int64_t i, std::int64_t j) const { return fusex::convert<double>(res.host[static_cast<std::size_t>(i * N + j)]); }
  double c(std::int64_t i) const { return fusex::convert<double>(col.host[static_cast<std::size_t>(i)]); }
};

using ref_fn = std::function<double(double, std::int64_t, std::int64_t, std::int64_t)>;

// Evaluates `e` into a poisoned [M, N] destination of Out (row-major unless `col_major`) and
// compares with the reference.
template <class Out, class E>
void check_eval(cudaStream_t s, const product& P, const E& e, const ref_fn& f, double tol, bool col_major = false) {
  device_array<Out> out(static_cast<std::size_t>(P.b * P.m * P.n));
  out.poison();
  fusex::view<Out> o = col_major ? fusex::view<Out>(out.data(), {P.m, P.n}, {1, P.m})
                                 : (P.b > 1 ? fusex::view<Out>(out.data(), {P.b, P.m, P.n})
                                            : fusex::view<Out>(out.data(), {P.m, P.n}));
  INFO(fusex::explain(o, e));
  fusex::eval(o, e, s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::string m = check(out, expected(P, o, f), tol);
  INFO(m);
  CHECK(m.empty());
}

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
  for (auto p : all_paths) {
    INFO("path " << path_name(p) << ", " << fusex::dtype_name<T>() << " M N K " << M << " " << N << " " << K);
    const auto o = path(p);
    check_eval<T>(s.s, P, fusex::linear(x, w, o), [](double v, auto, auto, auto) { return v; }, tol);
    check_eval<T>(s.s, P, fusex::linear(x, w, bias, o), [&](double v, auto, auto, std::int64_t j) { return v + L.b(j); }, tol);
    check_eval<T>(s.s, P, fusex::relu(fusex::linear(x, w, bias, o)),
                  [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); }, tol);
    check_eval<T>(s.s, P, fusex::gelu_tanh(fusex::linear(x, w, bias, o)),
                  [&](double v, auto, auto, std::int64_t j) { return gelu_tanh_ref(v + L.b(j)); }, tol + 2e-4);
    check_eval<T>(s.s, P, fusex::gelu(fusex::linear(x, w, bias, o)),
                  [&](double v, auto, auto, std::int64_t j) { return gelu_ref(v + L.b(j)); }, tol);
    check_eval<T>(s.s, P, fusex::silu(fusex::linear(x, w, bias, o)),
                  [&](double v, auto, auto, std::int64_t j) { return silu_ref(v + L.b(j)); }, tol);
    check_eval<T>(s.s, P, 0.5f * fusex::linear(x, w, o) + res,
                  [&](double v, auto, std::int64_t i, std::int64_t j) { return 0.5 * v + L.r(i, j); }, tol);
    check_eval<T>(s.s, P, fusex::relu(fusex::linear(x, w, bias, o) - 2.0f * res),
                  [&](double v, auto, std::int64_t i, std::int64_t j) { return std::fmax(0.0, v + L.b(j) - 2 * L.r(i, j)); }, tol);
    check_eval<T>(s.s, P, fusex::gelu_tanh(fusex::linear(x, w, bias, o)) * 0.5f + res,
                  [&](double v, auto, std::int64_t i, std::int64_t j) { return gelu_tanh_ref(v + L.b(j)) * 0.5 + L.r(i, j); },
                  tol);
    check_eval<T>(s.s, P, fusex::map([] __host__ __device__(float v) { return v * v - 1.0f; }, fusex::linear(x, w, o)),
                  [](double v, auto, auto, auto) { return v * v - 1; }, tol * 4);
    // A bias along the rows: maps onto cuBLASLt with a column-major destination.
    check_eval<T>(s.s, P, fusex::relu(fusex::matmul(x, w.t(), o) + L.col.v),
                  [&](double v, auto, std::int64_t i, auto) { return std::fmax(0.0, v + L.c(i)); }, tol, true);
    check_eval<T>(s.s, P, fusex::relu(fusex::matmul(x, w.t(), o) + L.col.v),
                  [&](double v, auto, std::int64_t i, auto) { return std::fmax(0.0, v + L.c(i)); }, tol, false);
    // float32 destinations from any operand dtype (cuBLASLt writes float32 from float16/bfloat16).
    check_eval<float>(s.s, P, fusex::linear(x, w, o), [](double v, auto, auto, auto) { return v; }, tolerance<float>(K));
    // A float64 destination: cuBLASLt cannot write it, so GEMM + elementwise on the cuBLASLt path.
    check_eval<double>(s.s, P, fusex::relu(fusex::linear(x, w, bias, o)),
                       [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); }, tolerance<float>(K));
    // In place: the residual is the destination.
    {
      device_array<T> inout(static_cast<std::size_t>(M * N));
      inout.upload(L.res.host);
      fusex::view<T> io(inout.data(), {M, N});
      fusex::eval(io, fusex::linear(x, w, bias, o) + io, s.s);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
      const std::string m = check(inout, expected(P, io, [&](double v, auto, std::int64_t i, std::int64_t j) { return v + L.b(j) + L.r(i, j); }), tol);
      INFO(m);
      CHECK(m.empty());
    }
  }
}

}  // namespace

TEST_CASE("matmul gpu: every epilogue form, float32", "[matmul][gpu]") { epilogue_forms<float>(96, 80, 72); }
TEST_CASE("matmul gpu: every epilogue form, float16", "[matmul][gpu]") { epilogue_forms<half>(96, 80, 72); }
TEST_CASE("matmul gpu: every epilogue form, bfloat16", "[matmul][gpu]") { epilogue_forms<bfloat16>(96, 80, 72); }

TEST_CASE("matmul gpu: odd shapes", "[matmul][gpu]") {
  for (auto sh : {std::array<std::int64_t, 3>{1, 1, 1}, {17, 33, 65}, {1, 4096, 4096}, {130, 3, 1}, {3, 130, 17}}) {
    INFO("M N K " << sh[0] << " " << sh[1] << " " << sh[2]);
    fusex_test::stream_guard s;
    linear_setup<float> L(sh[0], sh[1], sh[2], 7);
    for (auto p : all_paths) {
      INFO("path " << path_name(p));
      check_eval<float>(s.s, L.P, fusex::relu(fusex::linear(L.x.v, L.w.v, L.bias.v, path(p))),
                        [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); },
                        tolerance<float>(sh[2]));
    }
  }
}

TEST_CASE("matmul gpu: transposed and column-major operands", "[matmul][gpu]") {
  fusex_test::stream_guard s;
  const std::int64_t M = 70, N = 50, K = 40;
  operand<float> a(M * K, -1, 1, 31), b(K * N, -1, 1, 32), bias(N, -1, 1, 33);
  bias.on_device({N});
  for (int layout = 0; layout < 4; ++layout) {
    // a: row-major [M, K] or column-major (a [K, M] buffer transposed); b likewise.
    fusex::view<float> av = (layout & 1) ? a.on_device({K, M}).t() : a.on_device({M, K});
    fusex::view<float> bv = (layout & 2) ? b.on_device({N, K}).t() : b.on_device({K, N});
    a.v = av;
    b.v = bv;
    const product P = reference_product(a.on_host(), b.on_host());
    for (auto p : all_paths) {
      INFO("layout " << layout << " path " << path_name(p));
      check_eval<float>(s.s, P, fusex::relu(fusex::matmul(av, bv, path(p)) + bias.v),
                        [&](double v, auto, auto, std::int64_t j) {
                          return std::fmax(0.0, v + static_cast<double>(bias.host[static_cast<std::size_t>(j)]));
                        },
                        tolerance<float>(K));
      // A column-major destination too.
      check_eval<float>(s.s, P, fusex::matmul(av, bv, path(p)), [](double v, auto, auto, auto) { return v; },
                        tolerance<float>(K), true);
    }
  }
}

TEST_CASE("matmul gpu: batched", "[matmul][gpu]") {
  fusex_test::stream_guard s;
  const std::int64_t B = 3, M = 40, N = 24, K = 36;
  operand<half> a(B * M * K, -1, 1, 41), b(B * K * N, -1, 1, 42), bias(N, -1, 1, 43), res(B * M * N, -1, 1, 44);
  bias.on_device({N});
  res.on_device({B, M, N});
  for (int form = 0; form < 3; ++form) {
    fusex::view<half> av = a.on_device({B, M, K});
    fusex::view<half> bv = form == 0 ? b.on_device({B, K, N}) : (form == 1 ? b.on_device({K, N}) : b.on_device({B, N, K}).transpose(1, 2));
    b.v = bv;
    const product P = reference_product(a.on_host(), b.on_host());
    for (auto p : all_paths) {
      INFO("form " << form << " path " << path_name(p));
      check_eval<half>(s.s, P, fusex::relu(fusex::matmul(av, bv, path(p)) + bias.v + res.v),
                       [&](double v, std::int64_t z, std::int64_t i, std::int64_t j) {
                         return std::fmax(0.0, v + fusex::convert<double>(bias.host[static_cast<std::size_t>(j)]) +
                                                   fusex::convert<double>(res.host[static_cast<std::size_t>((z * M + i) * N + j)]));
                       },
                       tolerance<half>(K));
    }
  }
}

TEST_CASE("matmul gpu: K = 0 and empty destinations", "[matmul][gpu]") {
  fusex_test::stream_guard s;
  operand<float> a(16, -1, 1, 1), b(16, -1, 1, 2), bias(8, -1, 1, 3);
  bias.on_device({8});
  const product P{1, 8, 8, 0, std::vector<double>(64, 0.0)};
  for (auto p : all_paths) {
    INFO("path " << path_name(p));
    check_eval<float>(s.s, P, fusex::relu(fusex::matmul(a.on_device({8, 0}), b.on_device({0, 8}), path(p)) + bias.v),
                      [&](double, auto, auto, std::int64_t j) { return std::fmax(0.0, static_cast<double>(bias.host[static_cast<std::size_t>(j)])); },
                      1e-7);
    device_array<float> out(1);
    fusex::eval(fusex::view<float>(out.data(), {0, 8}), fusex::matmul(a.on_device({0, 2}), b.on_device({2, 8}), path(p)), s.s);
    fusex::eval(fusex::view<float>(out.data(), {8, 0}), fusex::matmul(a.on_device({8, 2}), b.on_device({2, 0}), path(p)), s.s);
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
}

TEST_CASE("matmul gpu: TF32 only by opt-in", "[matmul][gpu]") {
  fusex_test::stream_guard s;
  linear_setup<float> L(256, 256, 512, 9);
  fusex::matmul_options o = path(fusex::matmul_path::cublaslt);
  check_eval<float>(s.s, L.P, fusex::linear(L.x.v, L.w.v, o), [](double v, auto, auto, auto) { return v; }, tolerance<float>(512));
  o.allow_tf32 = true;
  check_eval<float>(s.s, L.P, fusex::linear(L.x.v, L.w.v, o), [](double v, auto, auto, auto) { return v; },
                    2e-3 * std::sqrt(512.0));
}

TEST_CASE("matmul gpu: bad input", "[matmul][gpu][errors]") {
  fusex_test::stream_guard s;
  operand<float> a(64, -1, 1, 1), b(64, -1, 1, 2);
  device_array<float> out(64);
  auto what = [](auto&& f) {
    try {
      f();
    } catch (const fusex::error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string inner = what([&] {
    fusex::eval(fusex::view<float>(out.data(), {4, 4}), fusex::matmul(a.on_device({4, 3}), b.on_device({4, 4})), s.s);
  });
  INFO(inner);
  CHECK(inner.find("inner dimensions do not match (3 vs 4)") != std::string::npos);
  const std::string strides = what([&] {
    fusex::eval(fusex::view<float>(out.data(), {4, 4}), fusex::matmul(a.on_device({4, 4}, {8, 2}), b.on_device({4, 4})), s.s);
  });
  INFO(strides);
  CHECK(strides.find("strides [8, 2]") != std::string::npos);
  CHECK_THROWS_AS(fusex::eval(fusex::view<float>(out.data(), {4, 5}), fusex::matmul(a.on_device({4, 4}), b.on_device({4, 4})), s.s),
                  fusex::shape_error);
  // Nothing was launched: the stream is clean.
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
}
