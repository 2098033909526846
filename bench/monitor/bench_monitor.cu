// The cost of fusex::launch_monitor (issue 9's budget: at most 1 us per region and 50 ns per
// launch when used; nothing measurable when not used).
//
//   bm_region_host_only     a region without a stream: construct, count nothing, report
//   bm_region_gpu_timed     a region with GPU timing on an idle stream: two cudaEventRecord
//                           calls from the per-thread pool; stop() only (no wait)
//   bm_region_gpu_report    the same plus report(), which waits on the stop event
//   bm_raw_event_pair       the CUDA floor of any event-timed region: two cudaEventRecord calls
//                           on pre-created events, same stream and sync cadence as gpu_timed
//   bm_raw_is_capturing     cudaStreamIsCapturing alone (a timed region asks it at its start)
//   bm_note_launch/<on>     the hook every launch calls, without (0) and with (1) a region
//   bm_eval_launch/<on>     fusex::eval of a tiny expression, 64 launches per iteration (then a
//                           stream sync), without and with a region around them: the difference
//                           per launch is the monitor's share of a real launch
#include <fusex/fusex.hpp>

#include "fusex_bench.hpp"

namespace {

struct stream_holder {
  cudaStream_t s{};
  stream_holder() { FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_holder() { (void)cudaStreamDestroy(s); }
};

void bm_region_host_only(benchmark::State& state) {
  for (auto _ : state) {
    fusex::launch_monitor mon;
    fusex::launch_report r = mon.report();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_region_gpu_timed(benchmark::State& state) {
  stream_holder st;
  { fusex::launch_monitor warm(st.s); }  // fills the thread's event pool
  std::int64_t n = 0;
  for (auto _ : state) {
    fusex::launch_monitor mon(st.s);
    mon.stop();
    if (++n % 4096 == 0) {
      state.PauseTiming();
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
      state.ResumeTiming();
    }
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
  state.SetItemsProcessed(state.iterations());
}

void bm_raw_event_pair(benchmark::State& state) {
  stream_holder st;
  cudaEvent_t a = nullptr, b = nullptr;
  FUSEX_CUDA_CHECK(cudaEventCreate(&a));
  FUSEX_CUDA_CHECK(cudaEventCreate(&b));
  std::int64_t n = 0;
  for (auto _ : state) {
    FUSEX_CUDA_CHECK(cudaEventRecord(a, st.s));
    FUSEX_CUDA_CHECK(cudaEventRecord(b, st.s));
    if (++n % 4096 == 0) {
      state.PauseTiming();
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
      state.ResumeTiming();
    }
  }
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
  FUSEX_CUDA_CHECK(cudaEventDestroy(a));
  FUSEX_CUDA_CHECK(cudaEventDestroy(b));
  state.SetItemsProcessed(state.iterations());
}

void bm_raw_is_capturing(benchmark::State& state) {
  stream_holder st;
  for (auto _ : state) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    FUSEX_CUDA_CHECK(cudaStreamIsCapturing(st.s, &status));
    benchmark::DoNotOptimize(status);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_region_gpu_report(benchmark::State& state) {
  stream_holder st;
  { fusex::launch_monitor warm(st.s); }
  for (auto _ : state) {
    fusex::launch_monitor mon(st.s);
    fusex::launch_report r = mon.report();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}

void bm_note_launch(benchmark::State& state) {
  const bool monitored = state.range(0) != 0;
  constexpr int per_iteration = 1000;
  auto body = [&] {
    for (auto _ : state) {
      for (int i = 0; i < per_iteration; ++i) {
        fusex::detail::note_launch();
        benchmark::ClobberMemory();
      }
    }
  };
  if (monitored) {
    fusex::launch_monitor mon;
    body();
    benchmark::DoNotOptimize(mon.report());
  } else {
    body();
  }
  state.SetItemsProcessed(state.iterations() * per_iteration);
}

void bm_eval_launch(benchmark::State& state) {
  const bool monitored = state.range(0) != 0;
  constexpr int per_iteration = 64;
  stream_holder st;
  float* d = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&d, 256 * sizeof(float)));
  auto v = fusex::make_view(d, {16, 16});
  auto body = [&] {
    for (auto _ : state) {
      for (int i = 0; i < per_iteration; ++i) fusex::eval(v, v * 0.5f + 1.0f, st.s);
      state.PauseTiming();
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
      state.ResumeTiming();
    }
  };
  fusex::eval(v, 0.0f, st.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(st.s));
  if (monitored) {
    fusex::launch_monitor mon(st.s);
    body();
    const fusex::launch_report r = mon.report();
    state.counters["counted"] = static_cast<double>(r.kernel_launches);
  } else {
    body();
  }
  FUSEX_CUDA_CHECK(cudaFree(d));
  state.SetItemsProcessed(state.iterations() * per_iteration);
}

}  // namespace

BENCHMARK(bm_region_host_only)->Unit(benchmark::kNanosecond);
BENCHMARK(bm_region_gpu_timed)->Unit(benchmark::kNanosecond);
BENCHMARK(bm_raw_event_pair)->Unit(benchmark::kNanosecond);
BENCHMARK(bm_raw_is_capturing)->Unit(benchmark::kNanosecond);
BENCHMARK(bm_region_gpu_report)->Unit(benchmark::kNanosecond);
BENCHMARK(bm_note_launch)->ArgName("monitored")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_eval_launch)->ArgName("monitored")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

FUSEX_BENCHMARK_MAIN();
