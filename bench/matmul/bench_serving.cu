// Tail latency of a serving loop (issue #30): the MLP of 100 x (Linear(256, 256) + ReLU), fp32,
// batch 16, served step after step. Each step's input is written by the host into pinned memory
// (fusex::pinned_buffer, two slots), copied to the device on a copy stream while the previous step
// computes, computed on the compute stream, and its output copied back into pinned memory.
//
// One step's latency is timed by CUDA events: from an event recorded on the copy stream just
// before the step's input copy is submitted to one recorded on the compute stream after its output
// copy (both on the GPU's clock; the host thread is pinned to one CPU, and it submits step i+1
// while step i runs, so a step's latency includes any wait behind the step before it). Versions
// (range(0)): 0 unfused (linear, then relu: two kernels per layer, temporaries from
// cudaMallocAsync, no PDL: an eager framework), 1 fused (one kernel per layer, arena), 2 fused and
// replayed from a CUDA graph, 3 fusex::layer_sequence's persistent kernel in a graph.
// Counters: p50_us, p99_us, p999_us, max_us, p99_over_p50 over `steps` steps (after 200 warm-up
// steps), and us_per_step (the loop's wall time per step).
#include <fusex/fusex.hpp>
#include <fusex/memory/pinned.hpp>
#include <fusex/sequence.hpp>

#include "fusex_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace {

constexpr std::int64_t layers = 100, width = 256, batch = 16, steps = 10000, warmup = 200;

