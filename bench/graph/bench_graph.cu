// Graph capture benchmarks (issue: scoped graph capture). All baselines are measured in the same run.
//
//  1. A chain of 100 dependent small fused expressions on [16, 784] fp32 (y = relu(a * 0.5 + c),
//     ping-pong): fusex eager, fusex graph replay, each with programmatic dependent launch (PDL) off
//     and on, and the raw-CUDA floor (a hand-written kernel of the same arithmetic, captured with
//     cudaStreamBeginCapture, PDL off and on). GPU time per chain by CUDA events, 10 chains per
//     timed batch. Counters: us_per_kernel, and the ratios the issue's targets are stated in
//     (speedup_vs_eager, vs_raw_floor, pdl_gain).
//  2. Capture + instantiate cost for 10, 100 and 1000 nodes: fusex (graph_capture + eval +
//     finish) against raw CUDA (cudaStreamBeginCapture + kernel launches + end + instantiate).
//     Host time.
//  3. graph_cache lookup + launch against a raw cudaGraphLaunch of the same one-kernel graph, and
//     graph_exec::launch. Host time per call over 200 calls; counter overhead_us against raw.
#include <fusex/fusex.hpp>

#include "fusex_bench.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t rows = 16, cols = 784, numel = rows * cols;
constexpr int chain_length = 100;
constexpr int chains_per_batch = 10;
constexpr float scale = 0.5f;

cudaStream_t bench_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

// Inputs and the two ping-pong buffers of the chain, in cudaMalloc'd memory.
struct chain_buffers {
  float *x = nullptr, *c = nullptr, *a = nullptr, *b = nullptr;
  chain_buffers() {
    FUSEX_CUDA_CHECK(cudaMalloc(&x, numel * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&c, cols * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&a, numel * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&b, numel * sizeof(float)));
    std::vector<float> hx(numel), hc(cols);
    for (std::int64_t i = 0; i < numel; ++i) hx[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
    for (std::int64_t i = 0; i < cols; ++i) hc[static_cast<std::size_t>(i)] = static_cast<float>((i * 13) % 29) / 14.0f - 0.9f;
    FUSEX_CUDA_CHECK(cudaMemcpy(x, hx.data(), numel * sizeof(float), cudaMemcpyHostToDevice));
    FUSEX_CUDA_CHECK(cudaMemcpy(c, hc.data(), cols * sizeof(float), cudaMemcpyHostToDevice));
  }
  chain_buffers(const chain_buffers&) = delete;
  chain_buffers& operator=(const chain_buffers&) = delete;
  ~chain_buffers() {
    cudaFree(x);
    cudaFree(c);
    cudaFree(a);
    cudaFree(b);
  }
  // The chain's result (in b after an even number of steps from a).
  std::vector<float> result() const {
    std::vector<float> h(numel);
    FUSEX_CUDA_CHECK(cudaMemcpy(h.data(), b, numel * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

chain_buffers& buffers() {
  static chain_buffers bufs;
  return bufs;
}

// --- the fusex chain -----------------------------------------------------------------------------
// Step 0: a = relu(x * 0.5 + c); step i: (b or a) = relu((a or b) * 0.5 + c). One expression type.
void fusex_step(float* y, const float* in, const float* c, cudaStream_t s) {
  const auto iv = fusex::make_view(in, {rows, cols});
  const auto cv = fusex::make_view(c, {cols});
  fusex::eval(fusex::make_view(y, {rows, cols}), fusex::relu(iv * scale + cv), s);
}
void fusex_chain(cudaStream_t s, int steps = chain_length) {
  chain_buffers& B = buffers();
  fusex_step(B.a, B.x, B.c, s);
  for (int i = 1; i < steps; ++i) {
    if (i % 2) fusex_step(B.b, B.a, B.c, s);
    else fusex_step(B.a, B.b, B.c, s);
  }
}

// --- the raw-CUDA floor --------------------------------------------------------------------------
// The same arithmetic, hand-written. Like fusex's kernels it waits for its predecessor's results
// first (a no-op unless launched with PDL) and lets the next kernel start launching.
__global__ void raw_step_kernel(const float* __restrict__ in, const float* __restrict__ c, float* __restrict__ y, int n,
                                int ncols) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = in[i] * scale + c[i % ncols];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

void raw_step(float* y, const float* in, const float* c, cudaStream_t s, bool pdl) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>((numel + 255) / 256));
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  FUSEX_CUDA_CHECK(cudaLaunchKernelEx(&cfg, raw_step_kernel, in, c, y, static_cast<int>(numel), static_cast<int>(cols)));
}
void raw_chain(cudaStream_t s, bool pdl, int steps = chain_length) {
  chain_buffers& B = buffers();
  raw_step(B.a, B.x, B.c, s, pdl);
  for (int i = 1; i < steps; ++i) {
    if (i % 2) raw_step(B.b, B.a, B.c, s, pdl);
    else raw_step(B.a, B.b, B.c, s, pdl);
  }
}

cudaGraphExec_t raw_capture(cudaStream_t s, bool pdl, int steps) {
  cudaGraph_t g = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  raw_chain(s, pdl, steps);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e = nullptr;
  FUSEX_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  return e;
}

// --- timing and the run's shared results ---------------------------------------------------------
std::map<std::string, double>& seconds_per_chain() {
  static std::map<std::string, double> m;
  return m;
}
double measured(const char* name) {
  auto it = seconds_per_chain().find(name);
  return it == seconds_per_chain().end() ? 0 : it->second;
}

// GPU time per chain, by events around batches of chains_per_batch chains.
template <class F>
double time_chains(benchmark::State& state, F&& enqueue_chain) {
  cudaStream_t s = bench_stream();
  cudaEvent_t start, stop;
  FUSEX_CUDA_CHECK(cudaEventCreate(&start));
  FUSEX_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) enqueue_chain(s);  // warm-up
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (auto _ : state) {
    FUSEX_CUDA_CHECK(cudaEventRecord(start, s));
    for (int i = 0; i < chains_per_batch; ++i) enqueue_chain(s);
    FUSEX_CUDA_CHECK(cudaEventRecord(stop, s));
    FUSEX_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double per_chain = static_cast<double>(ms) / 1e3 / chains_per_batch;
    state.SetIterationTime(per_chain);
    total += per_chain;
  }
  FUSEX_CUDA_CHECK(cudaEventDestroy(start));
  FUSEX_CUDA_CHECK(cudaEventDestroy(stop));
  const double avg = state.iterations() ? total / static_cast<double>(state.iterations()) : 0;
  state.counters["us_per_kernel"] = avg * 1e6 / chain_length;
  return avg;
}

void set_ratio(benchmark::State& state, const char* counter, double num, double den) {
  if (num > 0 && den > 0) state.counters[counter] = num / den;
}

// The raw floor's result, to check fusex's against (the arithmetic is exact: x * 0.5 + c).
std::vector<float>& raw_result() {
  static std::vector<float> r;
  return r;
}
bool verify(benchmark::State& state) {
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  const auto got = buffers().result();
  if (raw_result().empty()) raw_result() = got;
  if (std::memcmp(got.data(), raw_result().data(), got.size() * sizeof(float)) != 0) {
    state.SkipWithError("result differs from the raw-CUDA chain");
    return false;
  }
  return true;
}

// --- 1. the chain --------------------------------------------------------------------------------
void bm_chain_raw_graph(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  cudaGraphExec_t e = raw_capture(bench_stream(), pdl, chain_length);
  const double t = time_chains(state, [&](cudaStream_t s) { FUSEX_CUDA_CHECK(cudaGraphLaunch(e, s)); });
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "raw_pdl" : "raw"] = t;
  if (pdl) set_ratio(state, "pdl_gain", measured("raw"), t);
  FUSEX_CUDA_CHECK(cudaGraphExecDestroy(e));
}

void bm_chain_fusex_eager(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  const bool was = fusex::programmatic_dependent_launch();
  fusex::set_programmatic_dependent_launch(pdl);
  const double t = time_chains(state, [&](cudaStream_t s) { fusex_chain(s); });
  fusex::set_programmatic_dependent_launch(was);
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "eager_pdl" : "eager"] = t;
  if (pdl) set_ratio(state, "pdl_gain", measured("eager"), t);
}

