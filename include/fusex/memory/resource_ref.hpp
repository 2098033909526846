#pragma once
/// \file
/// fusex::device_resource_ref: the type-erased, cheap-to-copy handle through which tensor<T>,
/// buffer<T>, reduction temporaries and graph capture reach a device memory resource.
///
/// The resource shape is the stream-ordered one of CCCL's `cuda::mr` (3.0):
/// `allocate_async(bytes, alignment, stream)` and `deallocate_async(ptr, bytes, alignment, stream)`.
/// The CCCL installed with CUDA 13.0 (3.0.1) still ships `<cuda/memory_resource>` as experimental:
/// it compiles only with LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE defined, promises no API
/// stability, and later releases rename the calls (`allocate(stream, bytes, alignment)`). fusex
/// therefore mirrors the shape without depending on it: users need not define an experimental
/// macro, and an adapter to or from `cuda::mr` is a few lines whichever spelling CCCL settles on.

#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// Alignment every fusex resource guarantees when asked for less: enough for 16-byte vector access.
inline constexpr std::size_t default_alignment = 256;
/// The largest alignment fusex::arena honours (any power of two up to it).
inline constexpr std::size_t max_alignment = 4096;

namespace detail {
template <class R, class = void>
struct has_record_stream : std::false_type {};
template <class R>
struct has_record_stream<
    R, std::void_t<decltype(std::declval<R&>().record_stream(std::declval<void*>(), std::declval<cudaStream_t>()))>>
    : std::true_type {};

// One distinct address per type: identifies the referenced type without RTTI.
template <class R>
inline constexpr char resource_type_tag = 0;

/// The resource of a default-constructed buffer: owns nothing, allocates nothing.
class null_resource {
 public:
  void* allocate_async(std::size_t bytes, std::size_t, cudaStream_t) {
    if (bytes == 0) return nullptr;
    throw invalid_argument("fusex: allocation of " + std::to_string(bytes) + " bytes from an empty resource reference");
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t, cudaStream_t) {
    if (p != nullptr) {
      throw invalid_argument("fusex: deallocation of " + std::to_string(bytes) +
                             " bytes through an empty resource reference (the pointer came from another resource)");
    }
  }
};
inline null_resource& null_resource_instance() noexcept {
  static null_resource r;
  return r;
}
}  // namespace detail

/// A non-owning, type-erased, cheap-to-copy (two pointers) reference to a stream-ordered device
/// memory resource. Anything with `allocate_async(std::size_t, std::size_t, cudaStream_t)` and
/// `deallocate_async(void*, std::size_t, std::size_t, cudaStream_t)` converts to it; a resource
/// that also has `record_stream(void*, cudaStream_t)` (fusex::arena) exposes it through the ref.
/// The referenced resource must outlive the ref.
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
  /// True when the resource orders reuse after other streams itself (record_stream).
  bool supports_record_stream() const noexcept { return vt_->record_stream != nullptr; }
  /// Marks the allocation `p` as used on `stream`: its reuse will also wait for `stream`'s work up
  /// to its deallocation. Throws fusex::invalid_argument if the resource cannot
  /// (supports_record_stream() is false; fusex::buffer then orders the free itself).
  void record_stream(void* p, cudaStream_t stream) const {
    if (vt_->record_stream == nullptr) {
      throw invalid_argument(
          "fusex: this memory resource has no record_stream; order the free after the other "
          "stream with an event");
    }
    vt_->record_stream(obj_, p, stream);
  }
  /// The referenced object, for identity comparisons.
  void* object() const noexcept { return obj_; }
  /// The referenced resource if it is an R (exactly), else null.
  template <class R>
  R* target() const noexcept {
    return vt_->tag == &detail::resource_type_tag<R> ? static_cast<R*>(obj_) : nullptr;
  }

  friend bool operator==(const device_resource_ref& a, const device_resource_ref& b) noexcept {
    return a.obj_ == b.obj_;
  }
  friend bool operator!=(const device_resource_ref& a, const device_resource_ref& b) noexcept { return !(a == b); }

 private:
  struct vtable {
    void* (*allocate)(void*, std::size_t, std::size_t, cudaStream_t);
    void (*deallocate)(void*, void*, std::size_t, std::size_t, cudaStream_t);
    void (*record_stream)(void*, void*, cudaStream_t);
    const char* tag;
  };
  using record_fn = void (*)(void*, void*, cudaStream_t);
  template <class R>
  static constexpr record_fn record_stream_of() {
    if constexpr (detail::has_record_stream<R>::value) {
      return [](void* o, void* p, cudaStream_t s) { static_cast<R*>(o)->record_stream(p, s); };
    } else {
      return nullptr;
    }
  }
  template <class R>
  static constexpr vtable vtable_for{[](void* o, std::size_t b, std::size_t a, cudaStream_t s) -> void* {
                                       return static_cast<R*>(o)->allocate_async(b, a, s);
                                     },
                                     [](void* o, void* p, std::size_t b, std::size_t a, cudaStream_t s) {
                                       static_cast<R*>(o)->deallocate_async(p, b, a, s);
                                     },
                                     record_stream_of<R>(), &detail::resource_type_tag<R>};

  void* obj_;
  const vtable* vt_;
};

}  // namespace fusex
