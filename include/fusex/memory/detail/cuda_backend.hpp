#pragma once
/// \file
/// The arena's backend over the CUDA runtime: chunks from cudaMallocAsync (or cudaMalloc),
/// cudaEvent_t events, capture queries. Host code only (compiles with a plain C++ compiler). The
/// classes and declarations; the definitions are in cuda_backend_impl.hpp, included at the end for
/// host compilers only (nvcc's device pass needs the declarations only).

#include <fusex/config.hpp>
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
  explicit device_guard(int device);
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard();

 private:
  int previous_ = 0;
  bool changed_ = false;
};

class cuda_backend {
 public:
  using event_type = cudaEvent_t;

  cuda_backend(int device, arena_upstream upstream) : device_(device), upstream_(upstream) {}

  int device() const noexcept { return device_; }

  cudaError_t allocate_chunk(std::uintptr_t& out, std::size_t bytes, cudaStream_t stream);

  void free_chunk(std::uintptr_t p, std::size_t /*bytes*/, cudaStream_t stream);

  bool chunks_are_stream_ordered() const noexcept { return upstream_ == arena_upstream::async_pool; }
  bool free_is_capture_safe() const noexcept { return upstream_ == arena_upstream::async_pool; }
  const char* upstream_name() const noexcept {
    return upstream_ == arena_upstream::async_pool ? "cudaMallocAsync" : "cudaMalloc";
  }
  std::string error_string(cudaError_t e) const;

  event_type create_event();
  void destroy_event(event_type e) noexcept;
  void record_event(event_type e, cudaStream_t stream);
  void wait_event(cudaStream_t stream, event_type e);

  cudaStream_t create_service_stream();
  void destroy_service_stream(cudaStream_t s) noexcept;

  capture_state capture_status(cudaStream_t stream);

  bool is_thread_bound(cudaStream_t stream) const noexcept;

  void check_stream(cudaStream_t stream);

 private:
  int device_;
  arena_upstream upstream_;
};

}  // namespace fusex::detail

// The definitions, for host compilers only: nvcc's device pass (where __CUDA_ARCH__ is defined)
// analyses host code but never generates it, so the declarations above are all it needs.
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/memory/detail/cuda_backend_impl.hpp>
#endif