void bm_chain_fusex_graph(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  const bool was = fusex::programmatic_dependent_launch();
  fusex::set_programmatic_dependent_launch(pdl);  // read when the kernels are captured
  fusex::graph_exec g = [&] {
    fusex::capture_options o;
    o.memory = fusex::capture_memory::none();  // the chain allocates nothing
    fusex::graph_capture cap(bench_stream(), o);
    fusex_chain(bench_stream());
    return cap.finish();
  }();
  fusex::set_programmatic_dependent_launch(was);
  const double t = time_chains(state, [&](cudaStream_t s) { g.launch(s); });
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "graph_pdl" : "graph"] = t;
  state.counters["kernel_nodes"] = static_cast<double>(g.kernel_node_count());
  set_ratio(state, "speedup_vs_eager", measured("eager"), t);  // target >= 3
  set_ratio(state, "vs_raw_floor", t, measured(pdl ? "raw_pdl" : "raw"));  // target <= 1.05
  if (pdl) {
    set_ratio(state, "vs_raw_floor_no_pdl", t, measured("raw"));
    set_ratio(state, "pdl_gain", measured("graph"), t);
  }
}

// --- 2. capture + instantiate cost ---------------------------------------------------------------
void bm_capture_fusex(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool pool = state.range(1) != 0;
  fusex::capture_options o;
  if (pool) o.pool.reserve_bytes = 0;  // an (empty) graph-private pool of the default arena
  else o.memory = fusex::capture_memory::none();
  cudaStream_t s = bench_stream();
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    fusex::graph_exec g;
    {
      fusex::graph_capture cap(s, o);
      fusex_chain(s, nodes);
      g = cap.finish();
    }
    const auto t1 = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(secs);
    total += secs;
    g = fusex::graph_exec();  // destruction not timed
  }
  if (state.iterations()) state.counters["us_per_node"] = total * 1e6 / static_cast<double>(state.iterations()) / nodes;
}