struct device_floats {
  float* p = nullptr;
  device_floats(std::size_t n, float lo, float hi, unsigned seed) {
    std::vector<float> h(n);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    for (auto& v : h) v = d(rng);
    FUSEX_CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~device_floats() { cudaFree(p); }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
};

struct model {
  std::deque<device_floats> w, b;
  fusex::layer_sequence seq;
  model() {
    const float r = 1.0f / std::sqrt(float(width));
    for (std::int64_t l = 0; l < layers; ++l) {
      w.emplace_back(width * width, -r, r, static_cast<unsigned>(l));
      b.emplace_back(width, -r, r, static_cast<unsigned>(l + 1000));
      seq.linear(wv(l), bv(l), fusex::activation::relu);
    }
  }
  fusex::view<const float> wv(std::int64_t l) const {
    return fusex::make_view(static_cast<const float*>(w[static_cast<std::size_t>(l)].p), {width, width});
  }
  fusex::view<const float> bv(std::int64_t l) const {
    return fusex::make_view(static_cast<const float*>(b[static_cast<std::size_t>(l)].p), {width});
  }
  // One step of version v (0, 1 or 2: per layer), x -> y, temporaries from the default resource.
  void step(int v, const float* x, float* y, cudaStream_t s) const {
    fusex::buffer<float> tmp[2];
    fusex::view<const float> in = fusex::make_view(x, {batch, width});
    for (std::int64_t l = 0; l < layers; ++l) {
      fusex::view<float> out = fusex::make_view(y, {batch, width});
      if (l + 1 != layers) {
        tmp[l & 1] = fusex::buffer<float>(static_cast<std::size_t>(batch * width), s);
        out = fusex::make_view(tmp[l & 1].data(), {batch, width});
      }
      if (v == 0) {
        fusex::buffer<float> t(static_cast<std::size_t>(batch * width), s);
        const auto tv = fusex::make_view(t.data(), {batch, width});
        fusex::eval(tv, fusex::linear(in, wv(l), bv(l)), s);
        fusex::eval(out, fusex::relu(tv), s);
      } else {
        fusex::eval(out, fusex::relu(fusex::linear(in, wv(l), bv(l))), s);
      }
      in = out;
    }
  }
};

model& the_model() {
  static model m;
  return m;
}

void pin_thread() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#endif
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

void bm_serving(benchmark::State& state) {
  const int version = static_cast<int>(state.range(0));
  pin_thread();
  model& m = the_model();
  static fusex::cuda_async_resource async_resource;
  fusex::arena& ar = fusex::default_arena();
  fusex::set_default_resource(version == 0 ? fusex::device_resource_ref(async_resource)
                                           : fusex::device_resource_ref(ar));
  fusex::set_programmatic_dependent_launch(version != 0);
  cudaStream_t compute{}, copy{};
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  const std::size_t n = static_cast<std::size_t>(batch * width);
  fusex::pinned_buffer<float> in_h[2] = {fusex::pinned_buffer<float>(n), fusex::pinned_buffer<float>(n)};
  fusex::pinned_buffer<float> out_h[2] = {fusex::pinned_buffer<float>(n), fusex::pinned_buffer<float>(n)};
  float *in_d[2], *out_d[2];
  for (int s = 0; s < 2; ++s) {
    FUSEX_CUDA_CHECK(cudaMalloc(&in_d[s], n * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMalloc(&out_d[s], n * sizeof(float)));
  }
  // The compute of a slot as a graph (versions 2 and 3), captured once per slot.
  fusex::graph_exec g[2];
  auto compute_step = [&](int s, cudaStream_t st) {
    if (version == 3)
      m.seq.run(fusex::make_view(static_cast<const float*>(in_d[s]), {batch, width}),
                fusex::make_view(out_d[s], {batch, width}), st);
    else m.step(version, in_d[s], out_d[s], st);
  };
  for (int s = 0; s < 2; ++s) {
    compute_step(s, compute);  // warm-up outside capture (plans, modules)
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    if (version >= 2) {
      fusex::graph_capture cap(compute);
      compute_step(s, compute);
      g[s] = cap.finish();
    }
  }
  const std::int64_t total = warmup + steps;
  std::vector<cudaEvent_t> start(static_cast<std::size_t>(total)), copied(static_cast<std::size_t>(total)),
      done(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) {
    const auto k = static_cast<std::size_t>(i);
    FUSEX_CUDA_CHECK(cudaEventCreate(&start[k]));
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&copied[k], cudaEventDisableTiming));
    FUSEX_CUDA_CHECK(cudaEventCreate(&done[k]));
  }
  double checksum = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < total; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const int s = static_cast<int>(i & 1);
      // The slot's previous step (i - 2) has delivered its output: read it, write the new input.
      if (i >= 2) {
        FUSEX_CUDA_CHECK(cudaEventSynchronize(done[k - 2]));
        checksum += out_h[s].data()[i % static_cast<std::int64_t>(n)];
      }
      for (std::size_t e = 0; e < n; ++e)
        in_h[s].data()[e] = static_cast<float>((i + static_cast<std::int64_t>(e)) % 17) / 8.0f - 1.0f;
      FUSEX_CUDA_CHECK(cudaEventRecord(start[k], copy));
      FUSEX_CUDA_CHECK(cudaMemcpyAsync(in_d[s], in_h[s].data(), n * sizeof(float), cudaMemcpyHostToDevice, copy));
      FUSEX_CUDA_CHECK(cudaEventRecord(copied[k], copy));
      FUSEX_CUDA_CHECK(cudaStreamWaitEvent(compute, copied[k], 0));
      if (version >= 2) g[s].launch(compute);
      else compute_step(s, compute);
      FUSEX_CUDA_CHECK(cudaMemcpyAsync(out_h[s].data(), out_d[s], n * sizeof(float), cudaMemcpyDeviceToHost, compute));
      FUSEX_CUDA_CHECK(cudaEventRecord(done[k], compute));
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(secs);
    state.counters["us_per_step"] = secs * 1e6 / static_cast<double>(total);
  }
  std::vector<double> lat;
  for (std::int64_t i = warmup; i < total; ++i) {
    float ms = 0;
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, start[static_cast<std::size_t>(i)], done[static_cast<std::size_t>(i)]));
    lat.push_back(1000.0 * ms);
  }
  const double p50 = percentile(lat, 0.50), p99 = percentile(lat, 0.99), p999 = percentile(lat, 0.999);
  state.counters["p50_us"] = p50;
  state.counters["p99_us"] = p99;
  state.counters["p999_us"] = p999;
  state.counters["max_us"] = *std::max_element(lat.begin(), lat.end());
  state.counters["p99_over_p50"] = p99 / p50;
  state.counters["checksum"] = checksum;
  static const char* const names[] = {"unfused", "fused", "fused+graph", "layer_sequence+graph"};
  state.SetLabel(names[version]);
  for (std::int64_t i = 0; i < total; ++i) {
    const auto k = static_cast<std::size_t>(i);
    cudaEventDestroy(start[k]);
    cudaEventDestroy(copied[k]);
    cudaEventDestroy(done[k]);
  }
  for (int s = 0; s < 2; ++s) {
    cudaFree(in_d[s]);
    cudaFree(out_d[s]);
  }
  cudaStreamDestroy(compute);
  cudaStreamDestroy(copy);
  fusex::set_default_resource(fusex::device_resource_ref(ar));
  fusex::set_programmatic_dependent_launch(true);
}

}  // namespace

BENCHMARK(bm_serving)->DenseRange(0, 3)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

FUSEX_BENCHMARK_MAIN();
