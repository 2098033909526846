#pragma once
// The double-buffered staging loop of examples/staging_pipeline, shared with its GPU test
// (tests/memory/test_staging_gpu.cu) and its benchmark (bench/memory/bench_staging.cu).
//
// Batch k is staged (copied from pageable "dataset" memory into pinned buffer k % 2), copied to
// device buffer k % 2 on a copy stream, and reduced by a kernel on the compute stream, so that
// the host stages batch k+1 and the copy engine moves it while batch k computes. Events order it:
//   copied[i]   H2D of slot i done: compute may read device slot i, the host may refill pinned slot i
//   consumed[i] compute of slot i done: the next H2D may overwrite device slot i
// No host synchronisation except the one inherent to reusing host memory (cudaEventSynchronize on
// copied[i] before refilling pinned slot i, two batches later).
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
  std::vector<double> sums;     ///< one per batch (empty for copy_only)
  std::vector<int> source;      ///< dataset batch each sum must match
};

/// Runs the loop in `m` and returns its wall time (host clock, from the first staging to the
/// last completion) and the per-batch sums.
inline run_result run(const config& c, mode m, const std::vector<float>& dataset, int work) {
  run_result r;
  const std::size_t n = c.batch_elems;
  fusex::arena& mem = fusex::default_arena();
  cudaStream_t compute = nullptr, copy = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  if (m == mode::single_stream) copy = compute;
  else FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  cudaEvent_t copied[2], consumed[2];
  for (int i = 0; i < 2; ++i) {
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming));
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&consumed[i], cudaEventDisableTiming));
  }
  {
    fusex::pinned_buffer<float> stage[2] = {fusex::pinned_buffer<float>(n), fusex::pinned_buffer<float>(n)};
    fusex::buffer<float> dev[2] = {fusex::buffer<float>(n, compute, mem), fusex::buffer<float>(n, compute, mem)};
    fusex::buffer<double> partials[2] = {fusex::buffer<double>(grid_blocks, compute, mem),
                                         fusex::buffer<double>(grid_blocks, compute, mem)};
    fusex::buffer<double> sums(static_cast<std::size_t>(c.batches), compute, mem);
    for (int i = 0; i < 2; ++i) {
      dev[i].record_stream(copy);  // written on the copy stream too: its reuse waits for that
      stage[i].set_stream(copy);   // pinned memory is read by copies on the copy stream
    }
    if (m == mode::compute_only) {
      for (int i = 0; i < 2; ++i)
        FUSEX_CUDA_CHECK(cudaMemcpyAsync(dev[i].data(), dataset.data() + (i % c.dataset_batches) * n, n * sizeof(float),
                                         cudaMemcpyHostToDevice, compute));
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < c.batches; ++k) {
      const int i = k % 2;
      if (m != mode::compute_only) {
        // Pinned slot i was last read by the copy of batch k-2: wait for it before refilling.
        if (k >= 2) FUSEX_CUDA_CHECK(cudaEventSynchronize(copied[i]));
        std::memcpy(stage[i].data(), dataset.data() + static_cast<std::size_t>(k % c.dataset_batches) * n,
                    n * sizeof(float));
        // Device slot i was last read by the compute of batch k-2.
        if (k >= 2 && m != mode::copy_only) FUSEX_CUDA_CHECK(cudaStreamWaitEvent(copy, consumed[i], 0));
        fusex::copy_async(dev[i], stage[i], copy);
        FUSEX_CUDA_CHECK(cudaEventRecord(copied[i], copy));
      }
      if (m != mode::copy_only) {
        if (m != mode::compute_only) FUSEX_CUDA_CHECK(cudaStreamWaitEvent(compute, copied[i], 0));
        reduce_kernel<<<grid_blocks, block_threads, 0, compute>>>(dev[i].data(), n, work, partials[i].data());
        FUSEX_CUDA_CHECK(cudaGetLastError());
        finish_kernel<<<1, 1, 0, compute>>>(partials[i].data(), grid_blocks, sums.data() + k);
        FUSEX_CUDA_CHECK(cudaGetLastError());
        FUSEX_CUDA_CHECK(cudaEventRecord(consumed[i], compute));
        r.source.push_back(m == mode::compute_only ? i % c.dataset_batches : k % c.dataset_batches);
      }
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(copy));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(compute));
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (m != mode::copy_only) {
      r.sums.resize(static_cast<std::size_t>(c.batches));
      FUSEX_CUDA_CHECK(cudaMemcpy(r.sums.data(), sums.data(), r.sums.size() * sizeof(double), cudaMemcpyDeviceToHost));
    }
  }  // buffers freed (ordered on their streams)
  // The streams are about to be destroyed: the arena must not touch them again.
  mem.forget_stream(compute);
  if (copy != compute) mem.forget_stream(copy);
  for (int i = 0; i < 2; ++i) {
    FUSEX_CUDA_CHECK(cudaEventDestroy(copied[i]));
    FUSEX_CUDA_CHECK(cudaEventDestroy(consumed[i]));
  }
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
