#pragma once
/// \file
/// Device memory resources in the stream-ordered shape of CCCL's `cuda::mr` (3.0):
/// `allocate_async(bytes, alignment, stream)` and `deallocate_async(ptr, bytes, alignment, stream)`.
/// CCCL 3.0 ships that interface only as experimental (it needs
/// LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE and promises no stability), so fusex mirrors the
/// shape without depending on it; an adapter either way is a few lines.

#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// Alignment every fusex resource guarantees when asked for less: enough for 16-byte vector access.
inline constexpr std::size_t default_alignment = 256;

/// A non-owning, type-erased, cheap-to-copy reference to a stream-ordered device memory resource.
/// Anything with `allocate_async(std::size_t, std::size_t, cudaStream_t)` and
/// `deallocate_async(void*, std::size_t, std::size_t, cudaStream_t)` converts to it. The referenced
/// resource must outlive the ref.
class device_resource_ref {
 public:
  template <class R, class = std::enable_if_t<!std::is_same_v<std::decay_t<R>, device_resource_ref>>>
  device_resource_ref(R& r) noexcept  // NOLINT(google-explicit-constructor): a ref converts implicitly
      : obj_(static_cast<void*>(&r)), vt_(&vtable_for<R>) {}

  /// Allocates `bytes` with `alignment` (a power of two), ordered on `stream`.
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream) const {
    return vt_->allocate(obj_, bytes, alignment, stream);
  }
  /// Returns memory obtained from allocate_async with the same bytes and alignment; the memory
  /// may be reused by work ordered after `stream`'s work at this point.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream) const {
    vt_->deallocate(obj_, p, bytes, alignment, stream);
  }
  /// The referenced object, for identity comparisons.
  void* object() const noexcept { return obj_; }

  friend bool operator==(const device_resource_ref& a, const device_resource_ref& b) noexcept {
    return a.obj_ == b.obj_;
  }
  friend bool operator!=(const device_resource_ref& a, const device_resource_ref& b) noexcept {
    return !(a == b);
  }

 private:
  struct vtable {
    void* (*allocate)(void*, std::size_t, std::size_t, cudaStream_t);
    void (*deallocate)(void*, void*, std::size_t, std::size_t, cudaStream_t);
  };
  template <class R>
  static constexpr vtable vtable_for{
      [](void* o, std::size_t b, std::size_t a, cudaStream_t s) -> void* {
        return static_cast<R*>(o)->allocate_async(b, a, s);
      },
      [](void* o, void* p, std::size_t b, std::size_t a, cudaStream_t s) {
        static_cast<R*>(o)->deallocate_async(p, b, a, s);
      }};

  void* obj_;
  const vtable* vt_;
};

/// Stream-ordered allocation straight from the CUDA driver's pool (cudaMallocAsync). Stateless.
class cuda_async_resource {
 public:
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
    check_alignment(alignment);
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    FUSEX_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
    return p;  // cudaMallocAsync returns at least 256-byte aligned memory
  }
  void deallocate_async(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/, cudaStream_t stream) {
    if (p != nullptr) FUSEX_CUDA_CHECK(cudaFreeAsync(p, stream));
  }

 private:
  static void check_alignment(std::size_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > default_alignment) {
      throw invalid_argument("fusex: cuda_async_resource: alignment " + std::to_string(alignment) +
                             " is not a power of two up to " + std::to_string(default_alignment));
    }
  }
};

namespace detail {
inline cuda_async_resource& builtin_async_resource() {
  static cuda_async_resource r;
  return r;
}
// The default is read on every tensor allocation, so reads are one atomic load. Each ref ever
// set is kept in an append-only deque (stable addresses, freed at exit): resetting the default is
// rare and this avoids both a lock on the read path and a use-after-free by a concurrent reader.
inline std::atomic<const device_resource_ref*>& default_resource_slot() {
  static std::atomic<const device_resource_ref*> slot{nullptr};
  return slot;
}
inline const device_resource_ref* keep_resource_ref(device_resource_ref r) {
  static std::mutex m;
  static std::deque<device_resource_ref> kept;
  std::lock_guard<std::mutex> lock(m);
  kept.push_back(r);
  return &kept.back();
}
}  // namespace detail

/// The process-wide default device resource used by tensor<T> and fusex temporaries when no
/// resource is given. Initially a cudaMallocAsync-backed resource.
inline device_resource_ref get_default_resource() {
  const device_resource_ref* r = detail::default_resource_slot().load(std::memory_order_acquire);
  if (r != nullptr) return *r;
  return device_resource_ref(detail::builtin_async_resource());
}

/// Replaces the default device resource; returns the previous one. The new resource must outlive
/// every allocation made from it through the default.
inline device_resource_ref set_default_resource(device_resource_ref r) {
  device_resource_ref old = get_default_resource();
  detail::default_resource_slot().store(detail::keep_resource_ref(r), std::memory_order_release);
  return old;
}

}  // namespace fusex
