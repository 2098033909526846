// Host cost of device allocation: fusex::arena against cudaMallocAsync/cudaFreeAsync and
// cudaMalloc/cudaFree, measured in the same run.
//
//  BM_pair/<allocator>/<bytes>     one allocate + free pair per iteration, on one stream; bytes 0 =
//                                  mixed sizes (a fixed cycle of 64 sizes from 256 B to 64 MiB)
//  BM_threads/<allocator>          pairs of mixed small sizes, each thread on its own stream,
//                                  1, 2, 4 and 8 threads (items/s is the total throughput)
//  BM_trace/<allocator>            replay of a transformer-like trace of 10^5 allocations
//                                  (bench/memory/transformer_trace.hpp); counters: peak reserved
//                                  and peak live (GiB) and their ratio
// Host costs are wall-clock (real time); nothing here waits for the GPU inside the timed loop.
// Targets (H200): arena pair <= 50 ns on one thread; trace peak reserved <= 1.25 x peak live.
#include "fusex_bench.hpp"
#include "transformer_trace.hpp"

#include <fusex/memory/memory.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

// arena_lazy_coarse_stats: lazy, with the in-use counter published every 256 MiB instead of 4 MiB
// (arena_options::stats_batch_bytes): isolates what the statistics cost a 64 MiB pair.
enum allocator_kind : int {
  arena_default = 0,
  arena_capture_always = 1,
  cuda_async = 2,
  cuda_malloc = 3,
  arena_lazy = 4,
  arena_lazy_coarse_stats = 5
};

const char* name_of(int k) {
  switch (k) {
    case arena_default: return "arena";
    case arena_capture_always: return "arena(capture_check=always)";
    case arena_lazy: return "arena(free_event=lazy)";
    case arena_lazy_coarse_stats: return "arena(free_event=lazy, stats_batch_bytes=256 MiB)";
    case cuda_async: return "cudaMallocAsync";
    default: return "cudaMalloc";
  }
}

cudaStream_t main_stream() {
  static cudaStream_t s = [] {
    cudaStream_t x = nullptr;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    return x;
  }();
  return s;
}

fusex::arena* make_arena(int kind) {
  fusex::arena_options o;
  o.capture = kind == arena_capture_always ? fusex::capture_check::always : fusex::capture_check::announced;
  o.thorough_checks = false;
  if (kind == arena_lazy || kind == arena_lazy_coarse_stats) {
    o.free_events = fusex::free_event::lazy;  // no event at the free: the thread caches serve reuse
  }
  if (kind == arena_lazy_coarse_stats) o.stats_batch_bytes = std::size_t{256} << 20;
  return new fusex::arena(o);
}

// One arena per kind, made on first use (thread-safe static initialisation) and never destroyed.
fusex::arena& bench_arena(int kind) {
  static fusex::arena* const arenas[] = {
      make_arena(arena_default), make_arena(arena_capture_always),   nullptr, nullptr,
      make_arena(arena_lazy),    make_arena(arena_lazy_coarse_stats)};
  return *arenas[kind];
}

struct allocator {
  int kind;
  void* allocate(std::size_t bytes, cudaStream_t s) const {
    void* p = nullptr;
    switch (kind) {
      case arena_default:
      case arena_lazy:
      case arena_lazy_coarse_stats:
      case arena_capture_always: return bench_arena(kind).allocate_async(bytes, 256, s);
      case cuda_async: FUSEX_CUDA_CHECK(cudaMallocAsync(&p, bytes, s)); return p;
      default: FUSEX_CUDA_CHECK(cudaMalloc(&p, bytes)); return p;
    }
  }
  void free(void* p, std::size_t bytes, cudaStream_t s) const {
    switch (kind) {
      case arena_default:
      case arena_lazy:
      case arena_lazy_coarse_stats:
      case arena_capture_always: bench_arena(kind).deallocate_async(p, bytes, 256, s); return;
      case cuda_async: FUSEX_CUDA_CHECK(cudaFreeAsync(p, s)); return;
      default: FUSEX_CUDA_CHECK(cudaFree(p)); return;
    }
  }
};

const std::vector<std::size_t>& mixed_sizes(std::size_t max_bytes) {
  static std::vector<std::size_t> big, small;
  std::vector<std::size_t>& v = max_bytes > (std::size_t{1} << 20) ? big : small;
  if (v.empty()) {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> lg(8.0, std::log2(static_cast<double>(max_bytes)));
    for (int i = 0; i < 64; ++i) v.push_back(static_cast<std::size_t>(std::exp2(lg(rng))));
  }
  return v;
}

