#pragma once
/// \file
/// The definitions of the CUDA backend's member functions (cuda_backend.hpp declares them) and of
/// device_guard: the CUDA runtime calls behind the arena's chunks, events, service stream and
/// capture queries. Host code: cuda_backend.hpp includes this header where
/// FUSEX_DETAIL_HOST_BODIES is set (config.hpp), so nvcc's device pass sees the declarations only.

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/cuda_backend.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace fusex::detail {

FUSEX_DECL device_guard::device_guard(int device) {
  previous_ = current_device();
  if (previous_ != device) FUSEX_CUDA_CHECK(cudaSetDevice(device));
  changed_ = previous_ != device;
}

FUSEX_DECL device_guard::~device_guard() {
  if (changed_) (void)cudaSetDevice(previous_);
}

FUSEX_DECL cudaError_t cuda_backend::allocate_chunk(std::uintptr_t& out, std::size_t bytes, cudaStream_t stream) {
  device_guard g(device_);
  void* p = nullptr;
  const cudaError_t e =
      upstream_ == arena_upstream::async_pool ? cudaMallocAsync(&p, bytes, stream) : cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return e;
  }
  if (upstream_ == arena_upstream::async_pool) cuda_check(e, "cudaMallocAsync(&p, bytes, stream)", __FILE__, __LINE__);
  else cuda_check(e, "cudaMalloc(&p, bytes)", __FILE__, __LINE__);
  out = reinterpret_cast<std::uintptr_t>(p);
  return cudaSuccess;
}

FUSEX_DECL void cuda_backend::free_chunk(std::uintptr_t p, std::size_t /*bytes*/, cudaStream_t stream) {
  device_guard g(device_);
  if (upstream_ == arena_upstream::async_pool) FUSEX_CUDA_CHECK(cudaFreeAsync(reinterpret_cast<void*>(p), stream));
  else FUSEX_CUDA_CHECK(cudaFree(reinterpret_cast<void*>(p)));
}

FUSEX_DECL std::string cuda_backend::error_string(cudaError_t e) const {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

FUSEX_DECL auto cuda_backend::create_event() -> event_type {
  device_guard g(device_);
  cudaEvent_t e = nullptr;
  FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

FUSEX_DECL void cuda_backend::destroy_event(event_type e) noexcept { (void)cudaEventDestroy(e); }

FUSEX_DECL void cuda_backend::record_event(event_type e, cudaStream_t stream) {
  FUSEX_CUDA_CHECK(cudaEventRecord(e, stream));
}

FUSEX_DECL void cuda_backend::wait_event(cudaStream_t stream, event_type e) {
  FUSEX_CUDA_CHECK(cudaStreamWaitEvent(stream, e, 0));
}

FUSEX_DECL cudaStream_t cuda_backend::create_service_stream() {
  device_guard g(device_);
  cudaStream_t s = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

FUSEX_DECL void cuda_backend::destroy_service_stream(cudaStream_t s) noexcept { (void)cudaStreamDestroy(s); }

FUSEX_DECL capture_state cuda_backend::capture_status(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, &id));
  // An invalidated capture still counts: its stream must not get eager memory either.
  return capture_state{status != cudaStreamCaptureStatusNone, id};
}

FUSEX_DECL bool cuda_backend::is_thread_bound(cudaStream_t stream) const noexcept {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  if (stream == nullptr) return true;
#endif
  return stream == cudaStreamPerThread;
}

FUSEX_DECL void cuda_backend::check_stream(cudaStream_t stream) {
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

}  // namespace fusex::detail