void bm_capture_raw(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  cudaStream_t s = bench_stream();
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    cudaGraphExec_t e = raw_capture(s, true, nodes);
    const auto t1 = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(secs);
    total += secs;
    FUSEX_CUDA_CHECK(cudaGraphExecDestroy(e));
  }
  if (state.iterations()) state.counters["us_per_node"] = total * 1e6 / static_cast<double>(state.iterations()) / nodes;
}

// --- 3. graph_cache lookup + launch --------------------------------------------------------------
constexpr int calls_per_iteration = 200;

template <class Launch>
double host_cost_per_call(benchmark::State& state, Launch&& launch) {
  cudaStream_t s = bench_stream();
  launch(0);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_iteration; ++i) launch(i);
    const auto t1 = std::chrono::steady_clock::now();
    const double per_call = std::chrono::duration<double>(t1 - t0).count() / calls_per_iteration;
    state.SetIterationTime(per_call);
    total += per_call;
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));  // keep the queue short (not timed)
  }
  return state.iterations() ? total / static_cast<double>(state.iterations()) : 0;
}

double& raw_launch_seconds() {
  static double t = 0;
  return t;
}

// One small graph: a single step of the chain.
fusex::graph_exec one_step_graph(std::int64_t batch_rows) {
  chain_buffers& B = buffers();
  fusex::capture_options o;
  o.memory = fusex::capture_memory::none();
  fusex::graph_capture cap(bench_stream(), o);
  fusex::eval(fusex::make_view(B.a, {batch_rows, cols}),
              fusex::relu(fusex::make_view(static_cast<const float*>(B.x), {batch_rows, cols}) * scale +
                          fusex::make_view(static_cast<const float*>(B.c), {cols})),
              bench_stream());
  return cap.finish();
}

void bm_launch_raw_graph(benchmark::State& state) {
  fusex::graph_exec g = one_step_graph(rows);
  const cudaGraphExec_t e = g.native_handle();
  raw_launch_seconds() = host_cost_per_call(state, [&](int) { FUSEX_CUDA_CHECK(cudaGraphLaunch(e, bench_stream())); });
}

void bm_launch_graph_exec(benchmark::State& state) {
  fusex::graph_exec g = one_step_graph(rows);
  const double t = host_cost_per_call(state, [&](int) { g.launch(bench_stream()); });
  if (raw_launch_seconds() > 0) state.counters["overhead_us"] = (t - raw_launch_seconds()) * 1e6;
}

void bm_launch_graph_cache(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));  // distinct shapes cycled through
  fusex::graph_cache_options o;
  o.capacity = 8;
  o.warmup_runs = 0;
  o.capture.memory = fusex::capture_memory::none();
  fusex::graph_cache cache(o);
  std::vector<fusex::graph_key> key_list;
  chain_buffers& B = buffers();
  for (int k = 0; k < keys; ++k) {
    const std::int64_t r = rows - k;  // 16, 15, 14 rows: one graph per shape
    key_list.push_back(fusex::graph_key::of(fusex::shape_t{r, cols}));
  }
  auto work_for = [&](std::int64_t r) {
    return [&B, r](cudaStream_t st) {
      fusex::eval(fusex::make_view(B.a, {r, cols}),
                  fusex::relu(fusex::make_view(static_cast<const float*>(B.x), {r, cols}) * scale +
                              fusex::make_view(static_cast<const float*>(B.c), {cols})),
                  st);
    };
  };
  for (int k = 0; k < keys; ++k) cache.run(key_list[static_cast<std::size_t>(k)], bench_stream(), work_for(rows - k));
  const double t = host_cost_per_call(state, [&](int i) {
    const int k = i % keys;
    cache.run(key_list[static_cast<std::size_t>(k)], bench_stream(), work_for(rows - k));
  });
  const auto st = cache.stats();
  state.counters["captures"] = static_cast<double>(st.captures);
  state.counters["hit_rate"] = st.hits + st.misses ? static_cast<double>(st.hits) / static_cast<double>(st.hits + st.misses) : 0;
  if (raw_launch_seconds() > 0) state.counters["overhead_us"] = (t - raw_launch_seconds()) * 1e6;  // target <= 0.5
}

}  // namespace

BENCHMARK(bm_chain_raw_graph)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain_fusex_eager)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain_fusex_graph)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_capture_fusex)
    ->ArgNames({"nodes", "pool"})
    ->Args({10, 0})
    ->Args({100, 0})
    ->Args({1000, 0})
    ->Args({100, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_capture_raw)->ArgName("nodes")->Arg(10)->Arg(100)->Arg(1000)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_raw_graph)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_graph_exec)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_graph_cache)->ArgName("keys")->Arg(1)->Arg(3)->UseManualTime()->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
