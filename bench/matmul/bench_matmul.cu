// Fused matmul benchmarks (issue #8). FLOP/s counters count 2*M*N*K per GEMM.
//  (a) bf16 relu(linear(x, w, b)) at 8192^3 and M=N=4096, K=1024: fusex (one cuBLASLt call with
//      its RELU_BIAS epilogue), cuBLASLt's fused epilogue called directly, and a plain cuBLASLt GEMM
//      followed by a separate fusex elementwise kernel.            target: fusex within 3% of direct
//  (b) gelu_tanh(linear(x, w, b)) * 0.5 + residual on the same shapes: cuBLASLt's GELU_BIAS epilogue
//      into the bf16 destination, then one in-place kernel (fusex_custom), and with
//      matmul_options::float32_intermediate (fusex_custom_f32: GEMM into a float32 temporary + one
//      kernel).                                                     target: within 10% of (a)
//      direct_gelu: cuBLASLt's GELU_BIAS epilogue called directly, without the residual (what
//      cuBLASLt alone reaches for the GEMM part of (b): its epilogue's cost against (a)'s RELU_BIAS).
//  (c) 100 x (Linear(256, 256) + ReLU) at batch 16, fp32, eager and replayed from a graph, on the
//      fusex small-M path and on the cuBLASLt path (and cuBLASLt called directly, the issue's
//      baseline).                                        target: graph <= 280 us, eager <= 700 us
//  (d) chooser sweep: 20 chained relu(linear) layers in a graph, M x (N = K), fp32 and bf16, fusex
//      kernel vs cuBLASLt (range 2); per-layer time is the counter `us_per_layer`, and
//      `chooser_fusex` says what the current thresholds pick. The crossover sets the thresholds of
//      fusex::matmul_chooser_settings (docs/matmul.md).
//  (e) mixed precision: (a) with a float32 bias, into a bf16 and a float32 destination.
#include <fusex/fusex.hpp>
#include <fusex/matmul.hpp>

#include "fusex_bench.hpp"

#include <cublasLt.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace {

using fusex::bfloat16;

__global__ void fill_kernel(float* t, std::int64_t n, float lo, float hi, unsigned salt) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    t[i] = lo + (hi - lo) * (0.5f + 0.5f * __sinf(static_cast<float>((i + salt) % 100003) * 0.37f));
}

template <class T>
struct device_buffer {
  T* p = nullptr;
  std::int64_t n;
  explicit device_buffer(std::int64_t count, float lo = -1, float hi = 1, unsigned salt = 0) : n(count) {
    FUSEX_CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(n) * sizeof(T)));
    float* tmp = nullptr;
    FUSEX_CUDA_CHECK(cudaMalloc(&tmp, static_cast<std::size_t>(n) * sizeof(float)));
    fill_kernel<<<1024, 256, 0, fusex_bench::stream()>>>(tmp, n, lo, hi, salt);
    FUSEX_CUDA_CHECK(cudaGetLastError());
    fusex::eval(fusex::make_view(p, {n}), fusex::make_view(tmp, {n}), fusex_bench::stream());
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(fusex_bench::stream()));
    FUSEX_CUDA_CHECK(cudaFree(tmp));
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { cudaFree(p); }
};

void report_flops(benchmark::State& state, double flops_per_iteration, double seconds) {
  state.counters["TFLOPs"] = seconds > 0 ? flops_per_iteration * double(state.iterations()) / seconds / 1e12 : 0;
}

// cuBLASLt called directly for y = epi(x w^T + b): row-major x [M, K], w [N, K], y [M, N] as the
// column-major problem y^T = w x^T (what any direct user writes).
struct direct_lt {
  cublasLtHandle_t h{};
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  void* ws = nullptr;
  std::size_t ws_size = std::size_t{32} << 20;
  direct_lt(std::int64_t M, std::int64_t N, std::int64_t K, cudaDataType_t t, cudaDataType_t out_t,
            cublasLtEpilogue_t epi, const void* bias) {
    FUSEX_CUBLAS_CHECK(cublasLtCreate(&h));
    FUSEX_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (bias != nullptr)
      FUSEX_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    FUSEX_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&a, t, static_cast<std::uint64_t>(K), static_cast<std::uint64_t>(N), K));
    FUSEX_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&b, t, static_cast<std::uint64_t>(K), static_cast<std::uint64_t>(M), K));
    FUSEX_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&c, out_t, static_cast<std::uint64_t>(N), static_cast<std::uint64_t>(M), N));
    cublasLtMatmulPreference_t pref{};
    FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                                            sizeof(ws_size)));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    FUSEX_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, op, a, b, c, c, pref, 1, &r, &found));
    FUSEX_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (found == 0) throw fusex::error("bench: cuBLASLt found no algorithm");
    algo = r.algo;
    FUSEX_CUDA_CHECK(cudaMalloc(&ws, ws_size));
  }
  direct_lt(const direct_lt&) = delete;
  direct_lt& operator=(const direct_lt&) = delete;
  void run(const void* x, const void* w, void* y, cudaStream_t s) const {
    const float alpha = 1, beta = 0;
    FUSEX_CUBLAS_CHECK(cublasLtMatmul(h, op, &alpha, w, a, x, b, &beta, y, c, y, c, &algo, ws, ws_size, s));
  }
  ~direct_lt() {
    cudaFree(ws);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
  }
};

