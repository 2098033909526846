// GPU tests of fusex matmul: transposed / column-major / batched operands, odd shapes, K = 0, TF32
// and bad input, each against a double-precision host reference with poisoned outputs. Tolerances:
// matmul_gpu_support.hpp. (Every epilogue form on every path, one translation unit per dtype:
// test_matmul_epilogue_{f32,f16,bf16}_gpu.cu; small-M path, chains and graph node counts:
// test_matmul_small_m_gpu.cu.) Checked evaluations go through fusex_test::run: eager, and captured
// into a graph and replayed in test_matmul_gpu.graph (matmul_gpu_support.hpp).
#include "matmul_gpu_support.hpp"

#include <array>
#include <cstdint>
#include <string>

using namespace matmul_test;
using fusex::half;

TEST_CASE("matmul gpu: odd shapes", "[matmul][gpu]") {
  for (auto sh : {std::array<std::int64_t, 3>{1, 1, 1}, {17, 33, 65}, {1, 4096, 4096}, {130, 3, 1}, {3, 130, 17}}) {
    INFO("M N K " << sh[0] << " " << sh[1] << " " << sh[2]);
    fusex_test::stream_guard s;
    linear_setup<float> L(sh[0], sh[1], sh[2], 7);
    for (auto p : all_paths) {
      INFO("path " << path_name(p));
      check_eval<float>(
          s.s, L.P, fusex::relu(fusex::linear(L.x.v, L.w.v, L.bias.v, path(p))),
          [&](double v, auto, auto, std::int64_t j) { return std::fmax(0.0, v + L.b(j)); }, tolerance<float>(sh[2]));
    }
  }
}

TEST_CASE("matmul gpu: one product used twice (h * sigmoid(h)) on every path", "[matmul][gpu][share]") {
  for (auto sh : {std::array<std::int64_t, 3>{8, 96, 64}, {300, 130, 70}}) {
    INFO("M N K " << sh[0] << " " << sh[1] << " " << sh[2]);
    fusex_test::stream_guard s;
    linear_setup<float> L(sh[0], sh[1], sh[2], 9);
    for (auto p : all_paths) {
      INFO("path " << path_name(p));
      const auto h = fusex::linear(L.x.v, L.w.v, L.bias.v, path(p));
      check_eval<float>(
          s.s, L.P, h * fusex::sigmoid(h), [&](double v, auto, auto, std::int64_t j) { return silu_ref(v + L.b(j)); },
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
      check_eval<float>(
          s.s, P, fusex::relu(fusex::matmul(av, bv, path(p)) + bias.v),
          [&](double v, auto, auto, std::int64_t j) {
            return std::fmax(0.0, v + static_cast<double>(bias.host[static_cast<std::size_t>(j)]));
          },
          tolerance<float>(K));
      // A column-major destination too.
      check_eval<float>(
          s.s, P, fusex::matmul(av, bv, path(p)), [](double v, auto, auto, auto) { return v; }, tolerance<float>(K),
          true);
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
    fusex::view<half> bv =
        form == 0 ? b.on_device({B, K, N}) : (form == 1 ? b.on_device({K, N}) : b.on_device({B, N, K}).transpose(1, 2));
    b.v = bv;
    const product P = reference_product(a.on_host(), b.on_host());
    for (auto p : all_paths) {
      INFO("form " << form << " path " << path_name(p));
      check_eval<half>(
          s.s, P, fusex::relu(fusex::matmul(av, bv, path(p)) + bias.v + res.v),
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
    check_eval<float>(
        s.s, P, fusex::relu(fusex::matmul(a.on_device({8, 0}), b.on_device({0, 8}), path(p)) + bias.v),
        [&](double, auto, auto, std::int64_t j) {
          return std::fmax(0.0, static_cast<double>(bias.host[static_cast<std::size_t>(j)]));
        },
        1e-7);
    device_array<float> out(1);
    fusex_test::run(s.s, [&](cudaStream_t st) {
      fusex::eval(fusex::view<float>(out.data(), {0, 8}),
                  fusex::matmul(a.on_device({0, 2}), b.on_device({2, 8}), path(p)), st);
      fusex::eval(fusex::view<float>(out.data(), {8, 0}),
                  fusex::matmul(a.on_device({8, 2}), b.on_device({2, 0}), path(p)), st);
    });
  }
}

TEST_CASE("matmul gpu: TF32 only by opt-in", "[matmul][gpu]") {
  fusex_test::stream_guard s;
  linear_setup<float> L(256, 256, 512, 9);
  fusex::matmul_options o = path(fusex::matmul_path::cublaslt);
  check_eval<float>(
      s.s, L.P, fusex::linear(L.x.v, L.w.v, o), [](double v, auto, auto, auto) { return v; }, tolerance<float>(512));
  o.allow_tf32 = true;
  check_eval<float>(
      s.s, L.P, fusex::linear(L.x.v, L.w.v, o), [](double v, auto, auto, auto) { return v; }, 2e-3 * std::sqrt(512.0));
}

TEST_CASE("matmul gpu: bad input", "[matmul][gpu][errors]") {
  fusex_test::stream_guard s;
  operand<float> a(64, -1, 1, 1), b(64, -1, 1, 2);
  device_array<float> out(64);
  // Each through the run's launch path: under graph the throw happens inside a capture, which the
  // guard discards before rethrowing.
  auto what = [&](auto&& f) {
    try {
      fusex_test::run(s.s, [&](cudaStream_t) { f(); });
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
    fusex::eval(fusex::view<float>(out.data(), {4, 4}), fusex::matmul(a.on_device({4, 4}, {8, 2}), b.on_device({4, 4})),
                s.s);
  });
  INFO(strides);
  CHECK(strides.find("strides [8, 2]") != std::string::npos);
  CHECK_THROWS_AS(fusex_test::run(s.s,
                                  [&](cudaStream_t st) {
                                    fusex::eval(fusex::view<float>(out.data(), {4, 5}),
                                                fusex::matmul(a.on_device({4, 4}), b.on_device({4, 4})), st);
                                  }),
                  fusex::shape_error);
  // Nothing was launched: the stream is clean.
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
}
