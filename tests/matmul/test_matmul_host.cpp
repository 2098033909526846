// Host tests of fusex matmul (CI, no GPU): the host backend against an independent double
// reference (every epilogue form, transposes, batches, odd and empty shapes, dtypes), the epilogue
// mapping (which expressions become one cuBLASLt call, with which parameters, and why the others
// do not), the path chooser, the plan printer and bad input. No CUDA device is touched: planning
// and the mapping are plain host code.
#include <fusex/fusex.hpp>
#include <fusex/matmul.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

// Catch2 v2 and v3 spell substring matchers differently; this works with both.
#define CHECK_CONTAINS(text, part)                      \
  do {                                                  \
    const std::string fusex_text_ = (text);             \
    INFO(fusex_text_);                                  \
    CHECK(fusex_text_.find(part) != std::string::npos); \
  } while (0)

namespace {

using fusex::bfloat16;
using fusex::half;
using fusex_test::random_values;

// Reference product in double of a [B?, M, K] x b [B?, K, N] with explicit strides.
struct mat {
  std::vector<double> v;
  std::int64_t b, m, n;
  double at(std::int64_t z, std::int64_t i, std::int64_t j) const {
    return v[static_cast<std::size_t>((z * m + i) * n + j)];
  }
};

template <class T>
double get(const fusex::view<T>& x, std::int64_t z, std::int64_t i, std::int64_t j) {
  const int r = x.rank();
  std::int64_t off = i * x.strides()[r - 2] + j * x.strides()[r - 1];
  if (r == 3 && x.shape()[0] > 1) off += z * x.strides()[0];
  return fusex::convert<double>(x.data()[off]);
}

template <class T>
mat reference_product(const fusex::view<T>& a, const fusex::view<T>& b) {
  const int ra = a.rank(), rb = b.rank();
  mat r;
  r.m = a.shape()[ra - 2];
  r.n = b.shape()[rb - 1];
  const std::int64_t K = a.shape()[ra - 1];
  const std::int64_t ba = ra == 3 ? a.shape()[0] : 1, bb = rb == 3 ? b.shape()[0] : 1;
  r.b = ba == 1 ? bb : ba;
  r.v.assign(static_cast<std::size_t>(r.b * r.m * r.n), 0.0);
  for (std::int64_t z = 0; z < r.b; ++z)
    for (std::int64_t i = 0; i < r.m; ++i)
      for (std::int64_t j = 0; j < r.n; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += get(a, z, i, k) * get(b, z, k, j);
        r.v[static_cast<std::size_t>((z * r.m + i) * r.n + j)] = s;
      }
  return r;
}

// Tolerance of a host result: the product is rounded to float32 once, then the epilogue runs in
// float32 and is stored as T.
template <class T>
double host_tol(std::int64_t k) {
  return fusex_test::tolerance<T>() + 1e-6 * std::sqrt(static_cast<double>(k > 0 ? k : 1));
}

template <class T>
void check_close(const std::vector<T>& got, const std::vector<double>& ref, double tol) {
  const std::string m = fusex_test::compare(got, ref, tol);
  INFO(m);
  CHECK(m.empty());
}

double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

template <class T>
void host_shapes_case(std::int64_t M, std::int64_t N, std::int64_t K, unsigned seed) {
  auto av = random_values<T>(static_cast<std::size_t>(M * K), -1, 1, seed);
  auto bv = random_values<T>(static_cast<std::size_t>(K * N), -1, 1, seed + 1);
  auto biasv = random_values<T>(static_cast<std::size_t>(N), -1, 1, seed + 2);
  fusex::view<T> a(av.data(), {M, K}), b(bv.data(), {K, N}), bias(biasv.data(), {N});
  const mat P = reference_product(a, b);
  std::vector<T> out(static_cast<std::size_t>(M * N), fusex::convert<T>(-7.0));
  fusex::view<T> o(out.data(), {M, N});
  fusex::host::eval(o, fusex::relu(fusex::matmul(a, b) + bias));
  std::vector<double> ref(out.size());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      ref[static_cast<std::size_t>(i * N + j)] = fusex_test::round_to<T>(
          std::fmax(0.0, P.at(0, i, j) + fusex::convert<double>(biasv[static_cast<std::size_t>(j)])));
  check_close(out, ref, host_tol<T>(K));
}

}  // namespace

TEST_CASE("matmul host: shapes and dtypes against a double reference", "[matmul][host]") {
  for (auto s : {std::array<std::int64_t, 3>{1, 1, 1}, {17, 33, 65}, {1, 64, 300}, {5, 1, 7}, {8, 8, 0}}) {
    INFO("M N K = " << s[0] << " " << s[1] << " " << s[2]);
    host_shapes_case<float>(s[0], s[1], s[2], 11);
    host_shapes_case<half>(s[0], s[1], s[2], 12);
    host_shapes_case<bfloat16>(s[0], s[1], s[2], 13);
  }
}

