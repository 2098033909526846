// The double-buffered staging loop of examples/staging_pipeline, with and without the copy
// stream, and its two parts alone, in one run. Manual time = the loop's wall time (host staging
// is part of it). Target (H200): overlapped within 10% of max(copy, compute); the counter
// x_max_copy_compute reports overlapped / max(copy_only, compute_only) from this run.
#include "fusex_bench.hpp"
#include "staging_pipeline.cuh"

#include <algorithm>

namespace {

struct setup {
  staging::config c;
  std::vector<float> dataset;
  std::vector<double> ref;
  int work = 0;
};

const setup& the_setup() {
  static const setup s = [] {
    setup x;
    x.c.batch_elems = std::size_t{1} << 22;  // 16 MiB per batch
    x.c.batches = 32;
    x.c.dataset_batches = 4;
    x.dataset = staging::make_dataset(x.c);
    x.work = staging::calibrate(x.c, x.dataset);
    x.ref = staging::device_reference(x.c, x.dataset, x.work);
    return x;
  }();
  return s;
}

double seconds_of(staging::mode m) {
  const setup& s = the_setup();
  return staging::run(s.c, m, s.dataset, s.work).seconds;
}

void BM_staging(benchmark::State& state) {
  const setup& s = the_setup();
  const auto m = static_cast<staging::mode>(state.range(0));
  (void)staging::run(s.c, m, s.dataset, s.work);  // warm-up
  int bad = 0;
  double total = 0;
  for (auto _ : state) {
    const staging::run_result r = staging::run(s.c, m, s.dataset, s.work);
    if (m != staging::mode::copy_only) bad += staging::mismatches(r, s.ref);
    state.SetIterationTime(r.seconds);
    total += r.seconds;
  }
  if (bad != 0) state.SkipWithError("a batch result differs from the reference");
  const double mean = total / static_cast<double>(state.iterations());
  if (m == staging::mode::overlapped || m == staging::mode::single_stream) {
    const double bound = std::max(seconds_of(staging::mode::copy_only), seconds_of(staging::mode::compute_only));
    state.counters["x_max_copy_compute"] = mean / bound;
  }
  const double bytes = static_cast<double>(s.c.batch_elems * sizeof(float)) * s.c.batches;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * static_cast<double>(state.iterations())));
  state.SetItemsProcessed(static_cast<std::int64_t>(s.c.batches) * static_cast<std::int64_t>(state.iterations()));
  state.counters["work"] = s.work;
  const char* names[] = {"overlapped (copy stream)", "single stream", "staging+copy only", "compute only"};
  state.SetLabel(names[state.range(0)]);
}

}  // namespace

BENCHMARK(BM_staging)
    ->ArgNames({"mode"})
    ->Arg(static_cast<int>(staging::mode::copy_only))
    ->Arg(static_cast<int>(staging::mode::compute_only))
    ->Arg(static_cast<int>(staging::mode::overlapped))
    ->Arg(static_cast<int>(staging::mode::single_stream))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

FUSEX_BENCHMARK_MAIN();