// --- (a) and (b) ----------------------------------------------------------------------------------
enum variant { fusex_fused, direct_fused, gemm_then_kernel, fusex_custom, fusex_custom_f32, direct_gelu };

template <variant V>
void bm_large(benchmark::State& state) {
  const std::int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  device_buffer<bfloat16> x(M * K, -1, 1, 1), w(N * K, -0.05f, 0.05f, 2), b(N, -1, 1, 3), y(M * N), r(M * N, -1, 1, 4);
  auto xv = fusex::make_view(x.p, {M, K});
  auto wv = fusex::make_view(w.p, {N, K});
  auto bv = fusex::make_view(b.p, {N});
  auto yv = fusex::make_view(y.p, {M, N});
  auto rv = fusex::make_view(r.p, {M, N});
  const cudaStream_t s = fusex_bench::stream();
  double secs = 0;
  if constexpr (V == fusex_fused) {
    state.SetLabel(fusex::explain(yv, fusex::relu(fusex::linear(xv, wv, bv))).find("cuBLASLt, 1 call") !=
                           std::string::npos
                       ? "one cuBLASLt call"
                       : "NOT one call");
    secs = fusex_bench::time_with_events(state, s, [&] { fusex::eval(yv, fusex::relu(fusex::linear(xv, wv, bv)), s); });
  } else if constexpr (V == direct_fused) {
    direct_lt lt(M, N, K, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_RELU_BIAS, b.p);
    secs = fusex_bench::time_with_events(state, s, [&] { lt.run(x.p, w.p, y.p, s); });
  } else if constexpr (V == direct_gelu) {
    direct_lt lt(M, N, K, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_GELU_BIAS, b.p);
    secs = fusex_bench::time_with_events(state, s, [&] { lt.run(x.p, w.p, y.p, s); });
  } else if constexpr (V == gemm_then_kernel) {
    direct_lt lt(M, N, K, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    secs = fusex_bench::time_with_events(state, s, [&] {
      lt.run(x.p, w.p, y.p, s);
      fusex::eval(yv, fusex::relu(yv + bv), s);
    });
  } else {
    // fusex_custom: cuBLASLt's GELU_BIAS epilogue into y (bf16), then y = y * 0.5 + r in place.
    // fusex_custom_f32: matmul_options::float32_intermediate, the product in a float32 temporary.
    fusex::matmul_options o;
    o.float32_intermediate = V == fusex_custom_f32;
    const std::string plan = fusex::explain(yv, fusex::gelu_tanh(fusex::linear(xv, wv, bv, o)) * 0.5f + rv);
    state.SetLabel(plan.find("for part of the expression") != std::string::npos ? "GELU_BIAS + in-place kernel"
                                                                                : "float32 temporary + kernel");
    secs = fusex_bench::time_with_events(
        state, s, [&] { fusex::eval(yv, fusex::gelu_tanh(fusex::linear(xv, wv, bv, o)) * 0.5f + rv, s); });
  }
  report_flops(state, 2.0 * double(M) * double(N) * double(K), secs);
}

// --- (e) mixed precision: bf16 x and w, a float32 bias (issue #29 item 4) --------------------------
// relu(linear(x, w, b32)) next to (a)'s single-dtype fusex_fused. range(3) = 0: a bf16 destination
// (cuBLASLt's bias must be in the output dtype, so the product goes to a float32 temporary and one
// kernel adds the bias and stores bf16: computed in float32, rounded once); 1: a float32
// destination (one cuBLASLt call, RELU_BIAS with the float32 bias).
void bm_mixed(benchmark::State& state) {
  const std::int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool out32 = state.range(3) != 0;
  device_buffer<bfloat16> x(M * K, -1, 1, 1), w(N * K, -0.05f, 0.05f, 2), y16(out32 ? 1 : M * N);
  device_buffer<float> b(N, -1, 1, 3), y32(out32 ? M * N : 1);
  auto xv = fusex::make_view(x.p, {M, K});
  auto wv = fusex::make_view(w.p, {N, K});
  auto bv = fusex::make_view(b.p, {N});
  const cudaStream_t s = fusex_bench::stream();
  const auto e = [&] { return fusex::relu(fusex::linear(xv, wv, bv)); };
  double secs = 0;
  if (out32) {
    auto yv = fusex::make_view(y32.p, {M, N});
    state.SetLabel(fusex::explain(yv, e()).find("cuBLASLt, 1 call") != std::string::npos ? "float32 out: one cuBLASLt call"
                                                                                          : "float32 out: NOT one call");
    secs = fusex_bench::time_with_events(state, s, [&] { fusex::eval(yv, e(), s); });
  } else {
    auto yv = fusex::make_view(y16.p, {M, N});
    state.SetLabel(fusex::explain(yv, e()).find("float32 temporary") != std::string::npos
                       ? "bf16 out: GEMM into a float32 temporary + kernel"
                       : "bf16 out: other route");
    secs = fusex_bench::time_with_events(state, s, [&] { fusex::eval(yv, e(), s); });
  }
  report_flops(state, 2.0 * double(M) * double(N) * double(K), secs);
}

// --- (c) 100 x (Linear(256, 256) + ReLU), batch 16 -----------------------------------------------
struct mlp {
  static constexpr std::int64_t layers = 100, batch = 16, width = 256;
  std::deque<device_buffer<float>> w, b, h;
  mlp() {
    for (std::int64_t l = 0; l < layers; ++l) {
      w.emplace_back(width * width, -0.12f, 0.12f, static_cast<unsigned>(l));
      b.emplace_back(width, -0.1f, 0.1f, static_cast<unsigned>(l + 7));
    }
    for (std::int64_t l = 0; l <= layers; ++l) h.emplace_back(batch * width, -1, 1, static_cast<unsigned>(l + 3));
  }
  auto act(std::int64_t l) { return fusex::make_view(h[static_cast<std::size_t>(l)].p, {batch, width}); }
  void step(cudaStream_t s, fusex::matmul_options o) {
    for (std::int64_t l = 0; l < layers; ++l) {
      const auto L = static_cast<std::size_t>(l);
      fusex::eval(act(l + 1),
                  fusex::relu(fusex::linear(act(l), fusex::make_view(w[L].p, {width, width}),
                                            fusex::make_view(b[L].p, {width}), o)),
                  s);
    }
  }
};

// Captures `enqueue` into a graph and times its replays. fusex work is captured with
// fusex::graph_capture (allocations during the capture, such as cuBLASLt's workspace, come from
// the capture's graph-private pool, as for the eager calls); `raw` uses cudaStreamBeginCapture
// directly (cuBLASLt called directly; fusex then allocates nothing and runs cuBLASLt without
// workspace).
template <class F>
double time_graph(benchmark::State& state, cudaStream_t s, F&& enqueue, bool raw = false) {
  enqueue();  // warm-up outside capture: plans and handles are made here
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!raw) {
    fusex::graph_exec ge = [&] {
      fusex::graph_capture cap(s);
      enqueue();
      return cap.finish();
    }();
    return fusex_bench::time_with_events(state, s, [&] { ge.launch(s); });
  }
  cudaGraph_t g{};
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge{};
  FUSEX_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  const double secs = fusex_bench::time_with_events(state, s, [&] { FUSEX_CUDA_CHECK(cudaGraphLaunch(ge, s)); });
  FUSEX_CUDA_CHECK(cudaGraphExecDestroy(ge));
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  return secs;
}