TEST_CASE("matmul host: every epilogue form", "[matmul][host]") {
  const std::int64_t M = 6, N = 10, K = 9;
  auto xv = random_values<float>(M * K, -1, 1, 1);
  auto wv = random_values<float>(N * K, -1, 1, 2);
  auto bv = random_values<float>(N, -1, 1, 3);
  auto rv = random_values<float>(M * N, -1, 1, 4);
  auto cv = random_values<float>(M, -1, 1, 5);
  fusex::view<float> x(xv.data(), {M, K}), w(wv.data(), {N, K}), bias(bv.data(), {N}), res(rv.data(), {M, N}),
      col(cv.data(), {M, 1});
  const mat P = reference_product(x, w.t());
  auto R = [&](std::function<double(double, std::int64_t, std::int64_t)> f) {
    std::vector<double> r(static_cast<std::size_t>(M * N));
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) r[static_cast<std::size_t>(i * N + j)] = f(P.at(0, i, j), i, j);
    return r;
  };
  auto B = [&](std::int64_t j) { return static_cast<double>(bv[static_cast<std::size_t>(j)]); };
  auto Res = [&](std::int64_t i, std::int64_t j) {
    return static_cast<double>(rv[static_cast<std::size_t>(i * N + j)]);
  };
  std::vector<float> out(static_cast<std::size_t>(M * N));
  fusex::view<float> o(out.data(), {M, N});
  const double tol = 1e-5;

  fusex::host::eval(o, fusex::linear(x, w));
  check_close(out, R([](double p, auto, auto) { return p; }), tol);
  fusex::host::eval(o, fusex::linear(x, w, bias));
  check_close(out, R([&](double p, auto, std::int64_t j) { return p + B(j); }), tol);
  fusex::host::eval(o, fusex::relu(fusex::linear(x, w, bias)));
  check_close(out, R([&](double p, auto, std::int64_t j) { return std::fmax(0.0, p + B(j)); }), tol);
  fusex::host::eval(o, fusex::gelu_tanh(fusex::linear(x, w, bias)));
  check_close(out, R([&](double p, auto, std::int64_t j) { return gelu_tanh_ref(p + B(j)); }), tol);
  fusex::host::eval(o, fusex::gelu(fusex::linear(x, w, bias)));
  check_close(out, R([&](double p, auto, std::int64_t j) { return gelu_ref(p + B(j)); }), tol);
  fusex::host::eval(o, fusex::silu(fusex::linear(x, w, bias)));
  check_close(out, R([&](double p, auto, std::int64_t j) { return silu_ref(p + B(j)); }), tol);
  fusex::host::eval(o, 0.5f * fusex::linear(x, w) + res);
  check_close(out, R([&](double p, std::int64_t i, std::int64_t j) { return 0.5 * p + Res(i, j); }), tol);
  fusex::host::eval(o, fusex::linear(x, w) - 2.0f * res);
  check_close(out, R([&](double p, std::int64_t i, std::int64_t j) { return p - 2 * Res(i, j); }), tol);
  fusex::host::eval(o, fusex::gelu_tanh(fusex::linear(x, w, bias)) * 0.5f + res);
  check_close(
      out, R([&](double p, std::int64_t i, std::int64_t j) { return gelu_tanh_ref(p + B(j)) * 0.5 + Res(i, j); }), tol);
  fusex::host::eval(o, fusex::matmul(x, w.t()) + col);
  check_close(
      out, R([&](double p, std::int64_t i, auto) { return p + static_cast<double>(cv[static_cast<std::size_t>(i)]); }),
      tol);
  fusex::host::eval(o, fusex::map([](float v) { return v * v; }, fusex::linear(x, w)));
  check_close(out, R([](double p, auto, auto) { return p * p; }), 1e-5);
  // A cast to the destination's dtype, into float16 and bfloat16 destinations.
  std::vector<half> oh(static_cast<std::size_t>(M * N));
  fusex::host::eval(fusex::view<half>(oh.data(), {M, N}), fusex::cast<half>(fusex::relu(fusex::linear(x, w, bias))));
  check_close(oh,
              R([&](double p, auto, std::int64_t j) { return fusex_test::round_to<half>(std::fmax(0.0, p + B(j))); }),
              2e-3);
  std::vector<bfloat16> ob(static_cast<std::size_t>(M * N));
  fusex::host::eval(fusex::view<bfloat16>(ob.data(), {M, N}), fusex::linear(x, w, bias));
  check_close(ob, R([&](double p, auto, std::int64_t j) { return fusex_test::round_to<bfloat16>(p + B(j)); }), 1.6e-2);
  // One product used twice (h * sigmoid(h), written out): one GEMM; a second, different product
  // in the same expression is refused.
  {
    const auto h = fusex::linear(x, w, bias);
    fusex::host::eval(o, h * fusex::sigmoid(h));
    check_close(out, R([&](double p, auto, std::int64_t j) { return silu_ref(p + B(j)); }), tol);
    const std::string plan = fusex::explain(o, h * fusex::sigmoid(h));
    CHECK_CONTAINS(plan, "(the shared value above, not computed again)");
    std::vector<float> w2v(wv);
    fusex::view<float> w2(w2v.data(), {N, K});
    CHECK_THROWS_AS(fusex::host::eval(o, fusex::linear(x, w) + fusex::linear(x, w2)), fusex::invalid_argument);
  }
  // A reduction over the product: the GEMM is materialised, then the reduction plan runs.
  std::vector<float> rs(static_cast<std::size_t>(M));
  fusex::host::eval(fusex::view<float>(rs.data(), {M}), fusex::sum(fusex::linear(x, w), 1));
  std::vector<double> rref(static_cast<std::size_t>(M));
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) rref[static_cast<std::size_t>(i)] += P.at(0, i, j);
  check_close(rs, rref, 1e-5);
}

