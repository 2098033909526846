#pragma once
/// \file
/// The arena's bookkeeping, as plain C++ over a `Backend` that supplies the upstream allocator,
/// events, capture queries and streams. fusex::arena instantiates it over the CUDA runtime
/// (cuda_backend.hpp); the host tests instantiate it over a fake backend and run without a GPU.
///
/// Structure (docs/memory.md tells the story):
///  - chunks from upstream, cut into blocks that tile each chunk (address-ordered neighbours);
///  - a pool owns chunks: the eager pool, and graph-private pools for stream capture;
///  - each pool keeps free blocks in one TLSF index per "home" stream (the stream the block was
///    freed on); a free block also carries dependencies {stream, sequence number}: the points in
///    other streams' work after which it may be reused;
///  - a per-thread cache of recently freed blocks keyed by (size class, stream): the hot path;
///  - an address -> block map, sharded, to find the block of a pointer on deallocation.
///
/// Cross-stream rule: a block freed on stream A is reused on stream B != A only after B waits on
/// an event recorded on A after the free. Events are recorded lazily, at the first hand-off that
/// needs them, and one record covers every free made on A before it; a stream waits on another's
/// event only once per record. Nothing ever polls or synchronises the host.
///
/// Backend requirements:
///   using event_type = <trivially copyable handle>;
///   cudaError_t allocate_chunk(std::uintptr_t& out, std::size_t bytes, cudaStream_t s);
///       // cudaSuccess or the upstream's error (no throw on out-of-memory); memory usable on `s`
///   void free_chunk(std::uintptr_t p, std::size_t bytes, cudaStream_t s);  // ordered after s
///   bool chunks_are_stream_ordered() const;  // a new chunk is usable only after its point on s
///   bool free_is_capture_safe() const;       // free_chunk may run while another stream captures
///   const char* upstream_name() const;
///   std::string error_string(cudaError_t) const;
///   event_type create_event(); void destroy_event(event_type) noexcept;
///   void record_event(event_type, cudaStream_t); void wait_event(cudaStream_t, event_type);
///   cudaStream_t create_service_stream(); void destroy_service_stream(cudaStream_t) noexcept;
///   capture_state capture_status(cudaStream_t);
///   bool is_thread_bound(cudaStream_t) const noexcept;  // per-thread default stream
///   void check_stream(cudaStream_t);  // thorough check: throws for a stream of another device;
///                                     // never called on a capturing stream (CUDA refuses it)
///   int device() const noexcept;
///
/// Files. This header is the class definition: the data members, the nested types (blocks,
/// chunks, pools, stream states, thread caches) and the member functions' declarations, with their
/// contracts. The member functions are defined out of class, one header per concern, all included
/// by arena_impl.hpp: arena_alloc.hpp (allocation and deallocation, fast and slow paths),
/// arena_blocks.hpp (split, carve, coalesce), arena_chunks.hpp (construction, destruction, chunks
/// from upstream, growth, trim, release), arena_thread_cache.hpp, arena_streams.hpp (stream
/// states, events, dependencies), arena_private_pools.hpp (graph capture) and arena_stats.hpp
/// (statistics, validate). memory/arena.hpp includes arena_impl.hpp only where
/// FUSEX_DETAIL_HOST_BODIES (config.hpp) is set, so not in nvcc's device pass (and, under separate
/// compilation, only in the fusex_compiled library): nvcc's device pass analyses the host code of a .cu file, so it needs these
/// declarations, but never generates it, so it skips the bodies.

#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/block_map.hpp>
#include <fusex/memory/detail/free_index.hpp>
#include <fusex/memory/detail/thread_caches.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fusex::detail {

/// Whether a stream is being captured, and the capture's unique id.
struct capture_state {
  bool active = false;
  unsigned long long id = 0;
};

template <class Arena>
class basic_private_pool;

template <class Backend>
class basic_arena : private cache_owner {
 public:
  using backend_type = Backend;
  using event_type = typename Backend::event_type;
  using private_pool = basic_private_pool<basic_arena>;

  explicit basic_arena(Backend backend = Backend(), const arena_options& options = arena_options());

  basic_arena(const basic_arena&) = delete;
  basic_arena& operator=(const basic_arena&) = delete;