// range(0): 0 fusex path (automatic: the small-M kernel), 1 fusex forced onto cuBLASLt,
//           2 cuBLASLt called directly (RELU_BIAS); range(1): 0 eager, 1 graph.
void bm_mlp(benchmark::State& state) {
  mlp net;
  const cudaStream_t s = fusex_bench::stream();
  const int which = static_cast<int>(state.range(0));
  fusex::matmul_options o;
  if (which == 1) o.path = fusex::matmul_path::cublaslt;
  std::deque<direct_lt> direct;
  if (which == 2)
    for (std::int64_t l = 0; l < mlp::layers; ++l)
      direct.emplace_back(mlp::batch, mlp::width, mlp::width, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_RELU_BIAS,
                          net.b[static_cast<std::size_t>(l)].p);
  auto enqueue = [&] {
    if (which == 2) {
      for (std::int64_t l = 0; l < mlp::layers; ++l) {
        const auto L = static_cast<std::size_t>(l);
        direct[L].run(net.h[L].p, net.w[L].p, net.h[L + 1].p, s);
      }
    } else {
      net.step(s, o);
    }
  };
  state.SetLabel(which == 0 ? "fusex small-M kernel" : (which == 1 ? "fusex via cuBLASLt" : "cuBLASLt direct"));
  const double secs =
      state.range(1) ? time_graph(state, s, enqueue, which == 2) : fusex_bench::time_with_events(state, s, enqueue);
  state.counters["us_per_step"] = secs / double(state.iterations()) * 1e6;
  report_flops(state, 2.0 * mlp::layers * mlp::batch * mlp::width * mlp::width, secs);
}

