#pragma once
// The staging pipeline of examples/staging_pipeline, shared with its GPU test
// (tests/memory/test_staging_gpu.cu) and its benchmark (bench/memory/bench_staging.cu).
//
// Batch k goes through ring slot i = k % slots (3 by default): the host stages it from pageable
// "dataset" memory into pinned buffer i, chunk by chunk, and each chunk's H2D copy into device
// buffer i is enqueued on the copy stream as soon as that chunk is staged (the copy engine starts
// after the first chunk, not after the whole batch, and the host copies chunk j+1 while the DMA
// moves chunk j); a kernel on the compute stream then reduces device buffer i. Events order it:
//   copied[i]   H2D of slot i done: compute may read device slot i, the host may refill pinned slot i
//   consumed[i] compute of slot i done: the next H2D may overwrite device slot i
// The only host synchronisation is the one inherent to reusing host memory: cudaEventSynchronize
// on copied[i] before refilling pinned slot i, `slots` batches later. With three slots the host
// stages k+1 while k copies and k-1 computes, and still has a batch of slack before it would wait
// (two slots leave none: the host then waits on the copy of k-1, which waits on the compute of
// k-2, and any jitter in one stage stalls the other two).
//
// run() also measures where the time goes (run_result: host staging, host waits, and with
// config::profile the GPU's copy and compute busy times from timing events), so that a pipeline
// that does not overlap says why.
#include <fusex/copy.hpp>
#include <fusex/memory/memory.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace staging {

struct config {
  std::size_t batch_elems = std::size_t{1} << 22;  ///< floats per batch (16 MiB)
  int batches = 32;                                ///< batches through the pipeline
  int dataset_batches = 4;                         ///< distinct batches, cycled
  int work = 0;                                    ///< FMA steps per element (0: calibrate)
  int slots = 3;                                   ///< ring depth: pinned + device buffers (>= 2)
  std::size_t chunk_elems = std::size_t{1} << 20;  ///< floats staged per H2D copy (4 MiB; 0: whole batch)
  bool profile = false;                            ///< time each copy and kernel with events
};

enum class mode {
  overlapped,     ///< copy stream + compute stream (the pipeline)
  single_stream,  ///< the same loop with copies and kernels on one stream
  copy_only,      ///< staging and copies only
  compute_only,   ///< kernels only, on data already resident
};

inline constexpr int block_threads = 256;
inline constexpr int grid_blocks = 1024;

/// The per-element computation: `iters` dependent fused multiply-adds (same rounding on host
/// and device).
__host__ __device__ inline float transform(float x, int iters) {
  for (int i = 0; i < iters; ++i) x = fmaf(x, 0.9999f, 0.0001f);
  return x;
}

/// Sums transform(x[i]) in double: each block writes a partial, in a fixed order (deterministic).
static __global__ void reduce_kernel(const float* x, std::size_t n, int iters, double* partials) {
  __shared__ double sh[block_threads];
  double acc = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    acc += transform(x[i], iters);
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int s = block_threads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sh[0];
}

static __global__ void finish_kernel(const double* partials, int n, double* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += partials[i];
    *out = s;
  }
}

/// Distinct, non-zero values for dataset batch `b`, element `i`: in [0.5, 1.5).
inline float dataset_value(std::size_t b, std::size_t i) {
  std::uint64_t h = (b + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return 0.5f + static_cast<float>(h % 4096) / 4096.0f;
}

/// The pageable source data: dataset_batches x batch_elems floats.
inline std::vector<float> make_dataset(const config& c) {
  std::vector<float> d(static_cast<std::size_t>(c.dataset_batches) * c.batch_elems);
  for (int b = 0; b < c.dataset_batches; ++b)
    for (std::size_t i = 0; i < c.batch_elems; ++i) d[b * c.batch_elems + i] = dataset_value(b, i);
  return d;
}

/// The sum of one dataset batch computed on the host (double accumulation).
inline double host_reference(const std::vector<float>& dataset, const config& c, int b, int work) {
  double s = 0;
  for (std::size_t i = 0; i < c.batch_elems; ++i) s += transform(dataset[b * c.batch_elems + i], work);
  return s;
}

struct run_result {
  double seconds = 0;
  std::vector<double> sums;  ///< one per batch (empty for copy_only)
  std::vector<int> source;   ///< dataset batch each sum must match
  // Where the time went (seconds, whole run).
  double host_stage_seconds = 0;   ///< host memcpy into pinned memory
  double host_wait_seconds = 0;    ///< host blocked waiting for a pinned slot's previous copy
  double gpu_copy_seconds = 0;     ///< copy stream from its first chunk to its last chunk's end, per
                                   ///< batch (includes waits for the host to stage later chunks;
                                   ///< config::profile)
  double gpu_compute_seconds = 0;  ///< kernels (config::profile)
};

namespace detail {
// Events of one run, destroyed with it.
struct event_set {
  std::vector<cudaEvent_t> e;
  event_set(std::size_t n, unsigned flags) : e(n, nullptr) {
    for (cudaEvent_t& x : e) FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&x, flags));
  }
  event_set(const event_set&) = delete;
  event_set& operator=(const event_set&) = delete;
  ~event_set() {
    for (cudaEvent_t x : e)
      if (x != nullptr) (void)cudaEventDestroy(x);  // destructor: nothing to report to
  }
  cudaEvent_t operator[](std::size_t i) const { return e[i]; }
};

