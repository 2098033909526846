// GPU tests of the small-M path (fusex's GEMM kernel with the epilogue inlined), of kernel-node
// counts under stream capture (a built-in epilogue is one GEMM node, an arbitrary one at most
// two), and of a chain of 100 Linear(256, 256) + ReLU layers at batch 16, eager and replayed from a
// graph (fusex::graph_capture and a raw capture), each layer checked against the reference
// computed from that layer's actual input. Checked evaluations go through fusex_test::run (eager, and
// captured and replayed in test_matmul_gpu.graph) except where a case says why not.
#include "matmul_gpu_support.hpp"

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

using namespace matmul_test;
using fusex::bfloat16;
using fusex::half;

namespace {

template <class T>
void small_m_sweep(std::int64_t N, std::int64_t K) {
  fusex_test::stream_guard s;
  operand<T> w(static_cast<std::size_t>(N * K), -1, 1, 5), bias(static_cast<std::size_t>(N), -1, 1, 6);
  w.on_device({N, K});
  bias.on_device({N});
  for (std::int64_t M : {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64}) {
    INFO(fusex::dtype_name<T>() << " M " << M << " N " << N << " K " << K);
    operand<T> x(static_cast<std::size_t>(M * K), -1, 1, static_cast<unsigned>(7 + M));
    x.on_device({M, K});
    const product P = reference_product(x.on_host(), w.on_host().t());
    device_array<T> out(static_cast<std::size_t>(M * N));
    out.poison();
    fusex::view<T> o(out.data(), {M, N});
    const auto e = fusex::relu(fusex::linear(x.v, w.v, bias.v, path(fusex::matmul_path::fusex)));
    const std::string plan = fusex::explain(o, e);
    INFO(plan);
    CHECK(plan.find("fusex GEMM kernel") != std::string::npos);
    fusex_test::run(s.s, [&](cudaStream_t st) { fusex::eval(o, e, st); });
    const std::string m =
        check(out,
              expected(P, o,
                       [&](double v, auto, auto, std::int64_t j) {
                         return std::fmax(0.0, v + fusex::convert<double>(bias.host[static_cast<std::size_t>(j)]));
                       }),
              tolerance<T>(K));
    INFO(m);
    CHECK(m.empty());
  }
}

}  // namespace

TEST_CASE("matmul gpu: small-M path, vector loads", "[matmul][gpu][small_m]") {
  small_m_sweep<float>(256, 256);
  small_m_sweep<half>(256, 256);
  small_m_sweep<bfloat16>(256, 256);
  small_m_sweep<float>(250, 1024);  // a partial last block of columns
}

TEST_CASE("matmul gpu: small-M path, block shapes (K split over 1 to 4 warps, partial tiles)",
          "[matmul][gpu][small_m]") {
  small_m_sweep<float>(250, 8);     // K = 8: one warp, two threads with loads
  small_m_sweep<bfloat16>(37, 64);  // one warp, a partial last column tile
  small_m_sweep<float>(6, 512);     // four warps, N below one tile of 8 columns
  small_m_sweep<half>(100, 4096);   // four warps, several steps per thread
}

TEST_CASE("matmul gpu: small-M path, element loads (K not a multiple of the vector)", "[matmul][gpu][small_m]") {
  small_m_sweep<float>(130, 255);
  small_m_sweep<half>(33, 65);
  small_m_sweep<bfloat16>(3, 1);
}