TEST_CASE("matmul host: transposed, column-major and batched operands", "[matmul][host]") {
  const std::int64_t Bt = 3, M = 5, N = 7, K = 4;
  auto av = random_values<float>(Bt * M * K, -1, 1, 21);
  auto bv = random_values<float>(Bt * K * N, -1, 1, 22);
  // a stored column-major ([K, M] row-major, transposed); b stored as [N, K] (transposed).
  fusex::view<float> a_t(av.data(), {K, M}), b_t(bv.data(), {N, K});
  std::vector<float> out(static_cast<std::size_t>(M * N));
  fusex::view<float> o(out.data(), {M, N});
  fusex::host::eval(o, fusex::matmul(a_t.t(), b_t.t()));
  const mat P = reference_product(a_t.t(), b_t.t());
  check_close(out, P.v, 1e-5);
  // A column-major destination.
  std::vector<float> oc(static_cast<std::size_t>(M * N));
  fusex::view<float> ocv(oc.data(), {M, N}, {1, M});
  fusex::host::eval(ocv, fusex::matmul(a_t.t(), b_t.t()));
  std::vector<double> ref_c(oc.size());
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) ref_c[static_cast<std::size_t>(j * M + i)] = P.at(0, i, j);
  check_close(oc, ref_c, 1e-5);
  // Batched, both operands; and a 2-D operand broadcast over the batch.
  fusex::view<float> a3(av.data(), {Bt, M, K}), b3(bv.data(), {Bt, K, N}), b2(bv.data(), {K, N});
  std::vector<float> o3(static_cast<std::size_t>(Bt * M * N));
  fusex::view<float> o3v(o3.data(), {Bt, M, N});
  fusex::host::eval(o3v, fusex::matmul(a3, b3));
  check_close(o3, reference_product(a3, b3).v, 1e-5);
  fusex::host::eval(o3v, fusex::matmul(a3, b2));
  check_close(o3, reference_product(a3, fusex::view<float>(bv.data(), {1, K, N})).v, 1e-5);
  // Batched, transposed inside each matrix.
  fusex::view<float> a3t(av.data(), {Bt, K, M});
  fusex::host::eval(o3v, fusex::matmul(a3t.transpose(1, 2), b3));
  check_close(o3, reference_product(a3t.transpose(1, 2), b3).v, 1e-5);
  // linear over a batched x.
  fusex::view<float> w(bv.data(), {N, K});
  fusex::host::eval(o3v, fusex::linear(a3, w));
  check_close(o3, reference_product(a3, fusex::view<float>(bv.data(), {1, N, K}).transpose(1, 2)).v, 1e-5);
}

TEST_CASE("matmul host: empty shapes", "[matmul][host]") {
  std::vector<float> a(8, 1.0f), b(8, 1.0f), bias(4, 2.0f), out(16, -1.0f);
  // K = 0: the epilogue of zeros.
  fusex::host::eval(
      fusex::view<float>(out.data(), {4, 4}),
      fusex::relu(fusex::matmul(fusex::view<float>(a.data(), {4, 0}), fusex::view<float>(b.data(), {0, 4})) +
                  fusex::view<float>(bias.data(), {4})));
  for (float v : out) CHECK(v == 2.0f);
  // M = 0 and N = 0: nothing to write.
  fusex::host::eval(fusex::view<float>(out.data(), {0, 4}),
                    fusex::matmul(fusex::view<float>(a.data(), {0, 2}), fusex::view<float>(b.data(), {2, 4})));
  fusex::host::eval(fusex::view<float>(out.data(), {4, 0}),
                    fusex::matmul(fusex::view<float>(a.data(), {4, 2}), fusex::view<float>(b.data(), {2, 0})));
  CHECK(out[0] == 2.0f);
}

// --- the epilogue mapping ------------------------------------------------------------------------
namespace {
struct mapping_fixture {
  static constexpr std::int64_t M = 128, N = 64, K = 32;
  std::vector<float> xv = std::vector<float>(M * K, 1.0f), wv = std::vector<float>(N * K, 1.0f),
                     bv = std::vector<float>(N, 1.0f), rv = std::vector<float>(M * N, 1.0f),
                     ov = std::vector<float>(M * N, 0.0f), cv = std::vector<float>(M, 1.0f);
  std::vector<half> hv = std::vector<half>(M * N), hb = std::vector<half>(N);
  std::vector<std::int32_t> iv = std::vector<std::int32_t>(M * N);
  fusex::matmul_options lt;
  fusex::view<float> x{xv.data(), {M, K}}, w{wv.data(), {N, K}}, bias{bv.data(), {N}}, res{rv.data(), {M, N}},
      out{ov.data(), {M, N}}, col{cv.data(), {M, 1}}, out_cm{ov.data(), {M, N}, {1, M}};
  mapping_fixture() { lt.path = fusex::matmul_path::cublaslt; }
};

template <class D, class E>
fusex::detail::matmul_decision decide(const fusex::view<D>& d, const E& e) {
  return fusex::detail::plan_matmul(d, e);
}
}  // namespace

