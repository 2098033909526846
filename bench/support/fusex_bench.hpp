#pragma once
// Shared helpers for fusex benchmarks: CUDA-event timing for Google Benchmark's manual time, and a
// device-to-device copy baseline measured in the same run.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fusex/error.hpp>
#include <fusex/memory/resource.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fusex_bench {

/// The stream a benchmark program's cases run on (one non-blocking stream, created on first use).
inline cudaStream_t stream() {
  static const cudaStream_t s = [] {
    cudaStream_t st;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

/// Times `body()` (which enqueues work on `stream`) with CUDA events for each benchmark iteration
/// and reports it as manual time. Warm-up runs once before timing.
/// Returns the total timed seconds.
template <class F>
double time_with_events(benchmark::State& state, cudaStream_t stream, F&& body) {
  double total = 0;
  cudaEvent_t start, stop;
  FUSEX_CUDA_CHECK(cudaEventCreate(&start));
  FUSEX_CUDA_CHECK(cudaEventCreate(&stop));
  body();
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto _ : state) {
    FUSEX_CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    FUSEX_CUDA_CHECK(cudaEventRecord(stop, stream));
    FUSEX_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(static_cast<double>(ms) / 1e3);
    total += static_cast<double>(ms) / 1e3;
  }
  FUSEX_CUDA_CHECK(cudaEventDestroy(start));
  FUSEX_CUDA_CHECK(cudaEventDestroy(stop));
  return total;
}

/// Times `body()` (which enqueues work on `stream`) as the GPU runs it in a steady stream, the
/// measure for bandwidth: in each benchmark iteration, from an idle stream, one call is timed
/// alone (counter `single_call_us`: it includes the host's time to submit the call, which the
/// idle GPU waits out), and while it runs `calls` more are submitted between two events; the
/// manual time is their GPU time per call. Counter `host_us_per_call`: the host's time to submit
/// one call. That holds while a call runs longer on the GPU than the host takes to submit one;
/// for shorter calls the GPU idles between them and the time is the host's submission rate:
/// counter `host_bound` = 1 then (submission at least 90% of the time per call).
/// Returns the total timed seconds (per call, summed over the iterations).
template <class F>
double time_steady(benchmark::State& state, cudaStream_t stream, F&& body, int calls = 4) {
  double total = 0, single = 0, host = 0;
  cudaEvent_t e0, e1, e2;
  FUSEX_CUDA_CHECK(cudaEventCreate(&e0));
  FUSEX_CUDA_CHECK(cudaEventCreate(&e1));
  FUSEX_CUDA_CHECK(cudaEventCreate(&e2));
  body();
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (auto _ : state) {
    FUSEX_CUDA_CHECK(cudaEventRecord(e0, stream));
    body();
    FUSEX_CUDA_CHECK(cudaEventRecord(e1, stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) body();
    host += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    FUSEX_CUDA_CHECK(cudaEventRecord(e2, stream));
    FUSEX_CUDA_CHECK(cudaEventSynchronize(e2));
    float one = 0, many = 0;
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&one, e0, e1));
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&many, e1, e2));
    const double per_call = static_cast<double>(many) / 1e3 / calls;
    state.SetIterationTime(per_call);
    total += per_call;
    single += static_cast<double>(one) / 1e3;
  }
  FUSEX_CUDA_CHECK(cudaEventDestroy(e0));
  FUSEX_CUDA_CHECK(cudaEventDestroy(e1));
  FUSEX_CUDA_CHECK(cudaEventDestroy(e2));
  const double n = static_cast<double>(state.iterations());
  if (n > 0) {
    state.counters["single_call_us"] = single / n * 1e6;
    state.counters["host_us_per_call"] = host / (n * calls) * 1e6;
    state.counters["host_bound"] = host / calls >= 0.9 * total ? 1 : 0;
  }
  return total;
}

/// Sets bytes/s from `bytes_per_iteration` and, when a copy baseline of `baseline_key` was
/// measured earlier in this run, the ratio to it as the counter `copy_ratio`.
inline void report_bandwidth(benchmark::State& state, double bytes_per_iteration, double seconds,
                             double copy_bytes_per_second) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_iteration * static_cast<double>(state.iterations())));
  const double bw = seconds > 0 ? bytes_per_iteration * static_cast<double>(state.iterations()) / seconds : 0;
  state.counters["GBps"] = bw / 1e9;
  if (copy_bytes_per_second > 0) state.counters["copy_ratio"] = bw / copy_bytes_per_second;
}

/// Prints the device and returns false when there is none (benchmarks then exit 0 with a message).
inline bool report_device() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("fusex benchmarks: no usable CUDA device, nothing to measure\n");
    return false;
  }
  cudaDeviceProp p{};
  FUSEX_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("device: %s (sm_%d%d, %d SMs)\n", p.name, p.major, p.minor, p.multiProcessorCount);
  benchmark::AddCustomContext("gpu", p.name);
  return true;
}

}  // namespace fusex_bench

namespace fusex_bench {
/// FUSEX_BENCH_DEFAULT_RESOURCE=async makes cudaMallocAsync the default resource (to measure what
/// the arena changes).
inline void apply_resource_override() {
  static fusex::cuda_async_resource async_resource;
  const char* r = std::getenv("FUSEX_BENCH_DEFAULT_RESOURCE");
  if (r != nullptr && std::string(r) == "async") {
    fusex::set_default_resource(async_resource);
    benchmark::AddCustomContext("default_resource", "cudaMallocAsync");
  }
}
}  // namespace fusex_bench

/// main() for a fusex benchmark program.
#define FUSEX_BENCHMARK_MAIN()                   \
  int main(int argc, char** argv) {              \
    benchmark::Initialize(&argc, argv);          \
    if (!fusex_bench::report_device()) return 0; \
    fusex_bench::apply_resource_override();      \
    benchmark::RunSpecifiedBenchmarks();         \
    benchmark::Shutdown();                       \
    return 0;                                    \
  }