  /// Returns every chunk whose blocks are all free to upstream. Live allocations (a bug of the
  /// caller) keep their chunks, which are then leaked with a message on stderr; so are private
  /// pools still alive (destroy them first).
  ~basic_arena();

  // ---------------------------------------------------------------------------------------------
  // The resource interface.

  /// Allocates `bytes` aligned to `alignment` (a power of two up to 4096), ordered on `stream`:
  /// the memory may be used by work on `stream` enqueued after this call. Zero bytes give a null
  /// pointer. Throws fusex::bad_alloc when neither the arena nor upstream can provide the memory,
  /// fusex::invalid_argument for a bad alignment, fusex::error when `stream` is being captured
  /// without a graph-private pool.
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream);

  /// allocate_async with the default alignment (256).
  void* allocate_async(std::size_t bytes, cudaStream_t stream) { return allocate_async(bytes, arena_granule, stream); }

  /// Returns memory from allocate_async, with the same size and alignment, ordered on `stream`:
  /// work on `stream` enqueued after this call may reuse it at once; other streams only after
  /// waiting on an event recorded on `stream` (the arena arranges that). Throws
  /// fusex::invalid_argument for a pointer the arena does not own, a double free, or a size or
  /// alignment that differs from the allocation's; the arena is unchanged then.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream);

  /// deallocate_async with the default alignment (256).
  void deallocate_async(void* p, std::size_t bytes, cudaStream_t stream) {
    deallocate_async(p, bytes, arena_granule, stream);
  }

  /// Marks the live allocation `p` as used by work on `stream` (besides the stream it will be
  /// freed on), as PyTorch's record_stream: its reuse, on any stream, is then also ordered after
  /// `stream`'s work up to the deallocation, through an event. Never synchronises the host.
  void record_stream(void* p, cudaStream_t stream);

  /// True when `p` is the start of a live allocation of this arena.
  bool owns(const void* p);

  // ---------------------------------------------------------------------------------------------
  // Returning memory, statistics.

  /// Returns chunks with no live allocation to upstream until at most `keep_bytes` stay reserved
  /// (thread caches are emptied first). Ordered after the work that last used each chunk (its
  /// free is enqueued on a stream that waits on the events concerned): never synchronises the
  /// host with the async_pool upstream. Returns the bytes released.
  std::size_t trim(std::size_t keep_bytes = 0);

  /// Returns every chunk to upstream. Throws fusex::error if allocations are live or graph-private
  /// pools exist (nothing is released then).
  void release();

  /// Forgets `stream` before the caller destroys it: records one event covering every free made
  /// on it, so the arena never touches the stream again. Call it before cudaStreamDestroy for a
  /// stream that freed memory into this arena (a later stream may reuse the handle value).
  void forget_stream(cudaStream_t stream);

  /// A snapshot of the statistics (exact when no other thread is using the arena).
  arena_stats stats() const;

  const arena_options& options() const noexcept { return opts_; }
  Backend& backend() noexcept { return backend_; }
  const Backend& backend() const noexcept { return backend_; }

  // ---------------------------------------------------------------------------------------------
  // Graph-private pools (stream capture).

  /// Makes a graph-private pool with `options.reserve_bytes` reserved (allocated ordered on
  /// `stream`, which is also where the pool's memory is returned when the handle is destroyed,
  /// unless set_release_stream says otherwise). Must not be called while `stream` is captured.
  private_pool make_private_pool(cudaStream_t stream, const private_pool_options& options = private_pool_options());

  /// Announces that `origin` is about to be captured (call it before cudaStreamBeginCapture):
  /// until end_private_pool, every allocation made on a stream of that capture comes from a new
  /// graph-private pool, and memory freed during the capture is kept by the pool (the graph's
  /// replays may still use it) until the pool is destroyed. Returns the pool's owning handle: the
  /// graph_exec keeps it for as long as it may be replayed.
  private_pool begin_private_pool(cudaStream_t origin, const private_pool_options& options = private_pool_options());

  /// Starts another capture into an existing pool (graphs that share a pool must be replayed in
  /// the order they were captured, on one stream: they then reuse each other's memory).
  void begin_private_pool(cudaStream_t origin, private_pool& handle);

  /// Ends the routing started by begin_private_pool (call it after cudaStreamEndCapture).
  void end_private_pool(private_pool& handle);

  /// Checks the internal invariants; returns an empty string when they hold, else a description.
  /// Expensive (walks every block): for tests.
  std::string validate();

 private:
  friend class basic_private_pool<basic_arena>;

  struct stream_state;
  struct chunk;
  struct pool;
  struct dep {
    stream_state* s;
    std::uint64_t seq;
  };
  enum : std::uint8_t { st_spare, st_free, st_live, st_freeing, st_cached, st_kept, st_moving };

  // Cache-line aligned: threads freeing neighbouring records must not share a line.
  struct alignas(64) block {
    std::uintptr_t addr = 0;
    std::size_t size = 0;
    block* prev_phys = nullptr;
    block* next_phys = nullptr;
    chunk* ch = nullptr;
    std::atomic<std::uint8_t> state{st_spare};
    std::atomic<bool> has_uses{false};
    stream_state* home = nullptr;      // free: the stream whose index holds it (null: neutral)
    free_index<block>* idx = nullptr;  // free: that index
    std::vector<dep> deps;             // free: points other streams must wait for
    std::vector<stream_state*> uses;   // live: streams given to record_stream
    block* next_free = nullptr;
    block* prev_free = nullptr;
    std::uint32_t bin = 0;
    std::size_t requested = 0;  // live: bytes asked for
    std::size_t alignment = 0;  // live: alignment asked for
  };
  using index_type = free_index<block>;

  struct chunk {
    std::uintptr_t addr = 0;
    std::size_t size = 0;
    std::atomic<pool*> owner{nullptr};
    block* first = nullptr;
  };

  struct stream_state {
    std::uint64_t id = 0;
    cudaStream_t handle{};
    std::uint64_t thread = 0;  // the owning thread's serial, for the per-thread default stream
    bool thread_bound = false;
    bool retired = false;
    bool has_event = false;
    event_type event{};
    std::uint64_t counter = 0;   // sequence number of the latest dependency made on this stream
    std::uint64_t recorded = 0;  // `counter` when the event was last recorded: it covers up to here
    std::vector<std::pair<std::uint64_t, std::uint64_t>> waited;  // {stream id, covered seq}
    std::size_t refs = 0;  // dependencies and record_stream marks that name this stream
  };

  struct pool {
    std::uint64_t id = 0;
    bool eager = false;
    std::unordered_map<stream_state*, std::unique_ptr<index_type>> lists;
    std::vector<chunk*> chunks;
    std::vector<block*> kept;  // blocks of other pools freed during this pool's capture
    std::size_t reserved = 0;
    std::size_t in_use = 0;
    std::size_t shortfall = 0;
    bool capturing = false;
    bool id_known = false;
    unsigned long long capture_id = 0;
    cudaStream_t origin{};
    cudaStream_t release_stream{};

    index_type* find_index(stream_state* home) const {
      auto it = lists.find(home);
      return it == lists.end() ? nullptr : it->second.get();
    }
    index_type& index_for(stream_state* home) {
      auto& p = lists[home];
      if (!p) p = std::make_unique<index_type>();
      return *p;
    }
  };

  struct cache_entry {
    block* b;
    cudaStream_t stream;
  };
  static constexpr std::uint32_t cache_ways = 8;
  struct cache_bin {
    std::uint32_t n = 0;
    cache_entry e[cache_ways];
  };
  struct alignas(64) thread_cache {
    spinlock lock;
    std::vector<cache_bin> bins;
    std::size_t bytes = 0;
    std::int64_t pending = 0;  // in-use bytes not yet published to in_use_
    std::uint64_t allocations = 0, deallocations = 0, hits = 0;
    std::vector<cache_entry> evicted;  // owner thread only: entries leaving the cache
  };

  struct stream_key {
    cudaStream_t handle;
    std::uint64_t thread;
    bool operator==(const stream_key& o) const noexcept { return handle == o.handle && thread == o.thread; }
  };
  struct stream_key_hash {
    std::size_t operator()(const stream_key& k) const noexcept {
      return std::hash<const void*>()(static_cast<const void*>(k.handle)) ^ (k.thread * 0x9E3779B97F4A7C15ull);
    }
  };

  struct counters {
    std::uint64_t allocations = 0, deallocations = 0, upstream_allocations = 0, upstream_frees = 0, handoffs = 0,
                  records = 0, waits = 0, failed = 0, pool_adoptions = 0;
  };

  // ---------------------------------------------------------------------------------------------
  // Checks and messages.

  // The test is inline (it runs on every call); the message is built out of line, so the hot
  // paths do not carry the string code's register saves.
  static void check_alignment(std::size_t alignment, std::size_t bytes, const char* what);
  [[noreturn]] static void throw_bad_alignment(std::size_t alignment, std::size_t bytes, const char* what);
  void check_pool_stream(cudaStream_t s, const char* what) const;
  [[noreturn]] static void throw_bad_free(void* p, std::size_t bytes, std::size_t alignment, bool found,
                                          std::uint8_t seen);
  bool must_query_capture() const noexcept;
  bool cacheable(const block* b, cudaStream_t stream) const noexcept;

  // ---------------------------------------------------------------------------------------------
  // Statistics.

  void add_in_use(std::int64_t delta) noexcept;
  // Called after the cache's bytes were updated. A rise is published once it reaches the batch; a
  // fall may wait as long as it is covered by the bytes this thread keeps cached, so that a thread
  // cycling one block larger than the batch (free into its cache, take it back) publishes nothing:
  // two locked instructions a pair otherwise. The shared count then overstates the in-use bytes
  // by at most what each thread keeps cached (stats() adds the unpublished parts back: exact).
  void note_in_use(thread_cache& c, std::int64_t delta) noexcept;
  std::size_t live_allocations_locked() const;

  // ---------------------------------------------------------------------------------------------
  // Thread caches.

  thread_cache* my_cache();
  thread_cache* my_cache_slow();
  block* cache_take(thread_cache& c, std::size_t r, std::size_t alignment, cudaStream_t stream) noexcept;
  void cache_put(thread_cache& c, block* b, cudaStream_t stream);

  // Moves every entry of `c` into `out` (c's lock held).
  void drain(thread_cache& c, std::vector<cache_entry>& out);

  void flush_evicted(thread_cache& c);
  void insert_cache_entries(const std::vector<cache_entry>& entries);

  // Empties every thread cache into the shared lists (mu_ held). True if anything moved.
  bool flush_all_caches_locked();

  // Empties the calling thread's cache into the shared lists (mu_ held). True if anything moved.
  bool flush_own_cache_locked();

  void on_thread_exit(void* cache, std::uint64_t thread) noexcept override;

  // ---------------------------------------------------------------------------------------------
  // Streams, events, dependencies (mu_ held).

  stream_key key_of(cudaStream_t s) const noexcept;
  stream_state* state_for(cudaStream_t s);
  stream_state* service_state();
  static std::uint64_t tick(stream_state* st) noexcept { return ++st->counter; }

  void record_now(stream_state* st);

  // Makes sure the stream's event covers `d`; false when that needs a record the arena may not
  // make now (the stream is being captured, or belongs to another thread).
  bool ensure_recorded(const dep& d);

  // Makes `st` wait for `d` (already covered by a record).
  void wait_for(stream_state* st, const dep& d);

  // Records and waits so that `b` may be used on `st`. False if not possible now.
  bool satisfy(block* b, stream_state* st);

  static bool only_own_deps(const block* b, const stream_state* st) noexcept;
  void clear_deps(block* b) noexcept;
  void clear_uses(block* b) noexcept;
  // Adds `d` to `b`'s dependencies, taking over its reference.
  static void add_dep(block* b, const dep& d);
  static void copy_deps(block* to, const block* from);
  void retire(typename std::unordered_map<stream_key, std::unique_ptr<stream_state>, stream_key_hash>::iterator it);
  void destroy_state_event(stream_state& st) noexcept;

  // Deletes retired streams nothing refers to any more.
  void sweep_retired();

  // ---------------------------------------------------------------------------------------------
  // Blocks (mu_ held).

  block* new_block();
  void recycle(block* b) noexcept;

  // Splits `b` at `at` bytes; returns the new upper part (state spare, same deps).
  block* split(block* b, std::size_t at);

  // `left` absorbs its free upper neighbour `right` (both out of any index).
  void absorb(block* left, block* right);

  // Puts `b` into `p`'s index of `home` with `deps` (references already taken), coalescing with
  // free neighbours of the same index.
  void insert_free(pool& p, block* b, stream_state* home, std::vector<dep> deps);

  // Takes `b` out of its index and cuts the allocation of `r` bytes at `alignment` from it; the
  // rest stays free where it was. Returns the allocated block (no dependencies).
  block* carve(block* b, std::size_t r, std::size_t alignment);

  void make_live(block* b, std::size_t bytes, std::size_t alignment);

  // A block of `p` from st's own list, made usable on `st`. Null if none fits.
  block* take_own(pool& p, stream_state* st, std::size_t r, std::size_t alignment);

  // A block of `p` from another stream's list, handed over to `st` through events. Null if none.
  block* take_other(pool& p, stream_state* st, std::size_t r, std::size_t alignment);

  block* take_from(pool& p, stream_state* st, std::size_t r, std::size_t alignment);

  // Merges neighbouring free blocks of different streams (dependencies united). True if any.
  bool merge_cross_stream(pool& p);

  // ---------------------------------------------------------------------------------------------
  // Chunks (mu_ held).

  // Gets a chunk of `bytes` from upstream for `p`, its block free in the index of `home`, usable
  // on `stream` at once and elsewhere after `stream`'s current work. Returns the upstream error.
  cudaError_t add_chunk(pool& p, std::size_t bytes, cudaStream_t stream, stream_state* home, block** out = nullptr);

  static bool chunk_is_free(const chunk* c) noexcept;

  // Returns a free chunk of the eager pool to upstream, ordered after its dependencies. False if
  // that is not possible now.
  bool release_chunk(chunk* c);

  std::size_t trim_locked(std::size_t keep_bytes);
  std::size_t free_bytes_locked(std::size_t* largest) const;
  [[noreturn]] void throw_out_of_memory(std::size_t bytes, std::size_t alignment, cudaStream_t stream,
                                        std::size_t chunk_bytes, cudaError_t err);

  // Grows the eager pool for a request (mu_ held); returns the allocated block or throws.
  block* grow(stream_state* st, std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream);

  // ---------------------------------------------------------------------------------------------
  // Slow paths.

  void* allocate_slow(std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream,
                      const capture_state* known);

  // Finds the private pool whose capture has id `id` (mu_ held).
  pool* route(unsigned long long id);

  void* allocate_captured(std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream,
                          const capture_state& cap);
  void deallocate_slow(block* b, cudaStream_t stream, const capture_state* known);

  // Records x's event now unless a record already covers its work, x is being captured (a
  // record_stream stream inside a capture keeps the lazy protocol: recorded at a hand-off), or x
  // belongs to another thread. Best effort: an unrecorded dependency is still covered at a
  // hand-off by ensure_recorded. `known` is a stream known not to be captured (mu_ held).
  void record_best_effort(stream_state* x, const stream_state* known) noexcept;

  // ---------------------------------------------------------------------------------------------
  // Private pools (called through basic_private_pool).

  static pool* pool_of(private_pool& h, const char* call);
  void pool_grow_locked(pool& p, std::size_t bytes, cudaStream_t stream);

  // Gives `p` a wholly free chunk of the eager pool of at least `size` bytes (the smallest, at most
  // twice `size`) instead of a new one from upstream: each graph's pool would otherwise take a new
  // chunk, and the chunks of destroyed pools (which return to the eager pool) would pile up
  // unused (the stress test reserved the whole GPU in 64 MiB chunks in two seconds). The chunk's
  // block keeps its dependencies: begin_private_pool orders the capture's origin after them.
  // False when no chunk fits or one's last users cannot be covered by an event now (a stream
  // being captured).
  bool adopt_free_chunk(pool& p, std::size_t size);

  void pool_reserve(void* handle, std::size_t bytes, cudaStream_t stream);
  void pool_set_release_stream(void* handle, cudaStream_t stream);
  void pool_info(void* handle, std::size_t* reserved, std::size_t* in_use, std::size_t* shortfall,
                 bool* capturing) const;

  // The graph is gone: the pool's memory returns to the eager pool, ordered after the release
  // stream's work at this point (the graph may still be running there).
  void pool_destroy(void* handle);

  // ---------------------------------------------------------------------------------------------

  Backend backend_;
  arena_options opts_;
  std::uint64_t id_ = 0;
  std::size_t num_classes_ = 0;
  mutable std::mutex mu_;
  block_map<block> map_;
  std::vector<std::unique_ptr<block>> blocks_;
  std::vector<block*> spare_;
  std::vector<std::unique_ptr<chunk>> chunks_;
  std::unique_ptr<pool> eager_;
  std::vector<std::unique_ptr<pool>> private_;
  std::uint64_t next_pool_id_ = 1;
  std::unordered_map<stream_key, std::unique_ptr<stream_state>, stream_key_hash> streams_;
  std::vector<std::unique_ptr<stream_state>> retired_;
  std::uint64_t next_state_id_ = 1;
  stream_state* service_ = nullptr;
  std::vector<std::unique_ptr<thread_cache>> caches_;
  std::vector<thread_cache*> spare_caches_;
  std::atomic<int> active_captures_{0};
  std::atomic<std::int64_t> in_use_{0};
  std::atomic<std::int64_t> peak_in_use_{0};
  std::size_t reserved_ = 0;
  std::size_t peak_reserved_ = 0;
  counters counters_;
};

