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
//  3. graph_cache lookup + launch against a raw cudaGraphLaunch of the same one-kernel graph(s), and
//     graph_exec::launch. Host time per call over 200 calls; the raw cudaGraphLaunch of the same
//     graphs is timed in the same iterations (interleaved), so us_per_call, raw_us_per_call,
//     overhead_us (target <= 0.5) and ratio_to_raw compare like with like.
//
// Everything that must not happen inside a capture (cudaMalloc of the buffers, the stream, the
// first launch of every kernel, which may load its module) is done by prepare() before any
// benchmark runs and before any capture; buffers() and bench_stream() refuse to run unprepared.
#include <fusex/fusex.hpp>

#include "fusex_bench.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t rows = 16, cols = 784, numel = rows * cols;
constexpr int chain_length = 100;
constexpr int chains_per_batch = 10;
constexpr float scale = 0.5f;

// Inputs and the two ping-pong buffers of the chain, in cudaMalloc'd memory.
struct chain_buffers {
  float *x = nullptr, *c = nullptr, *a = nullptr, *b = nullptr;
  chain_buffers() {
    FUSEX_CUDA_CHECK(cudaMalloc(&x, numel * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&c, cols * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&a, numel * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&b, numel * sizeof(float)));
    std::vector<float> hx(numel), hc(cols);
    for (std::int64_t i = 0; i < numel; ++i)
      hx[static_cast<std::size_t>(i)] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
    for (std::int64_t i = 0; i < cols; ++i)
      hc[static_cast<std::size_t>(i)] = static_cast<float>((i * 13) % 29) / 14.0f - 0.9f;
    FUSEX_CUDA_CHECK(cudaMemcpy(x, hx.data(), numel * sizeof(float), cudaMemcpyHostToDevice));
    FUSEX_CUDA_CHECK(cudaMemcpy(c, hc.data(), cols * sizeof(float), cudaMemcpyHostToDevice));
  }
  chain_buffers(const chain_buffers&) = delete;
  chain_buffers& operator=(const chain_buffers&) = delete;
  ~chain_buffers() {  // a destructor: errors are not reported (teardown() synchronised first)
    (void)cudaFree(x);
    (void)cudaFree(c);
    (void)cudaFree(a);
    (void)cudaFree(b);
  }
  // The chain's result (in b after an even number of steps from a).
  std::vector<float> result() const {
    std::vector<float> h(numel);
    FUSEX_CUDA_CHECK(cudaMemcpy(h.data(), b, numel * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

// The benchmark's stream and buffers are made by prepare(), never lazily: a lazy cudaMalloc or
// cudaStreamCreate reached first inside a capture fails with cudaErrorStreamCaptureUnsupported
// and invalidates the capture.
struct bench_state {
  cudaStream_t stream = nullptr;
  std::unique_ptr<chain_buffers> buffers;
};
bench_state& state_storage() {
  static bench_state st;
  return st;
}

cudaStream_t bench_stream() {
  const cudaStream_t s = state_storage().stream;
  if (s == nullptr) throw std::logic_error("bench_graph: bench_stream() before prepare()");
  return s;
}

chain_buffers& buffers() {
  chain_buffers* b = state_storage().buffers.get();
  if (b == nullptr) throw std::logic_error("bench_graph: buffers() before prepare()");
  return *b;
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
  FUSEX_CUDA_CHECK(
      cudaLaunchKernelEx(&cfg, raw_step_kernel, in, c, y, static_cast<int>(numel), static_cast<int>(cols)));
}
void raw_chain(cudaStream_t s, bool pdl, int steps = chain_length) {
  chain_buffers& B = buffers();
  raw_step(B.a, B.x, B.c, s, pdl);
  for (int i = 1; i < steps; ++i) {
    if (i % 2) raw_step(B.b, B.a, B.c, s, pdl);
    else raw_step(B.a, B.b, B.c, s, pdl);
  }
}

// An instantiated raw graph, destroyed with its scope.
class raw_graph {
 public:
  explicit raw_graph(cudaGraphExec_t e) noexcept : e_(e) {}
  raw_graph(const raw_graph&) = delete;
  raw_graph& operator=(const raw_graph&) = delete;
  ~raw_graph() {
    if (e_ != nullptr) (void)cudaGraphExecDestroy(e_);
  }
  cudaGraphExec_t get() const noexcept { return e_; }

 private:
  cudaGraphExec_t e_ = nullptr;
};

raw_graph raw_capture(cudaStream_t s, bool pdl, int steps) {
  cudaGraph_t g = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  try {
    raw_chain(s, pdl, steps);
  } catch (...) {
    // End (and drop) the capture so that the stream is usable again.
    if (cudaStreamEndCapture(s, &g) == cudaSuccess && g != nullptr) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    throw;
  }
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&e, g, 0);
  (void)cudaGraphDestroy(g);
  FUSEX_CUDA_CHECK(err);
  return raw_graph(e);
}

// One step of the chain on `batch_rows` rows: a = relu(x * 0.5 + c) (the graph_cache's work).
void one_step(chain_buffers& B, std::int64_t batch_rows, cudaStream_t s) {
  fusex::eval(fusex::make_view(B.a, {batch_rows, cols}),
              fusex::relu(fusex::make_view(static_cast<const float*>(B.x), {batch_rows, cols}) * scale +
                          fusex::make_view(static_cast<const float*>(B.c), {cols})),
              s);
}

// Restores the PDL switch on every exit path.
class pdl_setting {
 public:
  explicit pdl_setting(bool on) : was_(fusex::programmatic_dependent_launch()) {
    fusex::set_programmatic_dependent_launch(on);
  }
  pdl_setting(const pdl_setting&) = delete;
  pdl_setting& operator=(const pdl_setting&) = delete;
  ~pdl_setting() { fusex::set_programmatic_dependent_launch(was_); }

 private:
  bool was_;
};

constexpr int cache_max_keys = 3;  // bm_launch_graph_cache cycles 16, 15, 14 rows

// --- setup, before any benchmark and any capture ------------------------------------------------
// The stream, the buffers, and one eager launch of every kernel the captures below record (the
// fusex step on 16, 15 and 14 rows and the chain, the raw kernel; PDL off and on), so that no
// allocation, stream creation or module load can first happen inside a capture.
void prepare() {
  bench_state& st = state_storage();
  if (st.stream != nullptr) return;
  cudaStream_t s = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  st.stream = s;
  st.buffers = std::make_unique<chain_buffers>();
  chain_buffers& B = *st.buffers;
  for (const bool pdl : {false, true}) {
    const pdl_setting p(pdl);
    for (int k = 0; k < cache_max_keys; ++k) one_step(B, rows - k, s);
    fusex_chain(s, 2);
    raw_chain(s, pdl, 2);
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
}

void teardown() {
  bench_state& st = state_storage();
  if (st.stream == nullptr) return;
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.stream));
  st.buffers.reset();
  // Graph-private pools were released ordered on this stream: the arena must not touch it again.
  fusex::default_arena().forget_stream(st.stream);
  FUSEX_CUDA_CHECK(cudaStreamDestroy(st.stream));
  st.stream = nullptr;
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
  state.counters["us_per_chain"] = avg * 1e6;
  state.counters["us_per_kernel"] = avg * 1e6 / chain_length;
  return avg;
}

// Sets `counter` to num / den when both were measured.
void set_ratio(benchmark::State& state, const char* counter, double num, double den) {
  if (num > 0 && den > 0) state.counters[counter] = num / den;
}
// Sets `counter` to 1 when `ok`, 0 otherwise, when both figures were measured.
void set_target(benchmark::State& state, const char* counter, double num, double den, bool (*ok)(double)) {
  if (num > 0 && den > 0) state.counters[counter] = ok(num / den) ? 1 : 0;
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
// Counters (per PDL setting): us_per_chain, us_per_kernel; on the graph rows speedup_vs_eager
// (fusex eager / replay, same PDL setting; issue #7 target >= 3, target_3x_met), vs_raw_floor
// (replay / raw graph, same PDL setting; target <= 1.05, target_raw_5pct_met); pdl_gain (PDL off /
// on) on every PDL row.
void bm_chain_raw_graph(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  const raw_graph e = raw_capture(bench_stream(), pdl, chain_length);
  const double t = time_chains(state, [&](cudaStream_t s) { FUSEX_CUDA_CHECK(cudaGraphLaunch(e.get(), s)); });
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "raw_pdl" : "raw"] = t;
  if (pdl) set_ratio(state, "pdl_gain", measured("raw"), t);
}

void bm_chain_fusex_eager(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  double t = 0;
  {
    const pdl_setting p(pdl);
    t = time_chains(state, [&](cudaStream_t s) { fusex_chain(s); });
  }
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "eager_pdl" : "eager"] = t;
  if (pdl) set_ratio(state, "pdl_gain", measured("eager"), t);
  set_ratio(state, "vs_raw_floor", t, measured(pdl ? "raw_pdl" : "raw"));
}

void bm_chain_fusex_graph(benchmark::State& state) {
  const bool pdl = state.range(0) != 0;
  fusex::graph_exec g = [&] {
    const pdl_setting p(pdl);  // read when the kernels are captured
    fusex::capture_options o;
    o.memory = fusex::capture_memory::none();  // the chain allocates nothing
    fusex::graph_capture cap(bench_stream(), o);
    fusex_chain(bench_stream());
    return cap.finish();
  }();
  const double t = time_chains(state, [&](cudaStream_t s) { g.launch(s); });
  if (!verify(state)) return;
  seconds_per_chain()[pdl ? "graph_pdl" : "graph"] = t;
  state.counters["kernel_nodes"] = static_cast<double>(g.kernel_node_count());
  const double eager = measured(pdl ? "eager_pdl" : "eager");
  const double raw = measured(pdl ? "raw_pdl" : "raw");
  set_ratio(state, "speedup_vs_eager", eager, t);  // target >= 3
  set_target(state, "target_3x_met", eager, t, [](double r) { return r >= 3.0; });
  set_ratio(state, "vs_raw_floor", t, raw);  // target <= 1.05
  set_target(state, "target_raw_5pct_met", t, raw, [](double r) { return r <= 1.05; });
  if (pdl) {
    set_ratio(state, "speedup_vs_eager_no_pdl", measured("eager"), t);
    set_ratio(state, "vs_raw_floor_no_pdl", t, measured("raw"));
    set_ratio(state, "pdl_gain", measured("graph"), t);
  }
}

// The same graph with the elementwise launch shape of before elementwise_tuning::spread_small
// (the chain's 3136 float4 vectors: 4 blocks of 256 threads, against 25 one-warp blocks), PDL on.
void bm_chain_fusex_graph_unspread(benchmark::State& state) {
  fusex::detail::elementwise_tuning_state().spread_small = false;
  fusex::graph_exec g = [&] {
    const pdl_setting p(true);
    fusex::capture_options o;
    o.memory = fusex::capture_memory::none();
    fusex::graph_capture cap(bench_stream(), o);
    fusex_chain(bench_stream());
    return cap.finish();
  }();
  fusex::detail::elementwise_tuning_state().spread_small = true;
  const double t = time_chains(state, [&](cudaStream_t s) { g.launch(s); });
  if (!verify(state)) return;
  set_ratio(state, "vs_raw_floor", t, measured("raw_pdl"));
  set_ratio(state, "spread_gain", t, measured("graph_pdl"));
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
    {
      const raw_graph e = raw_capture(s, true, nodes);
      const auto t1 = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(t1 - t0).count();
      state.SetIterationTime(secs);
      total += secs;
    }  // destruction not timed
  }
  if (state.iterations()) state.counters["us_per_node"] = total * 1e6 / static_cast<double>(state.iterations()) / nodes;
}