void BM_pair(benchmark::State& state) {
  const allocator a{static_cast<int>(state.range(0))};
  const std::size_t bytes = static_cast<std::size_t>(state.range(1));
  const cudaStream_t s = main_stream();
  const std::vector<std::size_t>& sizes = mixed_sizes(std::size_t{64} << 20);
  // Warm-up: every size once, so that the pool or arena holds memory for them.
  for (std::size_t b : sizes) a.free(a.allocate(bytes != 0 ? bytes : b, s), bytes != 0 ? bytes : b, s);
  std::size_t i = 0;
  for (auto _ : state) {
    const std::size_t b = bytes != 0 ? bytes : sizes[i++ & 63];
    void* p = a.allocate(b, s);
    benchmark::DoNotOptimize(p);
    a.free(p, b, s);
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(std::string(name_of(a.kind)) + (bytes != 0 ? "" : " mixed 256 B..64 MiB"));
}

void BM_threads(benchmark::State& state) {
  const allocator a{static_cast<int>(state.range(0))};
  thread_local cudaStream_t s = [] {
    cudaStream_t x = nullptr;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
    return x;
  }();
  const std::vector<std::size_t>& sizes = mixed_sizes(std::size_t{1} << 20);
  for (std::size_t b : sizes) a.free(a.allocate(b, s), b, s);
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7;
  for (auto _ : state) {
    const std::size_t b = sizes[i++ & 63];
    void* p = a.allocate(b, s);
    benchmark::DoNotOptimize(p);
    a.free(p, b, s);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.SetLabel(name_of(a.kind));
}

const fusex_trace::trace& the_trace() {
  static const fusex_trace::trace t = fusex_trace::transformer_trace(100000, 1);
  return t;
}

void replay(const allocator& a, const fusex_trace::trace& t, std::vector<void*>& ptr, cudaStream_t s) {
  for (const auto& op : t.ops) {
    if (op.allocate) ptr[op.id] = a.allocate(op.bytes, s);
    else a.free(ptr[op.id], op.bytes, s);
  }
}

void BM_trace(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const fusex_trace::trace& t = the_trace();
  std::vector<void*> ptr(t.max_id);
  cudaStream_t s = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double peak_reserved = 0;
  if (kind == cuda_async) {
    cudaMemPool_t pool = nullptr;
    int dev = 0;
    FUSEX_CUDA_CHECK(cudaGetDevice(&dev));
    FUSEX_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    FUSEX_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    std::uint64_t zero = 0;
    FUSEX_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    replay(allocator{kind}, t, ptr, s);  // first replay: measures the pool's peak
    std::uint64_t high = 0;
    FUSEX_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high));
    peak_reserved = static_cast<double>(high);
    for (auto _ : state) replay(allocator{kind}, t, ptr, s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    FUSEX_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  } else if (kind == cuda_malloc) {
    peak_reserved = static_cast<double>(t.peak_live_bytes);  // exact sizes, by definition
    for (auto _ : state) replay(allocator{kind}, t, ptr, s);
  } else {
    // A fresh arena (default options) whose first replay gives the peak; then timed replays.
    fusex::arena_options o;
    o.thorough_checks = false;
    o.capture = kind == arena_capture_always ? fusex::capture_check::always : fusex::capture_check::announced;
    if (kind == arena_lazy) o.free_events = fusex::free_event::lazy;
    auto a = std::make_unique<fusex::arena>(o);
    auto run = [&] {
      for (const auto& op : t.ops) {
        if (op.allocate) ptr[op.id] = a->allocate_async(op.bytes, 256, s);
        else a->deallocate_async(ptr[op.id], op.bytes, 256, s);
      }
    };
    run();
    peak_reserved = static_cast<double>(a->stats().peak_bytes_reserved);
    for (auto _ : state) run();
    const auto st = a->stats();
    state.counters["reuse_rate"] = st.reuse_rate();
    state.counters["chunks"] = static_cast<double>(st.chunks);
    a.reset();
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  FUSEX_CUDA_CHECK(cudaStreamDestroy(s));
  const double gib = double(std::size_t{1} << 30);
  state.counters["peak_live_GiB"] = static_cast<double>(t.peak_live_bytes) / gib;
  state.counters["peak_reserved_GiB"] = peak_reserved / gib;
  state.counters["reserved_over_live"] = peak_reserved / static_cast<double>(t.peak_live_bytes);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * t.allocations));
  state.SetLabel(name_of(kind));
}

}  // namespace

BENCHMARK(BM_pair)
    ->ArgNames({"allocator", "bytes"})
    ->ArgsProduct({{arena_default, arena_lazy, arena_capture_always, cuda_async, cuda_malloc},
                   {1 << 10, 1 << 20, 64 << 20, 0}})
    ->UseRealTime();
BENCHMARK(BM_pair)->ArgNames({"allocator", "bytes"})->Args({arena_lazy_coarse_stats, 64 << 20})->UseRealTime();
BENCHMARK(BM_threads)
    ->ArgNames({"allocator"})
    ->Args({arena_default})
    ->Args({arena_lazy})
    ->Args({cuda_async})
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->Threads(8)
    ->UseRealTime();
BENCHMARK(BM_trace)
    ->ArgNames({"allocator"})
    ->Args({arena_default})
    ->Args({arena_lazy})
    ->Args({cuda_async})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5)
    ->UseRealTime();
BENCHMARK(BM_trace)
    ->ArgNames({"allocator"})
    ->Args({cuda_malloc})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

FUSEX_BENCHMARK_MAIN();