inline double elapsed_seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return static_cast<double>(ms) / 1e3;
}
}  // namespace detail

/// Runs the loop in `m` and returns its wall time (host clock, from the first staging to the
/// last completion), the per-batch sums and the time breakdown.
inline run_result run(const config& c, mode m, const std::vector<float>& dataset, int work) {
  if (c.slots < 2) throw fusex::invalid_argument("staging::run: config::slots must be at least 2");
  run_result r;
  const std::size_t n = c.batch_elems;
  const std::size_t chunk = c.chunk_elems == 0 ? n : std::min(c.chunk_elems, n);
  const auto slots = static_cast<std::size_t>(c.slots);
  const auto batches = static_cast<std::size_t>(c.batches);
  fusex::arena& mem = fusex::default_arena();
  cudaStream_t compute = nullptr, copy = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  if (m == mode::single_stream) copy = compute;
  else FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  {
    const detail::event_set copied(slots, cudaEventDisableTiming), consumed(slots, cudaEventDisableTiming);
    // With profile: per batch, copy start / end on the copy stream, compute start / end on the
    // compute stream (recorded after the waits: they mark when the work can begin).
    const detail::event_set timing(c.profile ? 4 * batches : 0, cudaEventDefault);
    std::vector<fusex::pinned_buffer<float>> stage;
    std::vector<fusex::buffer<float>> dev;
    std::vector<fusex::buffer<double>> partials;
    for (std::size_t i = 0; i < slots; ++i) {
      stage.emplace_back(n);
      dev.emplace_back(n, compute, mem);
      partials.emplace_back(grid_blocks, compute, mem);
      dev.back().record_stream(copy);  // written on the copy stream too: its reuse waits for that
      stage.back().set_stream(copy);   // pinned memory is read by copies on the copy stream
    }
    fusex::buffer<double> sums(batches, compute, mem);
    if (m == mode::compute_only) {
      for (std::size_t i = 0; i < slots; ++i)
        FUSEX_CUDA_CHECK(cudaMemcpyAsync(dev[i].data(),
                                         dataset.data() + (i % static_cast<std::size_t>(c.dataset_batches)) * n,
                                         n * sizeof(float), cudaMemcpyHostToDevice, compute));
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (std::size_t k = 0; k < batches; ++k) {
      const std::size_t i = k % slots;
      const std::size_t src = k % static_cast<std::size_t>(c.dataset_batches);
      if (m != mode::compute_only) {
        // Pinned slot i was last read by the copy of batch k - slots: wait for it before refilling.
        if (k >= slots) {
          const auto w0 = clock::now();
          FUSEX_CUDA_CHECK(cudaEventSynchronize(copied[i]));
          r.host_wait_seconds += std::chrono::duration<double>(clock::now() - w0).count();
        }
        // Device slot i was last read by the compute of batch k - slots.
        if (k >= slots && m != mode::copy_only) FUSEX_CUDA_CHECK(cudaStreamWaitEvent(copy, consumed[i], 0));
        const float* from = dataset.data() + src * n;
        for (std::size_t off = 0; off < n; off += chunk) {
          const std::size_t len = std::min(chunk, n - off);
          const auto s0 = clock::now();
          std::memcpy(stage[i].data() + off, from + off, len * sizeof(float));
          r.host_stage_seconds += std::chrono::duration<double>(clock::now() - s0).count();
          if (c.profile && off == 0) FUSEX_CUDA_CHECK(cudaEventRecord(timing[4 * k], copy));
          const fusex::shape_t piece{static_cast<std::int64_t>(len)};
          fusex::copy_async(fusex::make_view(dev[i].data() + off, piece),
                            fusex::make_view(stage[i].data() + off, piece), copy);
        }
        FUSEX_CUDA_CHECK(cudaEventRecord(copied[i], copy));
        if (c.profile) FUSEX_CUDA_CHECK(cudaEventRecord(timing[4 * k + 1], copy));
      }
      if (m != mode::copy_only) {
        if (m != mode::compute_only) FUSEX_CUDA_CHECK(cudaStreamWaitEvent(compute, copied[i], 0));
        if (c.profile) FUSEX_CUDA_CHECK(cudaEventRecord(timing[4 * k + 2], compute));
        reduce_kernel<<<grid_blocks, block_threads, 0, compute>>>(dev[i].data(), n, work, partials[i].data());
        FUSEX_CUDA_CHECK(cudaGetLastError());
        finish_kernel<<<1, 1, 0, compute>>>(partials[i].data(), grid_blocks, sums.data() + k);
        FUSEX_CUDA_CHECK(cudaGetLastError());
        FUSEX_CUDA_CHECK(cudaEventRecord(consumed[i], compute));
        if (c.profile) FUSEX_CUDA_CHECK(cudaEventRecord(timing[4 * k + 3], compute));
        r.source.push_back(
            static_cast<int>(m == mode::compute_only ? i % static_cast<std::size_t>(c.dataset_batches) : src));
      }
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(copy));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    r.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    if (c.profile) {
      for (std::size_t k = 0; k < batches; ++k) {
        if (m != mode::compute_only) r.gpu_copy_seconds += detail::elapsed_seconds(timing[4 * k], timing[4 * k + 1]);
        if (m != mode::copy_only)
          r.gpu_compute_seconds += detail::elapsed_seconds(timing[4 * k + 2], timing[4 * k + 3]);
      }
    }
    if (m != mode::copy_only) {
      r.sums.resize(batches);
      FUSEX_CUDA_CHECK(cudaMemcpy(r.sums.data(), sums.data(), r.sums.size() * sizeof(double), cudaMemcpyDeviceToHost));
    }
  }  // buffers freed (ordered on their streams), events destroyed
  // The streams are about to be destroyed: the arena must not touch them again.
  mem.forget_stream(compute);
  if (copy != compute) mem.forget_stream(copy);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
  if (copy != compute) FUSEX_CUDA_CHECK(cudaStreamSynchronize(copy));
  FUSEX_CUDA_CHECK(cudaStreamDestroy(compute));
  if (copy != compute) FUSEX_CUDA_CHECK(cudaStreamDestroy(copy));
  return r;
}

/// Reference sums of each dataset batch, computed on the device with plain synchronous copies
/// (same kernel, same grid: bitwise equal to a correct pipeline's results).
inline std::vector<double> device_reference(const config& c, const std::vector<float>& dataset, int work) {
  const std::size_t n = c.batch_elems;
  std::vector<double> ref(static_cast<std::size_t>(c.dataset_batches));
  float* x = nullptr;
  double* partials = nullptr;
  double* out = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  FUSEX_CUDA_CHECK(cudaMalloc(&partials, grid_blocks * sizeof(double)));
  FUSEX_CUDA_CHECK(cudaMalloc(&out, sizeof(double)));
  for (int b = 0; b < c.dataset_batches; ++b) {
    FUSEX_CUDA_CHECK(cudaMemcpy(x, dataset.data() + b * n, n * sizeof(float), cudaMemcpyHostToDevice));
    reduce_kernel<<<grid_blocks, block_threads>>>(x, n, work, partials);
    FUSEX_CUDA_CHECK(cudaGetLastError());
    finish_kernel<<<1, 1>>>(partials, grid_blocks, out);
    FUSEX_CUDA_CHECK(cudaGetLastError());
    FUSEX_CUDA_CHECK(cudaMemcpy(&ref[b], out, sizeof(double), cudaMemcpyDeviceToHost));
  }
  FUSEX_CUDA_CHECK(cudaFree(x));
  FUSEX_CUDA_CHECK(cudaFree(partials));
  FUSEX_CUDA_CHECK(cudaFree(out));
  return ref;
}

/// Number of batches whose sum differs from the reference of its dataset batch.
inline int mismatches(const run_result& r, const std::vector<double>& ref) {
  int bad = 0;
  for (std::size_t k = 0; k < r.sums.size(); ++k)
    if (r.sums[k] != ref[static_cast<std::size_t>(r.source[k])]) ++bad;
  return bad;
}

/// FMA steps per element that make one batch's compute take about as long as its staging and
/// copy (so the overlap matters), measured on a few batches.
inline int calibrate(const config& c, const std::vector<float>& dataset) {
  config probe = c;
  probe.batches = std::min(c.batches, 8);
  const double t_copy = run(probe, mode::copy_only, dataset, 0).seconds;
  const int w0 = 256;
  (void)run(probe, mode::compute_only, dataset, w0);  // warm-up
  const double t_comp = run(probe, mode::compute_only, dataset, w0).seconds;
  const double w = w0 * t_copy / std::max(t_comp, 1e-9);
  return static_cast<int>(std::clamp(w, 1.0, double(1 << 20)));
}

}  // namespace staging