// --- (d) chooser sweep ----------------------------------------------------------------------------
template <class T>
void bm_sweep(benchmark::State& state) {
  const std::int64_t M = state.range(0), NK = state.range(1);
  constexpr int chain = 20;
  device_buffer<T> w(NK * NK, -0.05f, 0.05f, 1), b(NK), h0(M * NK, -1, 1, 2), h1(M * NK);
  fusex::matmul_options o;
  o.path = state.range(2) ? fusex::matmul_path::cublaslt : fusex::matmul_path::fusex;
  auto wv = fusex::make_view(w.p, {NK, NK});
  auto bv = fusex::make_view(b.p, {NK});
  auto v0 = fusex::make_view(h0.p, {M, NK});
  auto v1 = fusex::make_view(h1.p, {M, NK});
  const cudaStream_t s = fusex_bench::stream();
  // What the automatic chooser picks for this shape now (1: the fusex kernel), next to the
  // measured path, so that a table of the sweep shows where its thresholds are wrong.
  const char* why = "";
  fusex::detail::gemm_dims g;
  g.m = M;
  g.n = NK;
  g.k = NK;
  const bool chooser_fusex =
      fusex::detail::choose_fusex_kernel(fusex::dtype_of<T>(), g, fusex::matmul_chooser(), why);
  state.counters["chooser_fusex"] = chooser_fusex ? 1 : 0;
  state.SetLabel(state.range(2) ? "cuBLASLt" : "fusex kernel");
  const double secs = time_graph(state, s, [&] {
    for (int i = 0; i < chain; i += 2) {
      fusex::eval(v1, fusex::relu(fusex::linear(v0, wv, bv, o)), s);
      fusex::eval(v0, fusex::relu(fusex::linear(v1, wv, bv, o)), s);
    }
  });
  state.counters["us_per_layer"] = secs / double(state.iterations()) / chain * 1e6;
  report_flops(state, 2.0 * chain * double(M) * double(NK) * double(NK), secs);
}

// range(0) M, range(1) N = K, range(2) the path (0 the fusex kernel, 1 cuBLASLt): both paths at
// every point, so the crossover in M and in N*K can be read off per dtype.
void sweep_args(benchmark::internal::Benchmark* b) {
  for (std::int64_t m : {1, 2, 4, 8, 16, 32, 48, 64})
    for (std::int64_t nk : {256, 1024, 2048, 4096, 8192})
      for (std::int64_t lt : {0, 1}) b->Args({m, nk, lt});
}

}  // namespace

// (a), (b): at most ~1.3 ms per iteration; 30 iterations each keep the whole program well under 60 s.
BENCHMARK(bm_large<fusex_fused>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_large<direct_fused>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_large<gemm_then_kernel>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_large<fusex_custom>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_large<fusex_custom_f32>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_large<direct_gelu>)
    ->Args({8192, 8192, 8192})
    ->Args({4096, 4096, 1024})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// (e)
BENCHMARK(bm_mixed)
    ->Args({8192, 8192, 8192, 0})
    ->Args({8192, 8192, 8192, 1})
    ->Args({4096, 4096, 1024, 0})
    ->Args({4096, 4096, 1024, 1})
    ->Iterations(30)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
// (c)
BENCHMARK(bm_mlp)->ArgsProduct({{0, 1, 2}, {0, 1}})->Iterations(200)->UseManualTime()->Unit(benchmark::kMicrosecond);
// (d)
BENCHMARK(bm_sweep<float>)->Apply(sweep_args)->Iterations(100)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_sweep<bfloat16>)->Apply(sweep_args)->Iterations(100)->UseManualTime()->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