// --- 3. graph_cache lookup + launch --------------------------------------------------------------
// Host time per call. Each iteration times calls_per_iteration calls of the benchmarked launch and,
// interleaved with them in the same iteration, calls_per_iteration raw cudaGraphLaunch calls of the
// same executable graphs: the two see the same queue depth and machine state. Counters:
// us_per_call, raw_us_per_call, overhead_us (target for graph_cache: <= 0.5, target_overhead_met)
// and ratio_to_raw. Manual time is the benchmarked launch's per-call time.
constexpr int calls_per_iteration = 200;

struct launch_cost {
  double seconds_per_call = 0;
  double raw_seconds_per_call = 0;
};

template <class Launch, class RawLaunch>
launch_cost host_cost_per_call(benchmark::State& state, Launch&& launch, RawLaunch&& raw_launch) {
  cudaStream_t s = bench_stream();
  for (int i = 0; i < calls_per_iteration; ++i) {  // warm-up of both paths
    launch(i);
    raw_launch(i);
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0, raw_total = 0;
  for (auto _ : state) {
    const auto r0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_iteration; ++i) raw_launch(i);
    const auto r1 = std::chrono::steady_clock::now();
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));  // keep the queue short (not timed)
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls_per_iteration; ++i) launch(i);
    const auto t1 = std::chrono::steady_clock::now();
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const double per_call = std::chrono::duration<double>(t1 - t0).count() / calls_per_iteration;
    state.SetIterationTime(per_call);
    total += per_call;
    raw_total += std::chrono::duration<double>(r1 - r0).count() / calls_per_iteration;
  }
  launch_cost c;
  if (state.iterations()) {
    c.seconds_per_call = total / static_cast<double>(state.iterations());
    c.raw_seconds_per_call = raw_total / static_cast<double>(state.iterations());
  }
  return c;
}