TEST_CASE("matmul host: epilogues that map onto cuBLASLt", "[matmul][host][mapping]") {
  using fusex::detail::epilogue_activation;
  using fusex::detail::matmul_route;
  mapping_fixture f;
  auto mm = [&] { return fusex::linear(f.x, f.w, f.lt); };
  {
    const auto d = decide(f.out, mm());
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(!d.lt.has_bias);
    CHECK(d.lt.act == epilogue_activation::none);
    CHECK(d.lt.alpha == 1.0);
    CHECK(d.lt.beta == 0.0);
    CHECK(d.lt.n_rows);
    CHECK(d.lt.d.rows == f.N);
    CHECK(d.lt.d.ld == f.N);
  }
  {
    const auto d = decide(f.out, fusex::relu(fusex::linear(f.x, f.w, f.bias, f.lt)));
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.has_bias);
    CHECK(d.lt.bias_along_n);
    CHECK(d.lt.bias.data == f.bias.data());
    CHECK(d.lt.act == epilogue_activation::relu);
  }
  {
    const auto d = decide(f.out, fusex::gelu_tanh(mm() + f.bias));
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.act == epilogue_activation::gelu_tanh);
  }
  {
    // alpha from a scale, beta from a scaled residual, any association.
    const auto d = decide(f.out, fusex::relu(f.res * 0.25f + (2.0f * mm() + f.bias)));
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.alpha == 2.0);
    CHECK(d.lt.beta == 0.25);
    CHECK(d.lt.has_residual);
    CHECK(d.lt.residual.data == f.res.data());
    CHECK(d.lt.has_bias);
  }
  {
    const auto d = decide(f.out, -(mm() / 4.0f) - f.res);
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.alpha == -0.25);
    CHECK(d.lt.beta == -1.0);
  }
  {
    // In place: the residual is the destination.
    const auto d = decide(f.res, mm() + f.res);
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.c.ld == d.lt.d.ld);
  }
  {
    // A bias along the rows maps with a column-major destination (cuBLASLt computes D = A B).
    const auto d = decide(f.out_cm, fusex::relu(mm() + f.col));
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(!d.lt.n_rows);
    CHECK(!d.lt.bias_along_n);
    CHECK(d.lt.d.rows == f.M);
    CHECK(d.lt.d.ld == f.M);
  }
  {
    // A cast to the destination's dtype, and a float16 output from float32 operands is refused
    // (cuBLASLt writes float32 from float32) while float32 from float16 maps.
    fusex::view<half> oh(f.hv.data(), {f.M, f.N});
    CHECK(decide(oh, fusex::cast<half>(mm())).route == matmul_route::gemm_then_elementwise);
    std::vector<half> xh(f.M * f.K), wh(f.N * f.K);
    fusex::view<half> xhv(xh.data(), {f.M, f.K}), whv(wh.data(), {f.N, f.K}), bh(f.hb.data(), {f.N});
    const auto d1 = decide(oh, fusex::cast<half>(fusex::relu(fusex::linear(xhv, whv, bh, f.lt))));
    CHECK(d1.route == matmul_route::cublaslt_fused);
    CHECK(decide(f.out, fusex::linear(xhv, whv, f.lt)).route == matmul_route::cublaslt_fused);
  }
  {
    // Batched: a bias [N] broadcast over the batch, a residual with one matrix per batch.
    std::vector<float> x3(3 * f.M * f.K), r3(3 * f.M * f.N), o3(3 * f.M * f.N);
    fusex::view<float> x3v(x3.data(), {3, f.M, f.K}), r3v(r3.data(), {3, f.M, f.N}), o3v(o3.data(), {3, f.M, f.N});
    const auto d = decide(o3v, fusex::relu(fusex::linear(x3v, f.w, f.bias, f.lt) + r3v));
    REQUIRE(d.route == matmul_route::cublaslt_fused);
    CHECK(d.lt.d.batch_stride == f.M * f.N);
    CHECK(d.lt.c.batch_stride == f.M * f.N);
  }
}

TEST_CASE("matmul host: epilogues that fall back, and why", "[matmul][host][mapping]") {
  using fusex::detail::matmul_route;
  mapping_fixture f;
  auto mm = [&] { return fusex::linear(f.x, f.w, f.lt); };
  auto why = [](const fusex::detail::matmul_decision& d) {
    CHECK(d.route == matmul_route::gemm_then_elementwise);
    return std::string(d.why) + " " + d.why_op;
  };
  CHECK_CONTAINS(why(decide(f.out, fusex::gelu(mm() + f.bias))), ("erf"));
  CHECK_CONTAINS(why(decide(f.out, fusex::silu(mm() + f.bias))), ("silu"));
  CHECK_CONTAINS(why(decide(f.out, fusex::gelu_tanh(mm() + f.bias) * 0.5f + f.res)), ("activation below"));
  CHECK_CONTAINS(why(decide(f.out, mm() * f.res)), ("product of two tensors"));
  CHECK_CONTAINS(why(decide(f.out, mm() + 1.0f)), ("constant"));
  CHECK_CONTAINS(why(decide(f.out, mm() + 2.0f * f.bias)), ("scaled bias"));
  CHECK_CONTAINS(why(decide(f.out, mm() + f.bias + f.bias)), ("two bias"));
  CHECK_CONTAINS(why(decide(f.out, mm() + f.res + f.res)), ("two full-size"));
  CHECK_CONTAINS(why(decide(f.out, mm() + f.col)), ("bias along the rows"));
  CHECK_CONTAINS(why(decide(f.out_cm, mm() + f.bias)), ("bias along the columns"));
  CHECK_CONTAINS(why(decide(f.out, fusex::cast<half>(mm()))), ("cast"));
  fusex::view<std::int32_t> oi(f.iv.data(), {f.M, f.N});
  CHECK_CONTAINS(why(decide(oi, mm())), ("destination dtype"));
  fusex::view<half> bh(f.hb.data(), {f.N});
  CHECK_CONTAINS(why(decide(f.out, mm() + bh)), ("bias whose dtype"));
  // The destination is one of the operands: the GEMM goes to a temporary.
  fusex::view<float> xsq(f.xv.data(), {f.K, f.K});
  CHECK_CONTAINS(why(decide(xsq, fusex::matmul(xsq, xsq, f.lt))), ("overlaps an operand"));
  // A destination larger than the product (broadcast).
  std::vector<float> big(2 * f.M * f.N);
  CHECK_CONTAINS(why(decide(fusex::view<float>(big.data(), {2, f.M, f.N}), mm())), ("larger"));
  // A reduction.
  std::vector<float> red(f.M);
  CHECK_CONTAINS(why(decide(fusex::view<float>(red.data(), {f.M}), fusex::sum(mm(), 1))), ("reduction"));
  // K = 0.
  CHECK_CONTAINS(why(decide(f.out, fusex::matmul(fusex::view<float>(f.xv.data(), {f.M, 0}),
                                                 fusex::view<float>(f.wv.data(), {0, f.N}), f.lt))),
                 ("K = 0"));
}

