#pragma once
/// \file
/// The definitions of pinned_host_resource's member functions (memory/pinned.hpp declares them):
/// the cache of page-locked blocks, their events, and cudaHostAlloc / cudaFreeHost. Host code:
/// pinned.hpp includes this header where FUSEX_DETAIL_HOST_BODIES is set (config.hpp), so nvcc's
/// device pass sees the declarations only.

#include <fusex/error.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/free_index.hpp>
#include <fusex/memory/pinned.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace fusex {

FUSEX_DECL pinned_host_resource::~pinned_host_resource() {
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

FUSEX_DECL void* pinned_host_resource::allocate(std::size_t bytes, std::size_t alignment) {
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

FUSEX_DECL pinned_stats pinned_host_resource::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

FUSEX_DECL void pinned_host_resource::check_alignment(std::size_t alignment, std::size_t bytes) {
  if (!detail::is_pow2(alignment) || alignment > max_alignment) {
    throw invalid_argument("fusex::pinned_host_resource: alignment " + std::to_string(alignment) + " (for " +
                           std::to_string(bytes) + " bytes) is not a power of two up to 4096");
  }
}

FUSEX_DECL std::size_t pinned_host_resource::rounded(std::size_t bytes) {
  if (bytes <= 4096) return 4096;
  if (bytes > (std::size_t{1} << 62))
    throw bad_alloc("fusex::pinned_host_resource: request of " + std::to_string(bytes) + " bytes too large", bytes,
                    cudaErrorMemoryAllocation);
  const std::size_t r = detail::round_up(bytes, 4096);
  int bin = detail::tlsf_bin(r);
  if (detail::tlsf_lower_bound(bin) < r) ++bin;
  return detail::round_up(detail::tlsf_lower_bound(bin), 4096);
}

FUSEX_DECL bool pinned_host_resource::ready(const block& b) {
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

FUSEX_DECL void pinned_host_resource::free_block(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream,
                                             bool ordered) {
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

FUSEX_DECL std::size_t pinned_host_resource::release_cached(bool all) {
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

FUSEX_DECL pinned_host_resource& default_pinned_resource() {
  static pinned_host_resource* r = new pinned_host_resource();
  return *r;
}

}  // namespace fusex