void report_launch_cost(benchmark::State& state, const launch_cost& c, bool target) {
  state.counters["us_per_call"] = c.seconds_per_call * 1e6;
  state.counters["raw_us_per_call"] = c.raw_seconds_per_call * 1e6;
  if (c.raw_seconds_per_call > 0) {
    const double overhead_us = (c.seconds_per_call - c.raw_seconds_per_call) * 1e6;
    state.counters["overhead_us"] = overhead_us;
    state.counters["ratio_to_raw"] = c.seconds_per_call / c.raw_seconds_per_call;
    if (target) state.counters["target_overhead_met"] = overhead_us <= 0.5 ? 1 : 0;
  }
}

// One small graph: a single step of the chain.
fusex::graph_exec one_step_graph(std::int64_t batch_rows) {
  fusex::capture_options o;
  o.memory = fusex::capture_memory::none();
  fusex::graph_capture cap(bench_stream(), o);
  one_step(buffers(), batch_rows, bench_stream());
  return cap.finish();
}

void bm_launch_raw_graph(benchmark::State& state) {
  fusex::graph_exec g = one_step_graph(rows);
  const cudaGraphExec_t e = g.native_handle();
  auto raw = [&](int) { FUSEX_CUDA_CHECK(cudaGraphLaunch(e, bench_stream())); };
  const launch_cost c = host_cost_per_call(state, raw, raw);  // raw against itself: the noise floor
  report_launch_cost(state, c, false);
}

