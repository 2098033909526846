#pragma once
/// \file
/// fusex::buffer<T>: a move-only, stream-ordered device allocation from a memory resource.

#include <fusex/error.hpp>
#include <fusex/memory/resource.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace fusex {

/// Uninitialised device storage for `size` elements of T, allocated on a stream from a resource
/// and freed on the same stream (or the one given to reset() or set_stream()) when destroyed.
/// Move-only. A default-constructed buffer is empty and refers to no resource.
template <class T>
class buffer {
 public:
  buffer() noexcept : resource_(detail::null_resource_instance()) {}

  /// Allocates `size` elements ordered on `stream` from `resource`.
  buffer(std::size_t size, cudaStream_t stream, device_resource_ref resource = get_default_resource())
      : resource_(resource), stream_(stream), size_(size) {
    if (size > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw invalid_argument("fusex: buffer of " + std::to_string(size) + " elements of " + std::to_string(sizeof(T)) +
                             " bytes overflows size_t");
    }
    data_ = static_cast<T*>(resource_.allocate_async(bytes(), default_alignment, stream_));
  }

  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  buffer(buffer&& o) noexcept
      : resource_(o.resource_),
        stream_(o.stream_),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        extra_streams_(std::move(o.extra_streams_)) {
    o.extra_streams_.clear();
  }
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      release_noexcept();
      resource_ = o.resource_;
      stream_ = o.stream_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      extra_streams_ = std::move(o.extra_streams_);
      o.extra_streams_.clear();
    }
    return *this;
  }
  ~buffer() { release_noexcept(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  cudaStream_t stream() const noexcept { return stream_; }
  device_resource_ref resource() const noexcept { return resource_; }

  /// Frees the memory now, ordered on `stream` (the buffer's stream by default): work enqueued on
  /// `stream` after this may reuse it.
  void reset(cudaStream_t stream) {
    if (data_ == nullptr && size_ == 0) return;
    T* p = std::exchange(data_, nullptr);
    const std::size_t b = bytes();
    size_ = 0;
    std::vector<cudaStream_t> extra = std::move(extra_streams_);
    extra_streams_.clear();
    // A resource without record_stream: order the free after the other streams' work here.
    for (cudaStream_t s : extra) {
      if (s == stream) continue;
      cudaEvent_t e = nullptr;
      FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      const cudaError_t r1 = cudaEventRecord(e, s);
      const cudaError_t r2 = r1 == cudaSuccess ? cudaStreamWaitEvent(stream, e, 0) : r1;
      (void)cudaEventDestroy(e);  // released once the wait is done
      FUSEX_CUDA_CHECK(r2);
    }
    resource_.deallocate_async(p, b, default_alignment, stream);
  }
  void reset() { reset(stream_); }

  /// Makes future frees ordered on `stream` instead of the allocation stream.
  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }

  /// Declares that the memory is also used by work on `stream` (besides the buffer's stream): its
  /// reuse after the free will wait for that work too, through events, never a host sync. With
  /// fusex::arena the arena tracks it; with other resources the free is ordered after `stream`.
  void record_stream(cudaStream_t stream) {
    if (data_ == nullptr || stream == stream_) return;
    if (resource_.supports_record_stream()) {
      resource_.record_stream(data_, stream);
    } else {
      for (cudaStream_t s : extra_streams_)
        if (s == stream) return;
      extra_streams_.push_back(stream);
    }
  }

 private:
  void release_noexcept() noexcept {
    try {
      reset(stream_);
    } catch (const std::exception& e) {
      // A destructor must not throw; a failed free is reported rather than silently dropped.
      std::fprintf(stderr, "fusex: buffer release failed: %s\n", e.what());
    }
  }

  device_resource_ref resource_;
  cudaStream_t stream_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<cudaStream_t> extra_streams_;
};

}  // namespace fusex