/// Owning handle of a graph-private pool of an arena: the memory a captured graph allocated, kept
/// alive (never handed to eager code) for as long as the handle lives. Destroying the handle (or
/// reset()) returns the pool's memory to the arena, ordered after the release stream's work.
/// Move-only. The arena must outlive the handle.
template <class Arena>
class basic_private_pool {
 public:
  basic_private_pool() noexcept = default;
  basic_private_pool(basic_private_pool&& o) noexcept
      : a_(std::exchange(o.a_, nullptr)), p_(std::exchange(o.p_, nullptr)) {}
  basic_private_pool& operator=(basic_private_pool&& o) noexcept {
    if (this != &o) {
      reset_noexcept();
      a_ = std::exchange(o.a_, nullptr);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  basic_private_pool(const basic_private_pool&) = delete;
  basic_private_pool& operator=(const basic_private_pool&) = delete;
  ~basic_private_pool() { reset_noexcept(); }

  /// True unless empty (default-constructed, moved from or reset).
  explicit operator bool() const noexcept { return p_ != nullptr; }
  /// The arena the pool belongs to.
  Arena* arena() const noexcept { return a_; }

  /// Reserves `bytes` more for the pool, allocated ordered on `stream`. Not during a capture.
  void reserve(std::size_t bytes, cudaStream_t stream) { checked().pool_reserve(p_, bytes, stream); }
  /// The stream whose work (for instance the graph's last replay) must finish before the pool's
  /// memory is reused once the handle is destroyed. Initially the stream the pool was made or last
  /// captured on.
  void set_release_stream(cudaStream_t stream) { checked().pool_set_release_stream(p_, stream); }
  /// Bytes reserved by the pool.
  std::size_t bytes_reserved() const { return info().reserved; }
  /// Bytes of the pool's live allocations.
  std::size_t bytes_in_use() const { return info().in_use; }
  /// Bytes the pool lacked in its captures (requests it had to refuse): reserve that much more.
  std::size_t shortfall_bytes() const { return info().shortfall; }
  /// True between begin_private_pool and end_private_pool.
  bool capturing() const { return info().capturing; }

  /// Returns the pool to the arena now (see the class comment).
  void reset();

 private:
  friend Arena;
  basic_private_pool(Arena* a, void* p) noexcept : a_(a), p_(p) {}

  struct pool_info_t {
    std::size_t reserved = 0, in_use = 0, shortfall = 0;
    bool capturing = false;
  };
  Arena& checked() const;
  pool_info_t info() const;
  void reset_noexcept() noexcept;

  Arena* a_ = nullptr;
  void* p_ = nullptr;
};

}  // namespace fusex::detail