void bm_launch_graph_exec(benchmark::State& state) {
  fusex::graph_exec g = one_step_graph(rows);
  const cudaGraphExec_t e = g.native_handle();
  const launch_cost c = host_cost_per_call(
      state, [&](int) { g.launch(bench_stream()); },
      [&](int) { FUSEX_CUDA_CHECK(cudaGraphLaunch(e, bench_stream())); });
  report_launch_cost(state, c, false);
}

void bm_launch_graph_cache(benchmark::State& state) {
  const int keys = static_cast<int>(state.range(0));  // distinct shapes cycled through
  if (keys < 1 || keys > cache_max_keys) {
    state.SkipWithError("keys out of range (prepare() warms up 1 to 3 shapes)");
    return;
  }
  fusex::graph_cache_options o;
  o.capacity = 8;
  o.warmup_runs = 1;  // every kernel was already launched eagerly by prepare(); this is the usual setting
  o.capture.memory = fusex::capture_memory::none();
  fusex::graph_cache cache(o);
  std::vector<fusex::graph_key> key_list;
  chain_buffers& B = buffers();
  for (int k = 0; k < keys; ++k) {
    const std::int64_t r = rows - k;  // 16, 15, 14 rows: one graph per shape
    key_list.push_back(fusex::graph_key::of(fusex::shape_t{r, cols}));
  }
  auto work_for = [&B](std::int64_t r) { return [&B, r](cudaStream_t st) { one_step(B, r, st); }; };
  std::vector<cudaGraphExec_t> natives;
  for (int k = 0; k < keys; ++k) {
    natives.push_back(
        cache.run(key_list[static_cast<std::size_t>(k)], bench_stream(), work_for(rows - k)).native_handle());
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  cache.reset_stats();  // count the timed calls only
  const launch_cost c = host_cost_per_call(
      state,
      [&](int i) {
        const int k = i % keys;
        cache.run(key_list[static_cast<std::size_t>(k)], bench_stream(), work_for(rows - k));
      },
      [&](int i) { FUSEX_CUDA_CHECK(cudaGraphLaunch(natives[static_cast<std::size_t>(i % keys)], bench_stream())); });
  const auto st = cache.stats();
  state.counters["captures"] = static_cast<double>(st.captures);  // 0: every timed call is a hit
  state.counters["hit_rate"] =
      st.hits + st.misses ? static_cast<double>(st.hits) / static_cast<double>(st.hits + st.misses) : 0;
  report_launch_cost(state, c, true);  // target: overhead_us <= 0.5
}

}  // namespace

BENCHMARK(bm_chain_raw_graph)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain_fusex_eager)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain_fusex_graph)->ArgName("pdl")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_chain_fusex_graph_unspread)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_capture_fusex)
    ->ArgNames({"nodes", "pool"})
    ->Args({10, 0})
    ->Args({100, 0})
    ->Args({1000, 0})
    ->Args({100, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_capture_raw)
    ->ArgName("nodes")
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_raw_graph)->Iterations(3000)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_graph_exec)->Iterations(3000)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_launch_graph_cache)
    ->ArgName("keys")
    ->Arg(1)
    ->Arg(3)
    ->Iterations(3000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// FUSEX_BENCHMARK_MAIN with prepare() before the benchmarks (and any capture) and teardown()
// after them, and CUDA or fusex errors reported instead of aborting.
int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (!fusex_bench::report_device()) return 0;
  try {
    fusex_bench::apply_resource_override();
    prepare();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    teardown();
  } catch (const fusex::error& e) {
    std::fprintf(stderr, "bench_graph: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_graph: %s\n", e.what());
    return 1;
  }
  return 0;
}
