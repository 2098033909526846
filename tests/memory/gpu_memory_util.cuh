#pragma once
// Kernels and helpers of the memory GPU tests: fill a block with a pattern derived from a seed,
// count the words that differ from it, spin for a while first (to keep a stream busy).
#include <fusex/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace fusex_memtest {

__host__ __device__ inline unsigned pattern(unsigned seed, std::size_t i) {
  std::uint64_t h = (static_cast<std::uint64_t>(seed) + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const unsigned v = static_cast<unsigned>(h);
  return v == 0 ? 1u : v;  // never zero: zeroed memory never passes for a pattern
}

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Waits `spin_ns` (device time), then writes pattern(seed, i) to x[0, n).
static __global__ void slow_fill(unsigned* x, std::size_t n, unsigned seed, unsigned long long spin_ns) {
  if (spin_ns != 0) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < spin_ns) {}
  }
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] = pattern(seed, i);
}

/// Waits `spin_ns`, then adds to *bad the number of words of x[0, n) that differ from the pattern.
static __global__ void slow_check(const unsigned* x, std::size_t n, unsigned seed, unsigned long long spin_ns,
                                  unsigned long long* bad) {
  if (spin_ns != 0) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < spin_ns) {}
  }
  unsigned long long local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += x[i] != pattern(seed, i);
  if (local != 0) atomicAdd(bad, local);
}

inline unsigned grid_for(std::size_t n) {
  const std::size_t g = (n + 255) / 256;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 1024 ? 1024 : g));
}

inline void fill(void* p, std::size_t bytes, unsigned seed, cudaStream_t s, unsigned long long spin_ns = 0) {
  const std::size_t n = bytes / sizeof(unsigned);
  slow_fill<<<grid_for(n), 256, 0, s>>>(static_cast<unsigned*>(p), n, seed, spin_ns);
  FUSEX_CUDA_CHECK(cudaGetLastError());
}

inline void check(const void* p, std::size_t bytes, unsigned seed, cudaStream_t s, unsigned long long* bad,
                  unsigned long long spin_ns = 0) {
  const std::size_t n = bytes / sizeof(unsigned);
  slow_check<<<grid_for(n), 256, 0, s>>>(static_cast<const unsigned*>(p), n, seed, spin_ns, bad);
  FUSEX_CUDA_CHECK(cudaGetLastError());
}

/// A counter in mapped pinned memory: kernels add to it, the host reads it after a sync.
class device_counter {
 public:
  device_counter() {
    FUSEX_CUDA_CHECK(cudaHostAlloc(&h_, sizeof(unsigned long long), cudaHostAllocMapped));
    *h_ = 0;
    FUSEX_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_), h_, 0));
  }
  device_counter(const device_counter&) = delete;
  device_counter& operator=(const device_counter&) = delete;
  ~device_counter() { (void)cudaFreeHost(h_); }
  unsigned long long* device() const { return d_; }
  unsigned long long value() const { return *static_cast<volatile unsigned long long*>(h_); }

 private:
  unsigned long long* h_ = nullptr;
  unsigned long long* d_ = nullptr;
};

/// A non-blocking stream, destroyed (after synchronising) at scope exit.
class stream {
 public:
  stream() { FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    (void)cudaStreamSynchronize(s_);
    (void)cudaStreamDestroy(s_);
  }
  operator cudaStream_t() const { return s_; }  // NOLINT

 private:
  cudaStream_t s_ = nullptr;
};

/// Orders `after` after the work enqueued on `before` so far.
inline void order(cudaStream_t after, cudaStream_t before) {
  cudaEvent_t e = nullptr;
  FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  FUSEX_CUDA_CHECK(cudaEventRecord(e, before));
  FUSEX_CUDA_CHECK(cudaStreamWaitEvent(after, e, 0));
  FUSEX_CUDA_CHECK(cudaEventDestroy(e));
}

}  // namespace fusex_memtest
