#pragma once
/// \file
/// fusex::arena: a stream-ordered device memory arena. Allocation and deallocation on one stream
/// cost tens of nanoseconds of host time and make no CUDA call; memory crosses streams through
/// events, never a host synchronisation; graph capture gets graph-private pools. docs/memory.md
/// describes the model.

#include <fusex/config.hpp>
#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/cuda_backend.hpp>

#include <cuda_runtime_api.h>

namespace fusex {

/// A stream-ordered memory resource for one device (see docs/memory.md):
///  - chunks from upstream (cudaMallocAsync's pool by default, or cudaMalloc), grown
///    geometrically and cut into blocks; free neighbours coalesce;
///  - free lists per stream; a block freed on stream A goes to stream B only after B waits on an
///    event recorded on A after the free (recorded lazily, once for many frees);
///  - per-thread caches of recently freed blocks: an allocate + free pair on one stream makes no
///    CUDA call and takes no contended lock;
///  - record_stream() for memory used on a second stream; trim()/release() return memory;
///  - graph-private pools for stream capture (begin_private_pool / end_private_pool);
///  - out of memory throws fusex::bad_alloc and leaves the arena usable.
///
/// Thread-safe. The arena must outlive its allocations and private pools. Streams that freed
/// memory into the arena must stay alive until forget_stream() (or the arena's destruction).
/// Satisfies the stream-ordered resource shape: converts to fusex::device_resource_ref.
class arena : public detail::basic_arena<detail::cuda_backend> {
 public:
  /// An arena for the current device.
  explicit arena(const arena_options& options = arena_options()) : arena(detail::current_device(), options) {}
  /// An arena for `device`.
  arena(int device, const arena_options& options)
      : detail::basic_arena<detail::cuda_backend>(detail::cuda_backend(device, options.upstream), options) {}

  /// The device this arena allocates on.
  int device() const noexcept { return backend().device(); }
};

/// Owning handle of a graph-private pool of a fusex::arena (see arena::begin_private_pool).
using private_pool = detail::basic_private_pool<detail::basic_arena<detail::cuda_backend>>;

}  // namespace fusex

// The arena's member functions' definitions, for host compilers only. nvcc's device pass (where
// __CUDA_ARCH__ is defined) analyses the host code of a .cu file but never generates it: the
// declarations above are all it needs, and it is spared the bodies. With
// FUSEX_SEPARATE_COMPILATION (config.hpp) they are compiled once, in the fusex_compiled library,
// which instantiates basic_arena<cuda_backend> explicitly; other translation units see only the
// declarations, and the explicit instantiation declaration keeps them from emitting its vtable.
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/memory/detail/arena_impl.hpp>
#endif
#if defined(FUSEX_SEPARATE_COMPILATION) && !defined(FUSEX_BUILDING_LIBRARY)
extern template class fusex::detail::basic_arena<fusex::detail::cuda_backend>;
extern template class fusex::detail::basic_private_pool<fusex::detail::basic_arena<fusex::detail::cuda_backend>>;
#endif