TEST_CASE("matmul host: the epilogue form of a tree", "[matmul][host][mapping]") {
  mapping_fixture f;
  const auto form = fusex::detail::describe_epilogue(
      fusex::cast<float>(fusex::relu(3.0f * (fusex::linear(f.x, f.w) - f.res) + f.bias)));
  REQUIRE(form.affine);
  CHECK(form.act == fusex::detail::epilogue_activation::relu);
  CHECK(form.has_cast);
  CHECK(form.cast_dtype == fusex::dtype_id::float32);
  REQUIRE(form.n_terms == 3);
  CHECK(form.terms[0].gemm);
  CHECK(form.terms[0].coeff == 3.0);
  CHECK(form.terms[1].coeff == -3.0);
  CHECK(form.terms[2].coeff == 1.0);
  CHECK(form.terms[2].operand.shape == fusex::shape_t{f.N});
}

TEST_CASE("matmul host: the path chooser", "[matmul][host][chooser]") {
  using fusex::detail::matmul_route;
  const auto saved = fusex::matmul_chooser();
  std::vector<float> xv(64 * 256), wv(256 * 256), bv(256), ov(64 * 256);
  fusex::view<float> w(wv.data(), {256, 256}), bias(bv.data(), {256});
  auto route = [&](std::int64_t m, fusex::matmul_options o = {}) {
    fusex::view<float> x(xv.data(), {m, 256}), out(ov.data(), {m, 256});
    return fusex::detail::plan_matmul(out, fusex::relu(fusex::linear(x, w, bias, o))).route;
  };
  CHECK(route(16) == matmul_route::fusex_kernel);  // the batch-16 MLP case
  CHECK(route(1) == matmul_route::fusex_kernel);
  CHECK(route(64) == matmul_route::fusex_kernel);  // M*N = 16384 <= fp32_mn_max
  fusex::matmul_options lt;
  lt.path = fusex::matmul_path::cublaslt;
  CHECK(route(16, lt) == matmul_route::cublaslt_fused);
  auto s = saved;
  s.fp32_nk_max = 1000;
  fusex::set_matmul_chooser(s);
  CHECK(route(16) == matmul_route::cublaslt_fused);
  fusex::matmul_options fx;
  fx.path = fusex::matmul_path::fusex;
  CHECK(route(64, fx) == matmul_route::fusex_kernel);
  fusex::set_matmul_chooser(saved);
  // Arbitrary epilogues are one kernel on the fusex path.
  fusex::view<float> x(xv.data(), {16, 256}), out(ov.data(), {16, 256});
  CHECK(fusex::detail::plan_matmul(out, fusex::silu(fusex::linear(x, w, bias)) * 3.0f).route ==
        matmul_route::fusex_kernel);
}

