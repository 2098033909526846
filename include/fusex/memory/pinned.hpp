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

#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/free_index.hpp>
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
  ~pinned_host_resource() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!live_.empty())
      std::fprintf(stderr, "fusex::pinned_host_resource: destroyed with %zu live block(s)\n", live_.size());
    for (auto& kv : free_) {
      for (block& b : kv.second) {
        if (b.event != nullptr) {
          (void)cudaEventSynchronize(b.event);
          (void)cudaEventDestroy(b.event);
        }
        (void)cudaFreeHost(b.p);
      }
    }
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }

  /// Page-locked host memory for `bytes`, free of any pending device work. Zero bytes give null.
  void* allocate(std::size_t bytes, std::size_t alignment = default_alignment) {
    check_alignment(alignment, bytes);
    if (bytes == 0) return nullptr;
    const std::size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.allocations;
      auto it = free_.find(size);
      if (it != free_.end()) {
        std::vector<block>& list = it->second;
        for (std::size_t i = list.size(); i-- > 0;) {
          if (!ready(list[i])) continue;
          block b = list[i];
          list[i] = list.back();
          list.pop_back();
          if (b.event != nullptr) events_.push_back(b.event);
          stats_.bytes_cached -= size;
          stats_.bytes_in_use += size;
          ++stats_.cache_hits;
          live_.emplace(b.p, bytes);
          return b.p;
        }
      }
    }
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cached(true);  // give idle blocks back and try once more
      e = cudaHostAlloc(&p, size, cudaHostAllocPortable);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw bad_alloc("fusex::pinned_host_resource: cudaHostAlloc of " + detail::format_bytes(size) +
                            " (for a request of " + std::to_string(bytes) +
                            " bytes) failed with "
                            "cudaErrorMemoryAllocation; " +
                            detail::format_bytes(stats().bytes_reserved) + " of pinned memory is held by this resource",
                        bytes, e);
      }
    }
    FUSEX_CUDA_CHECK(e);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.host_allocs;
    stats_.bytes_in_use += size;
    stats_.bytes_reserved += size;
    live_.emplace(p, bytes);
    return p;
  }

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
  pinned_stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  struct block {
    void* p;
    cudaEvent_t event;  // recorded at the free, or null
  };

  static void check_alignment(std::size_t alignment, std::size_t bytes) {
    if (!detail::is_pow2(alignment) || alignment > max_alignment) {
      throw invalid_argument("fusex::pinned_host_resource: alignment " + std::to_string(alignment) + " (for " +
                             std::to_string(bytes) + " bytes) is not a power of two up to 4096");
    }
  }

  // Pages, then eight size classes per power of two: blocks are reused across nearby sizes.
  static std::size_t rounded(std::size_t bytes) {
    if (bytes <= 4096) return 4096;
    if (bytes > (std::size_t{1} << 62))
      throw bad_alloc("fusex::pinned_host_resource: request of " + std::to_string(bytes) + " bytes too large", bytes,
                      cudaErrorMemoryAllocation);
    const std::size_t r = detail::round_up(bytes, 4096);
    int bin = detail::tlsf_bin(r);
    if (detail::tlsf_lower_bound(bin) < r) ++bin;
    return detail::round_up(detail::tlsf_lower_bound(bin), 4096);
  }

  static bool ready(const block& b) {
    if (b.event == nullptr) return true;
    const cudaError_t e = cudaEventQuery(b.event);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    FUSEX_CUDA_CHECK(e);
    return false;
  }

  void free_block(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream, bool ordered) {
    if (p == nullptr) {
      if (bytes != 0) {
        throw invalid_argument("fusex::pinned_host_resource: deallocate of a null pointer with a size of " +
                               std::to_string(bytes) + " bytes");
      }
      return;
    }
    check_alignment(alignment, bytes);
    if (ordered) {
      cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
      FUSEX_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
      if (cs != cudaStreamCaptureStatusNone) {
        throw error(
            "fusex::pinned_host_resource: deallocate_async on a stream that is being captured: pinned "
            "staging memory is host memory, reused when the host sees the work done, which a graph "
            "capture cannot provide");
      }
    }
    std::size_t excess = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(p);
      if (it == live_.end()) {
        throw invalid_argument("fusex::pinned_host_resource: " + detail::format_pointer(p) +
                               " is not a live block of this resource (double free, or foreign pointer)");
      }
      if (it->second != bytes) {
        throw invalid_argument("fusex::pinned_host_resource: " + detail::format_pointer(p) + " was allocated with " +
                               std::to_string(it->second) + " bytes, freed with " + std::to_string(bytes));
      }
      const std::size_t size = rounded(bytes);
      cudaEvent_t ev = nullptr;
      if (ordered) {
        if (!events_.empty()) {
          ev = events_.back();
          events_.pop_back();
        } else {
          FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        }
        const cudaError_t e = cudaEventRecord(ev, stream);
        if (e != cudaSuccess) {
          events_.push_back(ev);
          FUSEX_CUDA_CHECK(e);
        }
      }
      live_.erase(it);
      free_[size].push_back(block{p, ev});
      stats_.bytes_in_use -= size;
      stats_.bytes_cached += size;
      excess = stats_.bytes_cached > max_cached_ ? stats_.bytes_cached - max_cached_ : 0;
    }
    if (excess != 0) release_cached(false);
  }

  // Frees cached blocks that are ready (all of them down to max_cached_, or every ready one when
  // `all`). Returns the bytes freed.
  std::size_t release_cached(bool all) {
    std::vector<void*> to_free;
    std::size_t freed = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        std::vector<block>& list = it->second;
        for (std::size_t i = list.size(); i-- > 0;) {
          if (!all && stats_.bytes_cached <= max_cached_ && freed != 0) break;
          if (!ready(list[i])) continue;
          if (list[i].event != nullptr) events_.push_back(list[i].event);
          to_free.push_back(list[i].p);
          list[i] = list.back();
          list.pop_back();
          stats_.bytes_cached -= it->first;
          stats_.bytes_reserved -= it->first;
          freed += it->first;
        }
      }
    }
    for (void* p : to_free) FUSEX_CUDA_CHECK(cudaFreeHost(p));
    return freed;
  }

  std::size_t max_cached_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<block>> free_;
  std::unordered_map<void*, std::size_t> live_;
  std::vector<cudaEvent_t> events_;
  pinned_stats stats_;
};

/// The process-wide pinned staging resource (made on first use, never destroyed).
inline pinned_host_resource& default_pinned_resource() {
  static pinned_host_resource* r = new pinned_host_resource();
  return *r;
}

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
