#pragma once
/// \file
/// The arena's backend over the CUDA runtime: chunks from cudaMallocAsync (or cudaMalloc),
/// cudaEvent_t events, capture queries. Host code only (compiles with a plain C++ compiler).

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace fusex::detail {

/// Makes `device` current for its lifetime (no call when it already is).
class device_guard {
 public:
  explicit device_guard(int device) {
    FUSEX_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) FUSEX_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() {
    if (changed_) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

class cuda_backend {
 public:
  using event_type = cudaEvent_t;

  cuda_backend(int device, arena_upstream upstream) : device_(device), upstream_(upstream) {}

  int device() const noexcept { return device_; }

  cudaError_t allocate_chunk(std::uintptr_t& out, std::size_t bytes, cudaStream_t stream) {
    device_guard g(device_);
    void* p = nullptr;
    const cudaError_t e =
        upstream_ == arena_upstream::async_pool ? cudaMallocAsync(&p, bytes, stream) : cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return e;
    }
    if (upstream_ == arena_upstream::async_pool)
      cuda_check(e, "cudaMallocAsync(&p, bytes, stream)", __FILE__, __LINE__);
    else cuda_check(e, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
    out = reinterpret_cast<std::uintptr_t>(p);
    return cudaSuccess;
  }

  void free_chunk(std::uintptr_t p, std::size_t /*bytes*/, cudaStream_t stream) {
    device_guard g(device_);
    if (upstream_ == arena_upstream::async_pool) FUSEX_CUDA_CHECK(cudaFreeAsync(reinterpret_cast<void*>(p), stream));
    else FUSEX_CUDA_CHECK(cudaFree(reinterpret_cast<void*>(p)));
  }

  bool chunks_are_stream_ordered() const noexcept { return upstream_ == arena_upstream::async_pool; }
  bool free_is_capture_safe() const noexcept { return upstream_ == arena_upstream::async_pool; }
  const char* upstream_name() const noexcept {
    return upstream_ == arena_upstream::async_pool ? "cudaMallocAsync" : "cudaMalloc";
  }
  std::string error_string(cudaError_t e) const {
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
  }

  event_type create_event() {
    device_guard g(device_);
    cudaEvent_t e = nullptr;
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void destroy_event(event_type e) noexcept { (void)cudaEventDestroy(e); }
  void record_event(event_type e, cudaStream_t stream) { FUSEX_CUDA_CHECK(cudaEventRecord(e, stream)); }
  void wait_event(cudaStream_t stream, event_type e) { FUSEX_CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0)); }

  cudaStream_t create_service_stream() {
    device_guard g(device_);
    cudaStream_t s = nullptr;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void destroy_service_stream(cudaStream_t s) noexcept { (void)cudaStreamDestroy(s); }

  capture_state capture_status(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
    // An invalidated capture still counts: its stream must not get eager memory either.
    return capture_state{status != cudaStreamCaptureStatusNone, id};
  }

  bool is_thread_bound(cudaStream_t stream) const noexcept {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    if (stream == nullptr) return true;
#endif
    return stream == cudaStreamPerThread;
  }

  void check_stream(cudaStream_t stream) {
#if CUDART_VERSION >= 12080
    int d = -1;
    FUSEX_CUDA_CHECK(cudaStreamGetDevice(stream, &d));
    if (d != device_) {
      throw invalid_argument("fusex::arena: stream " + format_pointer(stream) + " belongs to device " +
                             std::to_string(d) + " but the arena serves device " + std::to_string(device_));
    }
#else
    (void)stream;
#endif
  }

 private:
  int device_;
  arena_upstream upstream_;
};

}  // namespace fusex::detail