TEST_CASE("matmul host: the part of an epilogue cuBLASLt computes before the rest (route 3)",
          "[matmul][host][mapping]") {
  using fusex::detail::epilogue_activation;
  using fusex::detail::matmul_route;
  mapping_fixture f;
  auto mm = [&] { return fusex::linear(f.x, f.w, f.lt); };
  {
    // gelu_tanh(linear) * 0.5 + residual: bias + gelu_tanh by cuBLASLt, then * 0.5 + r in place.
    const auto d = decide(f.out, fusex::gelu_tanh(mm() + f.bias) * 0.5f + f.res);
    REQUIRE(d.route == matmul_route::gemm_then_elementwise);
    CHECK(d.peeled);
    CHECK(d.peel.act == epilogue_activation::gelu_tanh);
    CHECK(d.peel.has_bias);
    CHECK(!d.peel.has_residual);
    CHECK_CONTAINS(std::string(d.why), ("activation below"));
  }
  {
    // silu: the bias by cuBLASLt; an unmappable op above a bare GEMM: the GEMM alone.
    const auto d1 = decide(f.out, fusex::silu(mm() + f.bias));
    CHECK(d1.peeled);
    CHECK(d1.peel.act == epilogue_activation::none);
    CHECK(d1.peel.has_bias);
    const auto d2 = decide(f.out, fusex::silu(mm()) * f.res);
    CHECK(d2.peeled);
    CHECK(!d2.peel.has_bias);
    // A scaled GEMM plus a residual, under an op cuBLASLt lacks: alpha and beta by cuBLASLt.
    const auto d3 = decide(f.out, fusex::silu(2.0f * mm() - f.res));
    CHECK(d3.peeled);
    CHECK(d3.peel.alpha == 2.0);
    CHECK(d3.peel.beta == -1.0);
  }
  {
    // The rest reads the destination (an in-place residual): the GEMM would overwrite it first.
    const auto d = decide(f.res, fusex::gelu_tanh(mm() + f.bias) * 0.5f + f.res);
    CHECK(d.route == matmul_route::gemm_then_elementwise);
    CHECK(!d.peeled);
  }
  {
    // The part does not map either (a bias along the rows into a row-major destination).
    const auto d = decide(f.out, fusex::relu(mm() + f.col) * 2.0f);
    CHECK(d.route == matmul_route::gemm_then_elementwise);
    CHECK(!d.peeled);
    // A float64 destination: cuBLASLt cannot write it.
    std::vector<double> o64(f.M * f.N);
    CHECK(!decide(fusex::view<double>(o64.data(), {f.M, f.N}), fusex::silu(mm())).peeled);
    // A reduction: the product is materialised.
    CHECK(!decide(fusex::view<float>(f.ov.data(), {f.M}), fusex::sum(fusex::silu(mm()), 1)).peeled);
  }
  {
    // float32_intermediate: a 16-bit destination keeps the float32 temporary; float32 peels anyway.
    std::vector<half> xh(f.M * f.K), wh(f.N * f.K);
    fusex::view<half> xhv(xh.data(), {f.M, f.K}), whv(wh.data(), {f.N, f.K}), bh(f.hb.data(), {f.N});
    fusex::view<half> oh(f.hv.data(), {f.M, f.N});
    fusex::matmul_options keep = f.lt;
    keep.float32_intermediate = true;
    CHECK(decide(oh, fusex::silu(fusex::linear(xhv, whv, bh, f.lt))).peeled);
    CHECK(!decide(oh, fusex::silu(fusex::linear(xhv, whv, bh, keep))).peeled);
    fusex::matmul_options keep32 = keep;
    CHECK(decide(f.out, fusex::silu(fusex::linear(f.x, f.w, f.bias, keep32))).peeled);
    const std::string e = fusex::explain(oh, fusex::gelu_tanh(fusex::linear(xhv, whv, bh, f.lt)) * 0.5f);
    INFO(e);
    CHECK_CONTAINS(e, ("CUBLASLT_EPILOGUE_GELU_BIAS for part of the expression"));
    CHECK_CONTAINS(e, ("rounded to float16"));
    const std::string k = fusex::explain(oh, fusex::gelu_tanh(fusex::linear(xhv, whv, bh, keep)) * 0.5f);
    INFO(k);
    CHECK_CONTAINS(k, ("GEMM into a float32 temporary"));
  }
}

// Mixed precision (issue #29 item 4): x and w in bfloat16 or float16, the bias and the other
// epilogue operands in float32; the product accumulates in float32 and the whole epilogue runs in
// float32, rounded once at the store.
template <class T>
void mixed_linear_case() {
  const std::int64_t M = 5, N = 12, K = 33;
  auto xv = random_values<T>(static_cast<std::size_t>(M * K), -1, 1, 61);
  auto wv = random_values<T>(static_cast<std::size_t>(N * K), -1, 1, 62);
  auto bv = random_values<float>(static_cast<std::size_t>(N), -1, 1, 63);
  auto rv = random_values<float>(static_cast<std::size_t>(M * N), -1, 1, 64);
  fusex::view<T> x(xv.data(), {M, K}), w(wv.data(), {N, K});
  fusex::view<float> bias(bv.data(), {N}), res(rv.data(), {M, N});
  const mat P = reference_product(x, w.t());
  auto ref = [&](bool round16) {
    std::vector<double> r(static_cast<std::size_t>(M * N));
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        const double v = gelu_tanh_ref(P.at(0, i, j) + bv[static_cast<std::size_t>(j)]) +
                         0.5 * rv[static_cast<std::size_t>(i * N + j)];
        r[static_cast<std::size_t>(i * N + j)] = round16 ? fusex_test::round_to<T>(v) : v;
      }
    return r;
  };
  const auto e = fusex::gelu_tanh(fusex::linear(x, w, bias)) + 0.5f * res;
  STATIC_REQUIRE(std::is_same_v<fusex::result_t<decltype(e)>, float>);  // computed in float32
  std::vector<float> of(static_cast<std::size_t>(M * N), -7.0f);
  fusex::host::eval(fusex::view<float>(of.data(), {M, N}), e);
  check_close(of, ref(false), 1e-5);
  std::vector<T> o16(static_cast<std::size_t>(M * N), fusex::convert<T>(-7.0));
  fusex::host::eval(fusex::view<T>(o16.data(), {M, N}), e);
  check_close(o16, ref(true), host_tol<T>(K));  // one rounding, at the store
  // The routes: into float32, cuBLASLt's epilogue takes the float32 bias (its bias is in the output
  // dtype); into T it cannot, so the product goes to a float32 temporary and the epilogue, bias
  // included, runs in float32 (no rounding of the product to T first). At M = 5 the fusex kernel
  // reads the float32 bias itself.
  fusex::matmul_options lt;
  lt.path = fusex::matmul_path::cublaslt;
  const auto el = fusex::gelu_tanh(fusex::linear(x, w, bias, lt));
  const std::string a = fusex::explain(fusex::view<float>(of.data(), {M, N}), el);
  CHECK_CONTAINS(a, "CUBLASLT_EPILOGUE_GELU_BIAS");
  const std::string b = fusex::explain(fusex::view<T>(o16.data(), {M, N}), el);
  CHECK_CONTAINS(b, "GEMM into a float32 temporary");
  CHECK_CONTAINS(b, "a bias whose dtype differs from the destination's");
  const std::string c = fusex::explain(fusex::view<T>(o16.data(), {M, N}), e);
  CHECK_CONTAINS(c, "fusex GEMM kernel");
}

