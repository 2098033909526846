// GPU tests of fusex matmul: every epilogue form on every path (one cuBLASLt call, GEMM +
// elementwise kernel, the fusex kernel) with bfloat16 operands, against a double-precision host
// reference with poisoned outputs (matmul_gpu_support.hpp). One translation unit per dtype: each
// instantiates every epilogue kernel, so they compile in parallel.
#include "matmul_gpu_support.hpp"

using namespace matmul_test;
using fusex::bfloat16;

TEST_CASE("matmul gpu: every epilogue form, bfloat16", "[matmul][gpu]") { epilogue_forms<bfloat16>(96, 80, 72); }

// Mixed precision (issue #29 item 4): bfloat16 / float16 x and w, a float32 bias and residual, into
// float32 and 16-bit destinations, on every path and at small and large M (the fusex kernel and
// cuBLASLt): computed in float32, rounded once at the store.
template <class T>
void mixed_case(std::int64_t M, std::int64_t N, std::int64_t K) {
  fusex_test::stream_guard s;
  linear_setup<T> L(M, N, K, 300);
  operand<float> bias(static_cast<std::size_t>(N), -1, 1, 301), res(static_cast<std::size_t>(M * N), -1, 1, 302);
  bias.on_device({N});
  res.on_device({M, N});
  auto b = [&](std::int64_t j) { return static_cast<double>(bias.host[static_cast<std::size_t>(j)]); };
  auto r = [&](std::int64_t i, std::int64_t j) { return static_cast<double>(res.host[static_cast<std::size_t>(i * N + j)]); };
  for (auto p : all_paths) {
    INFO("path " << path_name(p) << ", " << fusex::dtype_name<T>() << " x, w; float32 bias; M N K " << M << " " << N
                 << " " << K);
    const auto e = fusex::gelu_tanh(fusex::linear(L.x.v, L.w.v, bias.v, path(p))) + 0.5f * res.v;
    const ref_fn f = [&](double v, auto, std::int64_t i, std::int64_t j) { return gelu_tanh_ref(v + b(j)) + 0.5 * r(i, j); };
    check_eval<float>(s.s, L.P, e, f, tolerance<float>(K) + 2e-4);
    check_eval<T>(s.s, L.P, e, f, tolerance<T>(K) + 2e-4);
    check_eval<T>(
        s.s, L.P, fusex::relu(fusex::linear(L.x.v, L.w.v, bias.v, path(p))),
        [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + b(j)); }, tolerance<T>(K));
  }
}

TEST_CASE("matmul gpu: mixed precision, 16-bit x and w with a float32 bias", "[matmul][gpu][mixed]") {
  mixed_case<bfloat16>(8, 96, 72);
  mixed_case<bfloat16>(300, 130, 96);
  mixed_case<fusex::half>(8, 64, 40);
  mixed_case<fusex::half>(260, 96, 64);
}
