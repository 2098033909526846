#pragma once
/// \file
/// Options and statistics of fusex::arena (and of the host-testable core it is built on).

#include <cstddef>
#include <cstdint>

/// Define FUSEX_MEMORY_DEBUG to 1 (or 0) to force the arena's thorough checks on (or off); by
/// default they follow NDEBUG.
#if !defined(FUSEX_MEMORY_DEBUG)
#if defined(NDEBUG)
#define FUSEX_MEMORY_DEBUG 0
#else
#define FUSEX_MEMORY_DEBUG 1
#endif
#endif

namespace fusex {

/// Where an arena gets its chunks.
enum class arena_upstream {
  /// cudaMallocAsync on the requesting stream, from the device's default memory pool (default).
  /// Chunks are returned with cudaFreeAsync: trimming never synchronises the host.
  async_pool,
  /// cudaMalloc / cudaFree. cudaFree synchronises the device, so trim() and release() do too.
  device_malloc,
};

/// When the arena asks CUDA whether a stream is being captured into a graph.
enum class capture_check {
  /// Only on the slow path (before any CUDA call the arena makes) and, on every call, while a
  /// graph-private pool is announced (arena::begin_private_pool). The hot path then makes no CUDA
  /// call. A capture the arena was not told about is caught at the first slow-path call.
  announced,
  /// On every allocation and deallocation (one cudaStreamGetCaptureInfo each): also catches the
  /// first allocation of an unannounced capture. The default in debug builds.
  always,
};

/// When the arena records the event that orders a freed block's reuse on other streams.
enum class free_event {
  /// On the freeing stream at the free (one cudaEventRecord per deallocation, as RMM does): the
  /// arena never touches the stream again, so it may be destroyed right after the free. The
  /// default: users destroy streams without telling their allocator.
  at_free,
  /// Only when a block is handed to another stream: deallocation makes no CUDA call and the
  /// thread caches serve same-stream reuse, but every stream that freed memory into the arena
  /// must be announced with arena::forget_stream before cudaStreamDestroy.
  lazy,
};

/// Tuning of fusex::arena. The defaults suit a device arena of a training or inference process.
struct arena_options {
  /// Source of chunks.
  arena_upstream upstream = arena_upstream::async_pool;
  /// The first chunk's size.
  std::size_t initial_chunk_bytes = std::size_t{32} << 20;
  /// Chunks are multiples of this (CUDA's own allocation granularity is 2 MiB).
  std::size_t chunk_granularity = std::size_t{2} << 20;
  /// Geometric growth: a new chunk is at least this fraction of what is already reserved, so
  /// reserved memory grows by factors of (1 + growth_ratio) and never overshoots by more.
  double growth_ratio = 0.125;
  /// Chunks are at most this large, unless one request needs more.
  std::size_t max_chunk_bytes = std::size_t{1} << 30;
  /// A limit on the bytes reserved from upstream (0: none). Beyond it allocations fail with
  /// fusex::bad_alloc as if the device were full.
  std::size_t max_reserved_bytes = 0;
  /// Bytes each thread may keep in its cache of recently freed blocks (0 disables the caches).
  std::size_t thread_cache_bytes = std::size_t{256} << 20;
  /// Blocks larger than this bypass the thread caches.
  std::size_t max_cached_block_bytes = std::size_t{128} << 20;
  /// Threads publish their in-use byte count to the shared counter once it rose by this much, or
  /// fell by this much and by more than the thread keeps cached (0: on every call, exact peak).
  /// peak_bytes_in_use is then at most this much per thread below the true peak; with several
  /// threads it may exceed it by at most the bytes the other threads keep cached.
  std::size_t stats_batch_bytes = std::size_t{4} << 20;
  /// When the event covering a free is recorded (see free_event).
  free_event free_events = free_event::at_free;
  /// When capture status is queried (see capture_check).
  capture_check capture = FUSEX_MEMORY_DEBUG ? capture_check::always : capture_check::announced;
  /// Thorough checks on every call (the stream's device on allocate and deallocate). Cheap checks
  /// (unknown pointer, double free, wrong size or alignment) are always made.
  bool thorough_checks = FUSEX_MEMORY_DEBUG != 0;
};

/// Options of a graph-private pool.
struct private_pool_options {
  /// Bytes reserved when the pool is made. A pool never grows while a stream is being captured
  /// (that would need cudaMalloc); it may grow between captures with private_pool::reserve.
  std::size_t reserve_bytes = std::size_t{64} << 20;
};

/// A snapshot of an arena's state. Byte counts of allocations are the requested sizes.
struct arena_stats {
  std::size_t bytes_in_use = 0;            ///< Bytes of live allocations (as requested).
  std::size_t peak_bytes_in_use = 0;       ///< Highest bytes_in_use seen (see stats_batch_bytes).
  std::size_t allocations_in_use = 0;      ///< Number of live allocations.
  std::size_t bytes_reserved = 0;          ///< Bytes held from upstream, in all chunks.
  std::size_t peak_bytes_reserved = 0;     ///< Highest bytes_reserved.
  std::size_t bytes_free = 0;              ///< Bytes in the shared free lists.
  std::size_t bytes_cached = 0;            ///< Bytes in threads' caches of freed blocks.
  std::size_t largest_free_block = 0;      ///< Largest block of the shared free lists.
  std::size_t chunks = 0;                  ///< Chunks held from upstream.
  std::size_t private_pools = 0;           ///< Live graph-private pools.
  std::size_t private_pool_bytes = 0;      ///< Bytes reserved by graph-private pools.
  std::uint64_t allocations = 0;           ///< Allocations made (non-zero sizes).
  std::uint64_t deallocations = 0;         ///< Deallocations made.
  std::uint64_t cache_hits = 0;            ///< Allocations served by a thread cache.
  std::uint64_t upstream_allocations = 0;  ///< Chunks obtained from upstream.
  std::uint64_t upstream_frees = 0;        ///< Chunks returned to upstream.
  std::uint64_t stream_handoffs = 0;       ///< Blocks handed from one stream to another.
  /// Free chunks of the arena given to a new graph-private pool instead of new upstream chunks.
  std::uint64_t pool_chunk_reuses = 0;
  std::uint64_t event_records = 0;       ///< cudaEventRecord calls made.
  std::uint64_t event_waits = 0;         ///< cudaStreamWaitEvent calls made.
  std::uint64_t failed_allocations = 0;  ///< Allocations that threw fusex::bad_alloc.

  /// The fraction of allocations served from memory already held (1 - upstream/allocations).
  double reuse_rate() const noexcept {
    if (allocations == 0) return 0.0;
    const double up = static_cast<double>(upstream_allocations);
    const double r = 1.0 - up / static_cast<double>(allocations);
    return r < 0.0 ? 0.0 : r;
  }
};

}  // namespace fusex