TEST_CASE("matmul host: mixed precision: 16-bit x and w, float32 bias and epilogue", "[matmul][host][mixed]") {
  mixed_linear_case<bfloat16>();
  mixed_linear_case<half>();
}

TEST_CASE("matmul host: the plan printer", "[matmul][host][explain]") {
  mapping_fixture f;
  const std::string a = fusex::explain(f.out, fusex::relu(fusex::linear(f.x, f.w, f.bias, f.lt)));
  INFO(a);
  CHECK_CONTAINS(a, ("cuBLASLt, 1 call"));
  CHECK_CONTAINS(a, ("CUBLASLT_EPILOGUE_RELU_BIAS"));
  CHECK_CONTAINS(a, ("matmul float32 [128, 32]"));
  const std::string b = fusex::explain(f.out, fusex::gelu_tanh(fusex::linear(f.x, f.w, f.bias, f.lt)) * 0.5f + f.res);
  INFO(b);
  CHECK_CONTAINS(b, ("CUBLASLT_EPILOGUE_GELU_BIAS for part of the expression"));
  CHECK_CONTAINS(b, ("in place"));
  CHECK_CONTAINS(b, ("activation below"));
  const std::string b2 = fusex::explain(f.res, fusex::gelu_tanh(fusex::linear(f.x, f.w, f.bias, f.lt)) * 0.5f + f.res);
  INFO(b2);
  CHECK_CONTAINS(b2, ("GEMM into a float32 temporary"));
  std::vector<float> xs(16 * f.K), os(16 * f.N);
  const std::string c =
      fusex::explain(fusex::view<float>(os.data(), {16, f.N}),
                     fusex::relu(fusex::linear(fusex::view<float>(xs.data(), {16, f.K}), f.w, f.bias)));
  INFO(c);
  CHECK_CONTAINS(c, ("fusex GEMM kernel"));
  CHECK_CONTAINS(c, ("M-tile 8, warps split K"));  // linear's weight is contiguous along K
  // A right operand contiguous along N (attention's p @ v, here a column slice of wider rows):
  // the N-major variant.
  std::vector<float> bs(static_cast<std::size_t>(f.K * 3 * f.N));
  const std::string d = fusex::explain(fusex::view<float>(os.data(), {16, f.N}),
                                       fusex::matmul(fusex::view<float>(xs.data(), {16, f.K}),
                                                     fusex::make_view(bs.data() + f.N, {f.K, f.N}, {3 * f.N, 1})));
  INFO(d);
  CHECK_CONTAINS(d, ("fusex GEMM kernel"));
  CHECK_CONTAINS(d, ("threads along N, 4 rows per thread"));
  CHECK(fusex::detail::small_m_threads_along_n(3 * f.N, 1, f.N, f.K));
  CHECK(fusex::detail::small_m_threads_along_n(3 * f.N, 1, f.N, 256));
  CHECK_FALSE(fusex::detail::small_m_threads_along_n(3 * f.N, 1, f.N, 257));  // long K: split K
  CHECK_FALSE(fusex::detail::small_m_threads_along_n(1, f.K, f.N, f.K));      // K-contiguous: split K
  CHECK_FALSE(fusex::detail::small_m_threads_along_n(1, 1, f.N, 1));          // both unit (K = 1 or N = 1): split K
  CHECK_FALSE(fusex::detail::small_m_threads_along_n(f.N, 1, 1, f.K));        // one column: split K
  {  // a long K with the same layout prints the K split
    std::vector<float> xl(16 * 512), bl(512 * f.N);
    const std::string l = fusex::explain(
        fusex::view<float>(os.data(), {16, f.N}),
        fusex::matmul(fusex::view<float>(xl.data(), {16, 512}), fusex::view<float>(bl.data(), {512, f.N})));
    INFO(l);
    CHECK_CONTAINS(l, ("warps split K"));
  }
  CHECK_CONTAINS(fusex::explain(fusex::view<float>(os.data(), {0, f.N}),
                                fusex::linear(fusex::view<float>(xs.data(), {0, f.K}), f.w)),
                 ("empty"));
}