TEST_CASE("matmul gpu: small-M path, strided operands and M above 64", "[matmul][gpu][small_m]") {
  fusex_test::stream_guard s;
  const std::int64_t N = 72, K = 96, ld = K + 8;
  operand<float> wide(static_cast<std::size_t>(130 * ld), -1, 1, 11), w(static_cast<std::size_t>(N * ld), -1, 1, 12),
      bias(static_cast<std::size_t>(N), -1, 1, 13), xt(static_cast<std::size_t>(K * 130), -1, 1, 14);
  w.on_device({N, K}, {ld, 1});  // weight rows with padding: 16-byte loads
  bias.on_device({N});
  for (std::int64_t M : {1, 5, 16, 64, 65, 130}) {
    for (int layout = 0; layout < 2; ++layout) {
      // 0: x a column slice of a wider row-major matrix (16-byte loads); 1: x transposed in memory
      // (unit stride along M: element loads).
      INFO("M " << M << " layout " << layout);
      operand<float>& src = layout == 0 ? wide : xt;
      const auto xv = layout == 0 ? src.on_device({M, K}, {ld, 1}) : src.on_device({M, K}, {1, M});
      const product P = reference_product(src.on_host(), w.on_host().t());
      device_array<float> out(static_cast<std::size_t>(M * N));
      out.poison();
      fusex::view<float> o(out.data(), {M, N});
      const auto e = fusex::gelu(fusex::linear(xv, w.v, bias.v, path(fusex::matmul_path::fusex))) - 1.0f;
      CHECK(fusex::explain(o, e).find("fusex GEMM kernel") != std::string::npos);
      fusex_test::run(s.s, [&](cudaStream_t st) { fusex::eval(o, e, st); });
      const std::string m =
          check(out,
                expected(P, o,
                         [&](double v, auto, auto, std::int64_t j) {
                           return gelu_ref(v + static_cast<double>(bias.host[static_cast<std::size_t>(j)])) - 1;
                         }),
                tolerance<float>(K) * 2);
      INFO(m);
      CHECK(m.empty());
    }
  }
}

TEST_CASE("matmul gpu: small-M path, batched with strided operands", "[matmul][gpu][small_m]") {
  fusex_test::stream_guard s;
  const std::int64_t B = 4, M = 9, N = 40, K = 24;
  operand<float> a(B * K * M, -1, 1, 1), b(K * N, -1, 1, 2), res(B * M * N, -1, 1, 3);
  const auto av = a.on_device({B, K, M}).transpose(1, 2);  // column-major matrices
  a.v = av;
  b.on_device({K, N});
  res.on_device({B, M, N});
  const product P = reference_product(a.on_host(), b.on_host());
  device_array<float> out(static_cast<std::size_t>(B * M * N));
  out.poison();
  fusex::view<float> o(out.data(), {B, M, N});
  fusex_test::run(s.s, [&](cudaStream_t st) {
    fusex::eval(o, fusex::silu(fusex::matmul(av, b.v, path(fusex::matmul_path::fusex))) * 2.0f + res.v, st);
  });
  const std::string m = check(
      out,
      expected(P, o,
               [&](double v, std::int64_t z, std::int64_t i, std::int64_t j) {
                 return silu_ref(v) * 2 + static_cast<double>(res.host[static_cast<std::size_t>((z * M + i) * N + j)]);
               }),
      tolerance<float>(K) * 4);
  INFO(m);
  CHECK(m.empty());
}

namespace {

// Attention's `p @ v`: p [B, M, K] row-major, v [B, K, N] a column slice of rows 3N wide (the V
// third of a QKV projection): contiguous along N, not along K, so the N-major variant runs.
template <class T>
void n_major_case(std::int64_t B, std::int64_t M, std::int64_t N, std::int64_t K, unsigned seed) {
  INFO(fusex::dtype_name<T>() << " B " << B << " M " << M << " N " << N << " K " << K);
  fusex_test::stream_guard s;
  operand<T> pm(static_cast<std::size_t>(B * M * K), -1, 1, seed),
      qkv(static_cast<std::size_t>(B * K * 3 * N), -1, 1, seed + 1),
      res(static_cast<std::size_t>(B * M * N), -1, 1, seed + 2);
  pm.on_device({B, M, K});
  const fusex::strides_t v_strides{K * 3 * N, 3 * N, 1};
  const fusex::view<T> v(qkv.dev.data() + 2 * N, {B, K, N}, v_strides);
  const fusex::view<T> v_host(qkv.host.data() + 2 * N, {B, K, N}, v_strides);  // the same slice of the host copy
  res.on_device({B, M, N});
  const product P = reference_product(pm.on_host(), v_host);
  device_array<T> out(static_cast<std::size_t>(B * M * N));
  out.poison();
  fusex::view<T> o(out.data(), {B, M, N});
  const auto e = fusex::matmul(pm.v, v, path(fusex::matmul_path::fusex)) * 0.5f + res.v;
  const std::string plan = fusex::explain(o, e);
  INFO(plan);
  CHECK(plan.find("threads along N") != std::string::npos);
  fusex_test::run(s.s, [&](cudaStream_t st) { fusex::eval(o, e, st); });
  const std::string m =
      check(out,
            expected(P, o,
                     [&](double x, std::int64_t z, std::int64_t i, std::int64_t j) {
                       return x * 0.5 + fusex::convert<double>(res.host[static_cast<std::size_t>((z * M + i) * N + j)]);
                     }),
            tolerance<T>(K) * 2);
  INFO(m);
  CHECK(m.empty());
}

}  // namespace

