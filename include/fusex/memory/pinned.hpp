#pragma once
/// \file
/// Pinned (page-locked) host memory for staging: a caching resource and fusex::pinned_buffer<T>.
///
/// Copies between pageable host memory and the device are staged by the driver and do not
/// overlap with the host; from pinned memory, cudaMemcpyAsync is a DMA that overlaps with host
/// work and kernels. cudaHostAlloc costs milliseconds, so blocks are cached. A block freed with
/// deallocate_async(stream) is reused only once the work enqueued on that stream before the free
/// has completed (an event recorded at the free, tested with cudaEventQuery when a block of that
/// size is wanted; if none is ready, a new block is allocated instead of waiting).
///
/// pinned_host_resource's member functions are defined in detail/pinned_impl.hpp, included below
/// for host compilers only: nvcc's device pass needs the declarations.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fusex {

/// Statistics of a pinned_host_resource.
struct pinned_stats {
  std::size_t bytes_in_use = 0;    ///< Bytes of live blocks (rounded sizes).
  std::size_t bytes_cached = 0;    ///< Bytes of freed blocks kept for reuse.
  std::size_t bytes_reserved = 0;  ///< Pinned bytes held (in use + cached).
  std::uint64_t allocations = 0;   ///< allocate calls with a non-zero size.
  std::uint64_t cache_hits = 0;    ///< Served from the cache.
  std::uint64_t host_allocs = 0;   ///< cudaHostAlloc calls.
};

/// A thread-safe caching allocator of pinned host memory. Alignments: powers of two up to 4096
/// (blocks are page-aligned). Not for use on a stream that is being captured.
class pinned_host_resource {
 public:
  /// `max_cached_bytes`: freed blocks beyond this are returned to the system (cudaFreeHost).
  explicit pinned_host_resource(std::size_t max_cached_bytes = std::size_t{1} << 30) : max_cached_(max_cached_bytes) {}
  pinned_host_resource(const pinned_host_resource&) = delete;
  pinned_host_resource& operator=(const pinned_host_resource&) = delete;

  /// Frees the cached blocks (waiting for their pending copies); live blocks are leaked with a
  /// message.
  ~pinned_host_resource();

  /// Page-locked host memory for `bytes`, free of any pending device work. Zero bytes give null.
  void* allocate(std::size_t bytes, std::size_t alignment = default_alignment);

  /// Returns a block for immediate reuse: no device work may still use it.
  void deallocate(void* p, std::size_t bytes, std::size_t alignment = default_alignment) {
    free_block(p, bytes, alignment, nullptr, false);
  }

  /// Returns a block that work enqueued on `stream` (a copy from or to it) may still use: it is
  /// reused only after that work. Never waits.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
    free_block(p, bytes, alignment, stream, true);
  }

  /// Returns the cached blocks whose pending work is done to the system; returns the bytes freed.
  std::size_t trim() { return release_cached(true); }

  /// A snapshot of the statistics.
  pinned_stats stats() const;

 private:
  struct block {
    void* p;
    cudaEvent_t event;  // recorded at the free, or null
  };

  static void check_alignment(std::size_t alignment, std::size_t bytes);

  // Pages, then eight size classes per power of two: blocks are reused across nearby sizes.
  static std::size_t rounded(std::size_t bytes);

  static bool ready(const block& b);

  void free_block(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream, bool ordered);

  // Frees cached blocks that are ready (all of them down to max_cached_, or every ready one when
  // `all`). Returns the bytes freed.
  std::size_t release_cached(bool all);

  std::size_t max_cached_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<block>> free_;
  std::unordered_map<void*, std::size_t> live_;
  std::vector<cudaEvent_t> events_;
  pinned_stats stats_;
};

/// The process-wide pinned staging resource (made on first use, never destroyed).
pinned_host_resource& default_pinned_resource();

/// Pinned host storage for `size` elements of T (uninitialised), from a pinned_host_resource.
/// Move-only. Freed when destroyed: ordered after the stream given to set_stream() (copies from
/// or to it may still be in flight), or immediately if none was given.
template <class T>
class pinned_buffer {
 public:
  pinned_buffer() noexcept = default;
  explicit pinned_buffer(std::size_t size, pinned_host_resource& resource = default_pinned_resource())
      : resource_(&resource), size_(size) {
    if (size > std::numeric_limits<std::size_t>::max() / sizeof(T)) {
      throw invalid_argument("fusex: pinned_buffer of " + std::to_string(size) + " elements overflows size_t");
    }
    data_ = static_cast<T*>(resource_->allocate(bytes()));
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  pinned_buffer(pinned_buffer&& o) noexcept
      : resource_(o.resource_),
        data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        stream_(o.stream_),
        has_stream_(std::exchange(o.has_stream_, false)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      release_noexcept();
      resource_ = o.resource_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      stream_ = o.stream_;
      has_stream_ = std::exchange(o.has_stream_, false);
    }
    return *this;
  }
  ~pinned_buffer() { release_noexcept(); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + size_; }

  /// A rank-1 view of all elements.
  fusex::view<T> view() const { return fusex::view<T>(data_, shape_t{static_cast<std::int64_t>(size_)}); }
  /// A contiguous view with `shape` (which must have size() elements).
  fusex::view<T> view(shape_t shape) const {
    if (numel(shape) != static_cast<std::int64_t>(size_)) {
      throw shape_error("fusex: pinned_buffer of " + std::to_string(size_) + " elements viewed as shape " +
                        shape.str());
    }
    return fusex::view<T>(data_, shape);
  }

  /// Orders the buffer's free after the work enqueued on `stream` at the time of the free.
  void set_stream(cudaStream_t stream) noexcept {
    stream_ = stream;
    has_stream_ = true;
  }

  /// Frees now, ordered after `stream`'s work.
  void reset(cudaStream_t stream) {
    if (data_ == nullptr) return;
    T* p = std::exchange(data_, nullptr);
    const std::size_t b = bytes();
    size_ = 0;
    resource_->deallocate_async(p, b, default_alignment, stream);
  }
  /// Frees now (after the set_stream stream's work if one was given).
  void reset() {
    if (data_ == nullptr) return;
    if (has_stream_) {
      reset(stream_);
      return;
    }
    T* p = std::exchange(data_, nullptr);
    const std::size_t b = bytes();
    size_ = 0;
    resource_->deallocate(p, b);
  }

 private:
  void release_noexcept() noexcept {
    try {
      reset();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fusex: pinned_buffer release failed: %s\n", e.what());
    }
  }

  pinned_host_resource* resource_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
  bool has_stream_ = false;
};

}  // namespace fusex

// The definitions, for host compilers only: nvcc's device pass (where __CUDA_ARCH__ is defined)
// analyses host code but never generates it, so the declarations above are all it needs.
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/memory/detail/pinned_impl.hpp>
#endif