TEST_CASE("matmul host: bad input", "[matmul][host][errors]") {
  std::vector<float> a(64), b(64), o(64);
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const fusex::error& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string inner = msg([&] {
    (void)fusex::matmul(fusex::view<float>(a.data(), {4, 3}), fusex::view<float>(b.data(), {4, 4}));
  });
  CHECK_CONTAINS(inner, ("inner dimensions do not match (3 vs 4)"));
  CHECK_CONTAINS(inner, ("[4, 3] strides [3, 1]"));
  CHECK_THROWS_AS(fusex::matmul(fusex::view<float>(a.data(), {4, 3}), fusex::view<float>(b.data(), {4, 4})),
                  fusex::shape_error);
  const std::string batch = msg([&] {
    (void)fusex::matmul(fusex::view<float>(a.data(), {2, 2, 2}), fusex::view<float>(b.data(), {3, 2, 2}));
  });
  CHECK_CONTAINS(batch, ("batch dimensions do not match (2 vs 3)"));
  CHECK_CONTAINS(msg([&] {
                   (void)fusex::matmul(fusex::view<float>(a.data(), {8}), fusex::view<float>(b.data(), {8, 1}));
                 }),
                 ("2-D matrices or 3-D"));
  CHECK_CONTAINS(msg([&] {
                   (void)fusex::linear(fusex::view<float>(a.data(), {4, 4}), fusex::view<float>(b.data(), {4, 4}),
                                       fusex::view<float>(o.data(), {5}));
                 }),
                 ("bias must have shape [N] = [4]; got [5]"));
  // Strides cuBLASLt cannot take: no unit stride in either matrix dimension.
  fusex::view<float> strided(a.data(), {4, 4}, {8, 2});
  const std::string st = msg([&] {
    fusex::host::eval(fusex::view<float>(o.data(), {4, 4}),
                      fusex::matmul(strided, fusex::view<float>(b.data(), {4, 4})));
  });
  CHECK_CONTAINS(st, ("operand a (float32 [4, 4] strides [8, 2])"));
  CHECK_THROWS_AS(fusex::host::eval(fusex::view<float>(o.data(), {4, 4}),
                                    fusex::matmul(strided, fusex::view<float>(b.data(), {4, 4}))),
                  fusex::invalid_argument);
  // A destination the expression does not broadcast to.
  CHECK_THROWS_AS(
      fusex::host::eval(fusex::view<float>(o.data(), {4, 5}),
                        fusex::matmul(fusex::view<float>(a.data(), {4, 4}), fusex::view<float>(b.data(), {4, 4}))),
      fusex::shape_error);
}

TEST_CASE("matmul host: cublas_error carries the status name and the call", "[matmul][host][errors]") {
  try {
    FUSEX_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL("no exception");
  } catch (const fusex::error& e) {  // a fusex::error like every fusex exception
    const auto* ce = dynamic_cast<const fusex::cublas_error*>(&e);
    REQUIRE(ce != nullptr);
    CHECK(ce->status() == CUBLAS_STATUS_NOT_SUPPORTED);
    CHECK(std::string(ce->status_name()) == "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK_CONTAINS(e.what(), "CUBLAS_STATUS_NOT_SUPPORTED");
    CHECK_CONTAINS(e.what(), "'CUBLAS_STATUS_NOT_SUPPORTED'");  // the call's text
  }
}

// Error catalogue (docs/reliability.md): each bad input throws its documented type, and the
// message names the operands' shapes (and strides) or the dimensions that disagree.
TEST_CASE("matmul host: each bad input throws its type and names the shapes", "[matmul][host][errors]") {
  std::vector<float> a(64), b(64), o(64);
  auto typed = [](auto tag, auto&& f) {
    using E = typename decltype(tag)::type;
    try {
      f();
    } catch (const E& e) {
      return std::string(e.what());
    }
    return std::string("no exception of the expected type");
  };
  struct shape_err {
    using type = fusex::shape_error;
  };
  struct invalid_arg {
    using type = fusex::invalid_argument;
  };
  const fusex::view<float> a44(a.data(), {4, 4}), b44(b.data(), {4, 4});
  CHECK_CONTAINS(
      typed(shape_err{},
            [&] {
              (void)fusex::matmul(fusex::view<float>(a.data(), {8}), fusex::view<float>(b.data(), {8, 1}));
            }),
      ("operands must be 2-D matrices or 3-D batches of matrices; got float32 [8] strides [1] and float32 [8, 1]"));
  CHECK_CONTAINS(
      typed(shape_err{},
            [&] {
              (void)fusex::matmul(fusex::view<float>(a.data(), {4, 3}), b44);
            }),
      ("inner dimensions do not match (3 vs 4): float32 [4, 3] strides [3, 1] and float32 [4, 4] strides [4, 1]"));
  CHECK_CONTAINS(
      typed(shape_err{},
            [&] {
              (void)fusex::matmul(fusex::view<float>(a.data(), {2, 2, 2}), fusex::view<float>(b.data(), {3, 2, 2}));
            }),
      ("batch dimensions do not match (2 vs 3)"));
  CHECK_CONTAINS(typed(shape_err{},
                       [&] {
                         (void)fusex::linear(a44, fusex::view<float>(b.data(), {2, 4, 4}));
                       }),
                 ("fusex::linear: the weight must be 2-D [N, K]; got [2, 4, 4]"));
  CHECK_CONTAINS(typed(shape_err{}, [&] { (void)fusex::linear(a44, b44, fusex::view<float>(o.data(), {5})); }),
                 ("the bias must have shape [N] = [4]; got [5] (weight [4, 4])"));
  const fusex::view<float> strided(a.data(), {4, 4}, {8, 2});
  CHECK_CONTAINS(typed(invalid_arg{},
                       [&] {
                         fusex::host::eval(fusex::view<float>(o.data(), {4, 4}), fusex::matmul(strided, b44));
                       }),
                 ("operand a (float32 [4, 4] strides [8, 2]) is not a matrix layout cuBLASLt takes"));
  CHECK_CONTAINS(typed(shape_err{},
                       [&] {
                         fusex::host::eval(fusex::view<float>(o.data(), {4, 5}), fusex::matmul(a44, b44));
                       }),
                 ("cannot evaluate an expression of shape [4, 4] into a destination of shape [4, 5]"));
}
