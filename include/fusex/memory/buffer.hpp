#pragma once
/// \file
/// fusex::buffer<T>: a move-only, stream-ordered device allocation from a memory resource.

#include <fusex/error.hpp>
#include <fusex/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

namespace fusex {

/// Uninitialised device storage for `size` elements of T, allocated on a stream from a resource
/// and freed on the same stream (or the one given to reset()) when destroyed. Move-only.
template <class T>
class buffer {
 public:
  buffer() noexcept : resource_(get_default_resource()) {}

  /// Allocates `size` elements ordered on `stream` from `resource`.
  buffer(std::size_t size, cudaStream_t stream, device_resource_ref resource = get_default_resource())
      : resource_(resource), stream_(stream), size_(size) {
    if (size > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw invalid_argument("fusex: buffer of " + std::to_string(size) + " elements of " +
                             std::to_string(sizeof(T)) + " bytes overflows size_t");
    }
    data_ = static_cast<T*>(resource_.allocate_async(bytes(), default_alignment, stream_));
  }

  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  buffer(buffer&& o) noexcept
      : resource_(o.resource_), stream_(o.stream_), data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      release_noexcept();
      resource_ = o.resource_;
      stream_ = o.stream_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~buffer() { release_noexcept(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  cudaStream_t stream() const noexcept { return stream_; }
  device_resource_ref resource() const noexcept { return resource_; }

  /// Frees the memory now, ordered on `stream` (the allocation stream by default).
  void reset(cudaStream_t stream) {
    if (data_ != nullptr || size_ != 0) {
      T* p = std::exchange(data_, nullptr);
      const std::size_t b = bytes();
      size_ = 0;
      resource_.deallocate_async(p, b, default_alignment, stream);
    }
  }
  void reset() { reset(stream_); }

  /// Makes future frees ordered on `stream` instead of the allocation stream.
  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }

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
};

}  // namespace fusex
