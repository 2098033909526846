// fusex::layer_sequence (issue #30): 100 x (Linear(256, 256) + ReLU), fp32 and bf16, at batch 1, 16 and 64,
// as one persistent kernel (thread-block clusters) against one fused linear per layer (the small-M
// GEMM kernel with the bias and ReLU in its epilogue), each eager and replayed from a CUDA graph,
// timed with CUDA events. Counter us_per_step: GPU time per 100-layer step; max_abs_diff: the
// largest difference of the step's output from the per-layer path's (a sanity check, not a test).
#include <fusex/fusex.hpp>
#include <fusex/sequence.hpp>

#include "fusex_bench.hpp"

#include <cmath>
#include <cstdint>
#include <deque>
#include <random>
#include <vector>

namespace {

template <class T>
struct device_values {
  T* p = nullptr;
  std::size_t n;
  device_values(std::size_t count, float lo, float hi, unsigned seed) : n(count) {
    std::vector<T> h(n);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    for (auto& v : h) v = fusex::convert<T>(d(rng));
    FUSEX_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    FUSEX_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~device_values() { cudaFree(p); }
  device_values(const device_values&) = delete;
  device_values& operator=(const device_values&) = delete;
  std::vector<T> download() const {
    std::vector<T> h(n);
    FUSEX_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

constexpr std::int64_t layers = 100, width = 256;

template <class T>
struct net {
  std::deque<device_values<T>> w, b;
  fusex::basic_layer_sequence<T> seq;
  net() {
    const float r = 1.0f / std::sqrt(float(width));  // torch.nn.Linear's initialisation range
    for (std::int64_t l = 0; l < layers; ++l) {
      w.emplace_back(width * width, -r, r, static_cast<unsigned>(l));
      b.emplace_back(width, -r, r, static_cast<unsigned>(l + 1000));
      seq.linear(fusex::make_view(static_cast<const T*>(w.back().p), {width, width}),
                 fusex::make_view(static_cast<const T*>(b.back().p), {width}), fusex::activation::relu);
    }
  }
};

template <class T>
net<T>& the_net() {
  static net<T> n;
  return n;
}

// range(0): batch; range(1): 0 per layer, 1 persistent; range(2): 0 eager, 1 graph.
template <class T>
void bm_sequence(benchmark::State& state) {
  const std::int64_t m = state.range(0);
  const bool persistent = state.range(1) != 0, graph = state.range(2) != 0;
  net<T>& n = the_net<T>();
  const cudaStream_t s = fusex_bench::stream();
  device_values<T> x(static_cast<std::size_t>(m * width), -1, 1, 7), y(static_cast<std::size_t>(m * width), 0, 0, 8),
      ref(static_cast<std::size_t>(m * width), 0, 0, 9);
  const auto xv = fusex::make_view(static_cast<const T*>(x.p), {m, width});
  n.seq.allow_persistent(false);
  n.seq.run(xv, fusex::make_view(ref.p, {m, width}), s);
  n.seq.allow_persistent(persistent);
  state.SetLabel(n.seq.plan(m));
  auto step = [&] { n.seq.run(xv, fusex::make_view(y.p, {m, width}), s); };
  step();
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  double secs = 0;
  if (graph) {
    fusex::graph_exec ge = [&] {
      fusex::graph_capture cap(s);
      step();
      return cap.finish();
    }();
    secs = fusex_bench::time_with_events(state, s, [&] { ge.launch(s); });
  } else {
    secs = fusex_bench::time_with_events(state, s, step);
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto got = y.download(), want = ref.download();
  double diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    diff = std::fmax(diff, std::fabs(fusex::convert<double>(got[i]) - fusex::convert<double>(want[i])));
  state.counters["max_abs_diff"] = diff;
  state.counters["us_per_step"] = secs / double(state.iterations()) * 1e6;
  n.seq.allow_persistent(true);
}

}  // namespace

BENCHMARK(bm_sequence<float>)
    ->ArgsProduct({{1, 16, 64}, {0, 1}, {0, 1}})
    ->Iterations(300)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_sequence<fusex::bfloat16>)
    ->ArgsProduct({{1, 16, 64}, {0, 1}, {0, 1}})
    ->Iterations(300)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