TEST_CASE("matmul gpu: small-M path, N-major variant (right operand contiguous along N)", "[matmul][gpu][small_m]") {
  // The tour's attention shape, then partial row tiles (M not a multiple of 4), partial blocks of
  // columns (N not a multiple of 32 or above 128), K not a multiple of the 4-step unroll, K = 1.
  n_major_case<float>(16, 32, 256, 32, 21);
  n_major_case<bfloat16>(16, 32, 256, 32, 22);
  n_major_case<half>(3, 7, 300, 37, 23);
  for (std::int64_t M : {1, 3, 4, 5, 9, 64})
    for (std::int64_t N : {2, 33, 129})
      for (std::int64_t K : {1, 3, 4, 13})
        n_major_case<float>(2, M, N, K, static_cast<unsigned>(100 + M * 31 + N * 7 + K));
}

// Eager in both runs (not through fusex_test::run): it counts nodes in raw captures of its own and
// launches eagerly under a launch_monitor, which counts what is enqueued, not what a graph replays.
TEST_CASE("matmul gpu: kernel nodes per evaluation, by capture", "[matmul][gpu][graph]") {
  fusex_test::stream_guard s;
  const std::int64_t M = 256, N = 256, K = 256;
  operand<float> x(M * K, -1, 1, 1), w(N * K, -1, 1, 2), bias(N, -1, 1, 3), res(M * N, -1, 1, 4);
  x.on_device({M, K});
  w.on_device({N, K});
  bias.on_device({N});
  res.on_device({M, N});
  device_array<float> out(static_cast<std::size_t>(M * N));
  fusex::view<float> o(out.data(), {M, N});
  const auto lt = path(fusex::matmul_path::cublaslt);
  const auto builtin = fusex::relu(fusex::linear(x.v, w.v, bias.v, lt) + res.v);
  const auto arbitrary = fusex::gelu_tanh(fusex::linear(x.v, w.v, bias.v, lt)) * 0.5f + res.v;
  // Warm up outside capture: the first call of a shape makes its cuBLASLt plan.
  fusex::eval(o, builtin, s.s);
  fusex::eval(o, arbitrary, s.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
  CHECK(kernel_nodes_of(s.s, [&] { fusex::eval(o, builtin, s.s); }) == 1);
  // An epilogue cuBLASLt lacks: at most one cuBLASLt call and one fusex kernel (what fusex
  // launches, counted by the launch monitor). cuBLASLt itself may split K into a GEMM kernel and
  // a reduction kernel (seen on the H200 at 256^3 fp32 under a capture: 3 kernel nodes).
  {
    fusex::launch_monitor mon(s.s);
    fusex::eval(o, arbitrary, s.s);
    CHECK(mon.report().kernel_launches <= 2);
  }
  CHECK(kernel_nodes_of(s.s, [&] { fusex::eval(o, arbitrary, s.s); }) <= 3);
  // The fusex kernel: one node whatever the epilogue.
  fusex::view<float> x16(x.dev.data(), {16, K}), o16(out.data(), {16, N});
  CHECK(kernel_nodes_of(s.s, [&] { fusex::eval(o16, fusex::silu(fusex::linear(x16, w.v, bias.v)) * 3.0f, s.s); }) == 1);
}

namespace {
// 100 layers of Linear(256, 256) + ReLU at batch 16, fp32. Weights scaled so activations stay O(1).
struct mlp {
  static constexpr std::int64_t layers = 100, batch = 16, width = 256;
  std::deque<operand<float>> w, b;  // deque: the elements do not move
  std::deque<device_array<float>> h;
  mlp() {
    for (std::int64_t l = 0; l < layers; ++l) {
      w.emplace_back(static_cast<std::size_t>(width * width), -0.12, 0.12, static_cast<unsigned>(1000 + l));
      b.emplace_back(static_cast<std::size_t>(width), -0.1, 0.1, static_cast<unsigned>(2000 + l));
      w.back().on_device({width, width});
      b.back().on_device({width});
    }
    for (std::int64_t l = 0; l <= layers; ++l) h.emplace_back(static_cast<std::size_t>(batch * width));
    auto x0 = fusex_test::random_values<float>(static_cast<std::size_t>(batch * width), -1, 1, 3);
    h[0].upload(x0);
  }
  fusex::view<float> act(std::int64_t l) {
    return fusex::view<float>(h[static_cast<std::size_t>(l)].data(), {batch, width});
  }
  void run(cudaStream_t s, fusex::matmul_options o) {
    for (std::int64_t l = 0; l < layers; ++l) {
      const auto L = static_cast<std::size_t>(l);
      fusex::eval(act(l + 1), fusex::relu(fusex::linear(act(l), w[L].v, b[L].v, o)), s);
    }
  }
  // Each layer against the reference from its actual input.
  void check_layers() {
    for (std::int64_t l = 0; l < layers; ++l) {
      const auto in = h[static_cast<std::size_t>(l)].download();
      fusex::view<float> inv(const_cast<float*>(in.data()), {batch, width});
      const auto& W = w[static_cast<std::size_t>(l)];
      const product P = reference_product(inv, W.on_host().t());
      fusex::view<float> ov(h[static_cast<std::size_t>(l + 1)].data(), {batch, width});
      const std::string m = check(
          h[static_cast<std::size_t>(l + 1)],
          expected(P, ov,
                   [&](double v, auto, auto, std::int64_t j) {
                     return std::fmax(0.0, v + static_cast<double>(
                                                   b[static_cast<std::size_t>(l)].host[static_cast<std::size_t>(j)]));
                   }),
          tolerance<float>(width));
      INFO("layer " << l << ": " << m);
      CHECK(m.empty());
    }
  }
};
}  // namespace

// Not through fusex_test::run: it runs the chain eagerly, under graph_capture and under a raw capture
// itself, reading the layers back between them (the same in both runs).
TEST_CASE("matmul gpu: 100 x (Linear(256,256) + ReLU) at batch 16, eager and graph", "[matmul][gpu][graph]") {
  fusex_test::stream_guard s;
  mlp net;
  for (auto p : {fusex::matmul_path::automatic, fusex::matmul_path::cublaslt}) {
    INFO("path " << (p == fusex::matmul_path::automatic ? "automatic (fusex kernel)" : "cublaslt"));
    for (std::int64_t l = 1; l <= mlp::layers; ++l) net.h[static_cast<std::size_t>(l)].poison();
    net.run(s.s, path(p));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
    net.check_layers();
    const auto eager = net.h.back().download();
    // Captured with fusex::graph_capture (cuBLASLt's workspace from the graph-private pool: the
    // eager plan): the replay gives the eager result bit for bit.
    for (std::int64_t l = 1; l <= mlp::layers; ++l) net.h[static_cast<std::size_t>(l)].poison();
    {
      fusex::graph_exec ge = [&] {
        fusex::graph_capture cap(s.s);
        net.run(s.s, path(p));
        return cap.finish();
      }();
      ge.launch(s.s);
      ge.launch(s.s);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
      const auto replayed = net.h.back().download();
      CHECK(std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)) == 0);
    }
    // A raw capture: one kernel node per layer (fusex allocates nothing in it; cuBLASLt runs a
    // plan without workspace, whose results may differ from the eager plan's in the last bits).
    for (std::int64_t l = 1; l <= mlp::layers; ++l) net.h[static_cast<std::size_t>(l)].poison();
    FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal));
    try {
      net.run(s.s, path(p));
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(s.s, &broken);
      if (broken != nullptr) cudaGraphDestroy(broken);
      throw;
    }
    cudaGraph_t g = nullptr;
    FUSEX_CUDA_CHECK(cudaStreamEndCapture(s.s, &g));
    CHECK(fusex_test::count_kernel_nodes(g) == static_cast<std::size_t>(mlp::layers));
    cudaGraphExec_t ge = nullptr;
    FUSEX_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    FUSEX_CUDA_CHECK(cudaGraphLaunch(ge, s.s));
    FUSEX_CUDA_CHECK(cudaGraphLaunch(ge, s.s));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
    net.check_layers();
    if (p == fusex::matmul_path::automatic) {  // the fusex kernel: the same kernel, bit for bit
      const auto replayed = net.h.back().download();
      CHECK(std::memcmp(eager.data(), replayed.data(), eager.size() * sizeof(float)) == 0);
    }
    FUSEX_CUDA_CHECK(cudaGraphExecDestroy(ge));
    FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  }
}
