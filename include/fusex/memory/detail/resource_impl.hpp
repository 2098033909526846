#pragma once
/// \file
/// The definitions behind memory/resource.hpp: the CUDA resources' calls, and the per-device table
/// of default resources and built-in arenas. Host code: resource.hpp includes this header where
/// FUSEX_DETAIL_HOST_BODIES is set (config.hpp), so nvcc's device pass sees the declarations only.

#include <fusex/error.hpp>
#include <fusex/memory/arena.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/resource.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>

namespace fusex {

namespace detail {
inline void check_resource_alignment(const char* who, std::size_t alignment, std::size_t limit) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > limit) {
    throw invalid_argument(std::string("fusex: ") + who + ": alignment " + std::to_string(alignment) +
                           " is not a power of two up to " + std::to_string(limit));
  }
}
}  // namespace detail

FUSEX_DECL void* cuda_async_resource::allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
  detail::check_resource_alignment("cuda_async_resource", alignment, default_alignment);
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, bytes, stream);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw bad_alloc("fusex: cuda_async_resource: cudaMallocAsync of " + std::to_string(bytes) +
                        " bytes failed with cudaErrorMemoryAllocation",
                    bytes, e);
  }
  FUSEX_CUDA_CHECK(e);
  return p;
}

FUSEX_DECL void cuda_async_resource::deallocate_async(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/,
                                                  cudaStream_t stream) {
  if (p != nullptr) FUSEX_CUDA_CHECK(cudaFreeAsync(p, stream));
}

FUSEX_DECL void* cuda_malloc_resource::allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t /*stream*/) {
  detail::check_resource_alignment("cuda_malloc_resource", alignment, default_alignment);
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw bad_alloc("fusex: cuda_malloc_resource: cudaMalloc of " + std::to_string(bytes) +
                        " bytes failed with cudaErrorMemoryAllocation",
                    bytes, e);
  }
  FUSEX_CUDA_CHECK(e);
  return p;
}

FUSEX_DECL void cuda_malloc_resource::deallocate_async(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/,
                                                   cudaStream_t /*stream*/) {
  if (p != nullptr) FUSEX_CUDA_CHECK(cudaFree(p));
}

namespace detail {
inline constexpr int max_default_devices = 64;

// Per-device defaults. Read on every tensor allocation: one atomic load. Each ref ever set is kept
// in an append-only deque (stable addresses): resetting the default is rare, and this avoids both
// a lock on the read path and a use-after-free by a concurrent reader. Never destroyed (arenas
// may be used until the very end of the process).
struct default_resources {
  std::atomic<const device_resource_ref*> slot[max_default_devices] = {};
  std::atomic<arena*> arenas[max_default_devices] = {};
  std::mutex mutex;
  std::deque<device_resource_ref> kept;
};
inline default_resources& defaults() {
  static default_resources* d = new default_resources;
  return *d;
}
inline int checked_device(int device) {
  if (device < 0 || device >= max_default_devices) {
    throw invalid_argument("fusex: device " + std::to_string(device) + " is out of range (0 to " +
                           std::to_string(max_default_devices - 1) + ")");
  }
  return device;
}
// defaults().mutex held.
inline arena& default_arena_locked(default_resources& d, int device) {
  if (arena* a = d.arenas[device].load(std::memory_order_acquire)) return *a;
  auto* a = new arena(device, arena_options());  // never deleted, see default_resources
  d.arenas[device].store(a, std::memory_order_release);
  return *a;
}
}  // namespace detail

FUSEX_DECL arena& default_arena(int device) {
  auto& d = detail::defaults();
  const int i = detail::checked_device(device);
  if (arena* a = d.arenas[i].load(std::memory_order_acquire)) return *a;
  std::lock_guard<std::mutex> lock(d.mutex);
  return detail::default_arena_locked(d, i);
}

FUSEX_DECL arena& default_arena() { return default_arena(detail::current_device()); }

FUSEX_DECL device_resource_ref get_default_resource(int device) {
  const int i = detail::checked_device(device);
  if (const device_resource_ref* r = detail::defaults().slot[i].load(std::memory_order_acquire)) return *r;
  return device_resource_ref(default_arena(device));
}

FUSEX_DECL device_resource_ref get_default_resource() { return get_default_resource(detail::current_device()); }

FUSEX_DECL device_resource_ref set_default_resource(int device, device_resource_ref r) {
  auto& d = detail::defaults();
  const int i = detail::checked_device(device);
  std::lock_guard<std::mutex> lock(d.mutex);
  const device_resource_ref* prev = d.slot[i].load(std::memory_order_acquire);
  device_resource_ref old = prev != nullptr ? *prev : device_resource_ref(detail::default_arena_locked(d, i));
  d.kept.push_back(r);
  d.slot[i].store(&d.kept.back(), std::memory_order_release);
  return old;
}

FUSEX_DECL device_resource_ref set_default_resource(device_resource_ref r) {
  return set_default_resource(detail::current_device(), r);
}

}  // namespace fusex
