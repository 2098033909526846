#pragma once
/// \file
/// Device memory resources and the default resource of each device.
///
/// - fusex::device_resource_ref (resource_ref.hpp): the type-erased handle everything takes.
/// - fusex::arena (arena.hpp): the default resource, one per device, made on first use.
/// - fusex::cuda_async_resource / fusex::cuda_malloc_resource: thin wrappers of cudaMallocAsync and
///   cudaMalloc (baselines, or an upstream for other resources).
///
/// The default is never managed memory. get_default_resource() is what tensor<T>, buffer<T> and
/// fusex temporaries use when not given a resource; set_default_resource() replaces it (per device).
///
/// This header declares; detail/resource_impl.hpp defines (with the per-device table behind the
/// defaults), included below for host compilers only: nvcc's device pass needs the declarations.

#include <fusex/config.hpp>
#include <fusex/memory/arena.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace fusex {

/// Stream-ordered allocation straight from the CUDA driver's pool (cudaMallocAsync). Stateless.
/// Alignments up to 256 (what cudaMallocAsync guarantees).
class cuda_async_resource {
 public:
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream);
  void deallocate_async(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/, cudaStream_t stream);
};

/// cudaMalloc / cudaFree (synchronous; cudaFree synchronises the device). Stateless. Alignments up
/// to 256.
class cuda_malloc_resource {
 public:
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t /*stream*/);
  void deallocate_async(void* p, std::size_t /*bytes*/, std::size_t /*alignment*/, cudaStream_t /*stream*/);
};

/// The built-in arena of `device`: made (with default options) on first use, and kept until the
/// process ends.
arena& default_arena(int device);
/// The built-in arena of the current device.
arena& default_arena();

/// The default device resource of `device`: the one set with set_default_resource, else
/// default_arena(device).
device_resource_ref get_default_resource(int device);
/// The default device resource of the current device, used by tensor<T> and fusex temporaries
/// when no resource is given.
device_resource_ref get_default_resource();

/// Replaces the default resource of `device`; returns the previous one. The new resource must
/// outlive every allocation made from it through the default.
device_resource_ref set_default_resource(int device, device_resource_ref r);
/// Replaces the default resource of the current device; returns the previous one.
device_resource_ref set_default_resource(device_resource_ref r);

}  // namespace fusex

// The definitions, for host compilers only: nvcc's device pass (where __CUDA_ARCH__ is defined)
// analyses host code but never generates it, so the declarations above are all it needs.
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/memory/detail/resource_impl.hpp>
#endif
