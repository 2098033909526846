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

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/block_map.hpp>
#include <fusex/memory/detail/free_index.hpp>
#include <fusex/memory/detail/thread_caches.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
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

  explicit basic_arena(Backend backend = Backend(), const arena_options& options = arena_options())
      : backend_(std::move(backend)), opts_(options) {
    if (opts_.chunk_granularity == 0 || opts_.chunk_granularity % arena_granule != 0) {
      throw invalid_argument("fusex::arena: chunk_granularity " + std::to_string(opts_.chunk_granularity) +
                             " is not a non-zero multiple of " + std::to_string(arena_granule));
    }
    if (!(opts_.growth_ratio >= 0.0)) {
      throw invalid_argument("fusex::arena: growth_ratio must be >= 0, got " + std::to_string(opts_.growth_ratio));
    }
    if (opts_.max_cached_block_bytes > opts_.thread_cache_bytes)
      opts_.max_cached_block_bytes = opts_.thread_cache_bytes;
    num_classes_ = opts_.max_cached_block_bytes >= arena_granule ? size_class_of(opts_.max_cached_block_bytes) + 1 : 0;
    eager_ = std::make_unique<pool>();
    eager_->eager = true;
    cache_registry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    id_ = r.next_id.fetch_add(1, std::memory_order_relaxed);
    r.alive.emplace(id_, static_cast<cache_owner*>(this));
  }

  basic_arena(const basic_arena&) = delete;
  basic_arena& operator=(const basic_arena&) = delete;

  /// Returns every chunk whose blocks are all free to upstream. Live allocations (a bug of the
  /// caller) keep their chunks, which are then leaked with a message on stderr; so are private
  /// pools still alive (destroy them first).
  ~basic_arena() {
    {
      cache_registry& r = arena_registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      r.alive.erase(id_);
    }
    try {
      std::lock_guard<std::mutex> lock(mu_);
      flush_all_caches_locked();
      const std::size_t live = live_allocations_locked();
      if (live != 0) {
        std::fprintf(stderr, "fusex::arena: destroyed with %zu live allocation(s); their chunks are leaked\n", live);
      }
      if (!private_.empty()) {
        std::fprintf(stderr, "fusex::arena: destroyed with %zu graph-private pool(s) alive; their memory is leaked\n",
                     private_.size());
      }
      merge_cross_stream(*eager_);
      std::vector<chunk*> cs = eager_->chunks;
      for (chunk* c : cs)
        if (chunk_is_free(c)) release_chunk(c);
    } catch (const std::exception& e) {
      // Typically the CUDA runtime is already shutting down (a static arena): nothing to return.
      (void)e;
    }
    for (auto& kv : streams_) destroy_state_event(*kv.second);
    for (auto& s : retired_) destroy_state_event(*s);
    if (service_ != nullptr) backend_.destroy_service_stream(service_->handle);
  }

  // ---------------------------------------------------------------------------------------------
  // The resource interface.

  /// Allocates `bytes` aligned to `alignment` (a power of two up to 4096), ordered on `stream`:
  /// the memory may be used by work on `stream` enqueued after this call. Zero bytes give a null
  /// pointer. Throws fusex::bad_alloc when neither the arena nor upstream can provide the memory,
  /// fusex::invalid_argument for a bad alignment, fusex::error when `stream` is being captured
  /// without a graph-private pool.
  void* allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
    check_alignment(alignment, bytes, "allocate_async");
    if (bytes == 0) return nullptr;
    if (bytes > arena_max_request) {
      throw bad_alloc("fusex::arena: cannot allocate " + format_bytes(bytes) + ": larger than any device", bytes,
                      cudaErrorMemoryAllocation);
    }
    const std::size_t r = round_up(bytes, arena_granule);
    capture_state cap;
    const bool known = must_query_capture() || opts_.thorough_checks;
    if (known) cap = backend_.capture_status(stream);
    // CUDA refuses queries about a capturing stream (cudaStreamGetDevice returns
    // cudaErrorStreamCaptureUnsupported), so the device check runs outside captures only.
    if (opts_.thorough_checks && !cap.active) backend_.check_stream(stream);
    if (!cap.active && r <= opts_.max_cached_block_bytes && !backend_.is_thread_bound(stream)) {
      thread_cache* c = my_cache();
      block* b = nullptr;
      {
        spin_guard g(c->lock);
        b = cache_take(*c, r, alignment, stream);
        if (b != nullptr) {
          ++c->allocations;
          ++c->hits;
          note_in_use(*c, static_cast<std::int64_t>(bytes));
        }
      }
      if (b != nullptr) {
        b->requested = bytes;
        b->alignment = alignment;
        b->state.store(st_live, std::memory_order_release);
        return reinterpret_cast<void*>(b->addr);
      }
    }
    return allocate_slow(bytes, r, alignment, stream, known ? &cap : nullptr);
  }

  /// allocate_async with the default alignment (256).
  void* allocate_async(std::size_t bytes, cudaStream_t stream) { return allocate_async(bytes, arena_granule, stream); }

  /// Returns memory from allocate_async, with the same size and alignment, ordered on `stream`:
  /// work on `stream` enqueued after this call may reuse it at once; other streams only after
  /// waiting on an event recorded on `stream` (the arena arranges that). Throws
  /// fusex::invalid_argument for a pointer the arena does not own, a double free, or a size or
  /// alignment that differs from the allocation's; the arena is unchanged then.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
    if (p == nullptr) {
      if (bytes != 0) {
        throw invalid_argument("fusex::arena: deallocate_async(nullptr, " + std::to_string(bytes) +
                               " bytes): a null pointer only comes from a zero-byte allocation");
      }
      return;
    }
    check_alignment(alignment, bytes, "deallocate_async");
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    bool found = false;
    std::uint8_t seen = st_spare;
    // Every transition out of st_live happens here, under the shard's lock: a plain load and
    // store suffice (no locked instruction) to let exactly one of two racing frees win.
    block* b = map_.with(a, [&](block* x) -> block* {
      if (x == nullptr) return nullptr;
      found = true;
      seen = x->state.load(std::memory_order_acquire);
      if (seen != st_live) return nullptr;
      x->state.store(st_freeing, std::memory_order_relaxed);
      return x;
    });
    if (b == nullptr) throw_bad_free(p, bytes, alignment, found, seen);
    if (b->requested != bytes || b->alignment != alignment) {
      const std::size_t rb = b->requested, ra = b->alignment;
      b->state.store(st_live, std::memory_order_release);
      throw invalid_argument("fusex::arena: deallocate_async(" + format_pointer(p) + ", " + std::to_string(bytes) +
                             " bytes, alignment " + std::to_string(alignment) + "): it was allocated with " +
                             std::to_string(rb) + " bytes and alignment " + std::to_string(ra) +
                             "; pass the size and alignment given to allocate_async");
    }
    capture_state cap;
    const bool known = must_query_capture() || opts_.thorough_checks;
    try {
      if (known) cap = backend_.capture_status(stream);
      if (opts_.thorough_checks && !cap.active) backend_.check_stream(stream);  // as in allocate_async
    } catch (...) {
      b->state.store(st_live, std::memory_order_release);
      throw;
    }
    // With events recorded at the free, the free takes the shared path (the record needs the
    // stream's state, under the lock); the thread caches then only hold nothing.
    if (!cap.active && opts_.free_events == free_event::lazy && cacheable(b, stream)) {
      thread_cache* c = my_cache();
      {
        spin_guard g(c->lock);
        cache_put(*c, b, stream);
        ++c->deallocations;
        note_in_use(*c, -static_cast<std::int64_t>(bytes));
      }
      if (!c->evicted.empty()) flush_evicted(*c);
      return;
    }
    deallocate_slow(b, stream, known ? &cap : nullptr);
  }

  /// deallocate_async with the default alignment (256).
  void deallocate_async(void* p, std::size_t bytes, cudaStream_t stream) {
    deallocate_async(p, bytes, arena_granule, stream);
  }

  /// Marks the live allocation `p` as used by work on `stream` (besides the stream it will be
  /// freed on), as PyTorch's record_stream: its reuse, on any stream, is then also ordered after
  /// `stream`'s work up to the deallocation, through an event. Never synchronises the host.
  void record_stream(void* p, cudaStream_t stream) {
    if (p == nullptr) return;
    if (backend_.is_thread_bound(stream)) {
      throw invalid_argument(
          "fusex::arena: record_stream with the per-thread default stream: its work cannot be "
          "ordered from another thread; use an explicit stream");
    }
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    block* b = map_.with(a, [](block* x) -> block* {
      return x != nullptr && x->state.load(std::memory_order_acquire) == st_live ? x : nullptr;
    });
    if (b == nullptr) {
      throw invalid_argument("fusex::arena: record_stream(" + format_pointer(p) +
                             "): not the start of a live allocation of this arena");
    }
    std::lock_guard<std::mutex> lock(mu_);
    stream_state* st = state_for(stream);
    if (std::find(b->uses.begin(), b->uses.end(), st) == b->uses.end()) {
      b->uses.push_back(st);
      ++st->refs;
    }
    b->has_uses.store(true, std::memory_order_release);
  }

  /// True when `p` is the start of a live allocation of this arena.
  bool owns(const void* p) {
    if (p == nullptr) return false;
    return map_.with(reinterpret_cast<std::uintptr_t>(p),
                     [](block* x) { return x != nullptr && x->state.load(std::memory_order_acquire) == st_live; });
  }

  // ---------------------------------------------------------------------------------------------
  // Returning memory, statistics.

  /// Returns chunks with no live allocation to upstream until at most `keep_bytes` stay reserved
  /// (thread caches are emptied first). Ordered after the work that last used each chunk (its
  /// free is enqueued on a stream that waits on the events concerned): never synchronises the
  /// host with the async_pool upstream. Returns the bytes released.
  std::size_t trim(std::size_t keep_bytes = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    flush_all_caches_locked();
    const std::size_t r = trim_locked(keep_bytes);
    sweep_retired();
    return r;
  }

  /// Returns every chunk to upstream. Throws fusex::error if allocations are live or graph-private
  /// pools exist (nothing is released then).
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    flush_all_caches_locked();
    const std::size_t live = live_allocations_locked();
    if (live != 0 || !private_.empty()) {
      throw error("fusex::arena: release() with " + std::to_string(live) + " live allocation(s) and " +
                  std::to_string(private_.size()) +
                  " graph-private pool(s); free them first (trim() returns "
                  "what is unused)");
    }
    trim_locked(0);
    sweep_retired();
    if (!eager_->chunks.empty()) {
      throw error("fusex::arena: release(): " + std::to_string(eager_->chunks.size()) +
                  " chunk(s) could not be returned now (a stream that used them is being captured)");
    }
  }

  /// Forgets `stream` before the caller destroys it: records one event covering every free made
  /// on it, so the arena never touches the stream again. Call it before cudaStreamDestroy for a
  /// stream that freed memory into this arena (a later stream may reuse the handle value).
  void forget_stream(cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    flush_all_caches_locked();
    auto it = streams_.find(key_of(stream));
    if (it == streams_.end()) return;
    stream_state* st = it->second.get();
    if (st->counter > st->recorded) {
      if (backend_.capture_status(stream).active) {
        throw error("fusex::arena: forget_stream(" + format_pointer(stream) +
                    ") while the stream is being captured; end the capture first");
      }
      record_now(st);
    }
    retire(it);
    sweep_retired();
  }

  /// A snapshot of the statistics (exact when no other thread is using the arena).
  arena_stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    arena_stats s;
    std::int64_t pending = 0;
    for (const auto& c : caches_) {
      spin_guard g(c->lock);
      s.allocations += c->allocations;
      s.deallocations += c->deallocations;
      s.cache_hits += c->hits;
      s.bytes_cached += c->bytes;
      pending += c->pending;
    }
    s.allocations += counters_.allocations;
    s.deallocations += counters_.deallocations;
    const std::int64_t in_use = in_use_.load(std::memory_order_relaxed) + pending;
    s.bytes_in_use = in_use > 0 ? static_cast<std::size_t>(in_use) : 0;
    const std::int64_t peak = peak_in_use_.load(std::memory_order_relaxed);
    s.peak_bytes_in_use = std::max(s.bytes_in_use, peak > 0 ? static_cast<std::size_t>(peak) : std::size_t{0});
    s.allocations_in_use =
        s.allocations > s.deallocations ? static_cast<std::size_t>(s.allocations - s.deallocations) : 0;
    s.bytes_reserved = reserved_;
    s.peak_bytes_reserved = peak_reserved_;
    s.chunks = chunks_.size();
    s.private_pools = private_.size();
    for (const auto& p : private_) s.private_pool_bytes += p->reserved;
    auto add_pool = [&](const pool& p) {
      for (const auto& kv : p.lists) {
        s.bytes_free += kv.second->bytes();
        s.largest_free_block = std::max(s.largest_free_block, kv.second->largest());
      }
    };
    add_pool(*eager_);
    for (const auto& p : private_) add_pool(*p);
    s.upstream_allocations = counters_.upstream_allocations;
    s.upstream_frees = counters_.upstream_frees;
    s.stream_handoffs = counters_.handoffs;
    s.pool_chunk_reuses = counters_.pool_adoptions;
    s.event_records = counters_.records;
    s.event_waits = counters_.waits;
    s.failed_allocations = counters_.failed;
    return s;
  }

  const arena_options& options() const noexcept { return opts_; }
  Backend& backend() noexcept { return backend_; }
  const Backend& backend() const noexcept { return backend_; }

  // ---------------------------------------------------------------------------------------------
  // Graph-private pools (stream capture).

  /// Makes a graph-private pool with `options.reserve_bytes` reserved (allocated ordered on
  /// `stream`, which is also where the pool's memory is returned when the handle is destroyed,
  /// unless set_release_stream says otherwise). Must not be called while `stream` is captured.
  private_pool make_private_pool(cudaStream_t stream, const private_pool_options& options = private_pool_options()) {
    check_pool_stream(stream, "make_private_pool");
    std::lock_guard<std::mutex> lock(mu_);
    if (backend_.capture_status(stream).active) {
      throw error(
          "fusex::arena: make_private_pool on a stream that is being captured; make the pool before "
          "cudaStreamBeginCapture");
    }
    auto owned = std::make_unique<pool>();
    pool* p = owned.get();
    p->id = next_pool_id_++;
    p->release_stream = stream;
    private_.push_back(std::move(owned));
    if (options.reserve_bytes != 0) {
      try {
        pool_grow_locked(*p, options.reserve_bytes, stream);
      } catch (...) {
        private_.pop_back();
        throw;
      }
    }
    return private_pool(this, p);
  }

  /// Announces that `origin` is about to be captured (call it before cudaStreamBeginCapture):
  /// until end_private_pool, every allocation made on a stream of that capture comes from a new
  /// graph-private pool, and memory freed during the capture is kept by the pool (the graph's
  /// replays may still use it) until the pool is destroyed. Returns the pool's owning handle: the
  /// graph_exec keeps it for as long as it may be replayed.
  private_pool begin_private_pool(cudaStream_t origin, const private_pool_options& options = private_pool_options()) {
    check_pool_stream(origin, "begin_private_pool");
    private_pool p = make_private_pool(origin, options);
    begin_private_pool(origin, p);
    return p;
  }

  /// Starts another capture into an existing pool (graphs that share a pool must be replayed in
  /// the order they were captured, on one stream: they then reuse each other's memory).
  void begin_private_pool(cudaStream_t origin, private_pool& handle) {
    check_pool_stream(origin, "begin_private_pool");
    pool* p = pool_of(handle, "begin_private_pool");
    std::lock_guard<std::mutex> lock(mu_);
    if (p->capturing) throw error("fusex::arena: begin_private_pool: the pool is already capturing");
    if (backend_.capture_status(origin).active) {
      throw error(
          "fusex::arena: begin_private_pool on a stream that is already being captured; call it before "
          "cudaStreamBeginCapture");
    }
    // Pre-capture frees on the origin stay usable by other streams during the capture without
    // recording on the captured stream: cover them with one record now.
    flush_all_caches_locked();
    stream_state* so = state_for(origin);
    if (so->counter > so->recorded) record_now(so);
    // Every free block of the pool becomes usable by any stream of the new capture: order the
    // origin after the eager work that last used them, then drop their dependencies.
    std::vector<block*> all;
    for (auto& kv : p->lists) kv.second->for_each([&](block* b) { all.push_back(b); });
    for (block* b : all)
      for (const dep& d : b->deps)
        if (!ensure_recorded(d)) {
          throw error(
              "fusex::arena: begin_private_pool: memory of the pool was last used on a stream that is "
              "being captured now");
        }
    for (block* b : all)
      for (const dep& d : b->deps) wait_for(so, d);
    for (block* b : all) {
      b->idx->remove(b);
      b->state.store(st_moving, std::memory_order_relaxed);
      clear_deps(b);
    }
    // (A block absorbed by a neighbour inserted before it is recycled: no longer st_moving.)
    for (block* b : all)
      if (b->state.load(std::memory_order_relaxed) == st_moving) insert_free(*p, b, nullptr, {});
    p->capturing = true;
    p->origin = origin;
    p->id_known = false;
    p->release_stream = origin;
    active_captures_.fetch_add(1, std::memory_order_acq_rel);
  }

  /// Ends the routing started by begin_private_pool (call it after cudaStreamEndCapture).
  void end_private_pool(private_pool& handle) {
    pool* p = pool_of(handle, "end_private_pool");
    std::lock_guard<std::mutex> lock(mu_);
    if (!p->capturing) throw error("fusex::arena: end_private_pool: the pool is not capturing");
    p->capturing = false;
    active_captures_.fetch_sub(1, std::memory_order_acq_rel);
  }

  /// Checks the internal invariants; returns an empty string when they hold, else a description.
  /// Expensive (walks every block): for tests.
  std::string validate() {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t reserved = 0;
    for (const auto& cp : chunks_) {
      const chunk* c = cp.get();
      reserved += c->size;
      std::uintptr_t at = c->addr;
      const block* prev = nullptr;
      for (const block* b = c->first; b != nullptr; b = b->next_phys) {
        if (b->addr != at) return "block at " + std::to_string(b->addr) + " does not follow its neighbour";
        if (b->prev_phys != prev) return "broken prev link";
        if (b->ch != c) return "block with wrong chunk";
        if (b->size == 0 || b->size % arena_granule != 0) return "block size not a granule multiple";
        if (map_.find(b->addr) != b) return "block missing from the map";
        const std::uint8_t s = b->state.load(std::memory_order_relaxed);
        if (s == st_free) {
          if (b->idx == nullptr) return "free block outside any index";
          if (prev != nullptr && prev->state.load(std::memory_order_relaxed) == st_free && prev->home == b->home &&
              prev->idx == b->idx)
            return "two neighbouring free blocks of one stream were not coalesced";
        } else if (s == st_spare || s == st_freeing || s == st_moving) {
          return "block in a transient state";
        }
        at += b->size;
        prev = b;
      }
      if (at != c->addr + c->size) return "blocks do not cover their chunk";
    }
    if (reserved != reserved_) return "reserved bytes do not add up";
    auto check_pool = [&](const pool& p) -> std::string {
      for (const auto& kv : p.lists) {
        std::size_t bytes = 0, n = 0;
        std::string err;
        kv.second->for_each([&](block* b) {
          bytes += b->size;
          ++n;
          if (b->state.load(std::memory_order_relaxed) != st_free) err = "non-free block in an index";
          if (b->home != kv.first) err = "block in the index of another stream";
          if (b->ch->owner.load(std::memory_order_relaxed) != &p) err = "block in the index of another pool";
        });
        if (!err.empty()) return err;
        if (bytes != kv.second->bytes() || n != kv.second->count()) return "index totals are wrong";
      }
      return {};
    };
    std::string e = check_pool(*eager_);
    for (const auto& p : private_)
      if (e.empty()) e = check_pool(*p);
    return e;
  }

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
  static void check_alignment(std::size_t alignment, std::size_t bytes, const char* what) {
    if (!is_pow2(alignment) || alignment > arena_max_alignment) throw_bad_alignment(alignment, bytes, what);
  }
  [[noreturn]] static void throw_bad_alignment(std::size_t alignment, std::size_t bytes, const char* what) {
    throw invalid_argument(std::string("fusex::arena: ") + what + " of " + std::to_string(bytes) +
                           " bytes with alignment " + std::to_string(alignment) +
                           ": the alignment must be a power of two up to " + std::to_string(arena_max_alignment));
  }

  void check_pool_stream(cudaStream_t s, const char* what) const {
    if (s == nullptr || backend_.is_thread_bound(s) || s == cudaStreamLegacy) {
      throw invalid_argument(std::string("fusex::arena: ") + what +
                             " needs an explicit stream (the default streams cannot be captured by fusex)");
    }
  }

  [[noreturn]] static void throw_bad_free(void* p, std::size_t bytes, std::size_t alignment, bool found,
                                          std::uint8_t seen) {
    const std::string call = "fusex::arena: deallocate_async(" + format_pointer(p) + ", " + std::to_string(bytes) +
                             " bytes, alignment " + std::to_string(alignment) + "): ";
    if (!found) {
      throw invalid_argument(call +
                             "the pointer was not allocated by this arena (or is not the start of an "
                             "allocation)");
    }
    if (seen == st_freeing) throw invalid_argument(call + "the pointer is being freed by another thread (double free)");
    throw invalid_argument(call + "double free: the memory was already deallocated");
  }

  bool must_query_capture() const noexcept {
    return opts_.capture == capture_check::always || active_captures_.load(std::memory_order_acquire) != 0;
  }

  bool cacheable(const block* b, cudaStream_t stream) const noexcept {
    return b->size <= opts_.max_cached_block_bytes && b->ch->owner.load(std::memory_order_acquire) == eager_.get() &&
           !b->has_uses.load(std::memory_order_acquire) && !backend_.is_thread_bound(stream);
  }

  // ---------------------------------------------------------------------------------------------
  // Statistics.

  void add_in_use(std::int64_t delta) noexcept {
    const std::int64_t now = in_use_.fetch_add(delta, std::memory_order_relaxed) + delta;
    if (delta > 0) {
      std::int64_t peak = peak_in_use_.load(std::memory_order_relaxed);
      while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
    }
  }
  // Called after the cache's bytes were updated. A rise is published once it reaches the batch; a
  // fall may wait as long as it is covered by the bytes this thread keeps cached, so that a thread
  // cycling one block larger than the batch (free into its cache, take it back) publishes nothing:
  // two locked instructions a pair otherwise. The shared count then overstates the in-use bytes
  // by at most what each thread keeps cached (stats() adds the unpublished parts back: exact).
  void note_in_use(thread_cache& c, std::int64_t delta) noexcept {
    c.pending += delta;
    const auto batch = static_cast<std::int64_t>(opts_.stats_batch_bytes);
    if (c.pending >= batch ||
        (c.pending <= -batch && (batch == 0 || -c.pending > static_cast<std::int64_t>(c.bytes)))) {
      add_in_use(c.pending);
      c.pending = 0;
    }
  }
  std::size_t live_allocations_locked() const {
    std::uint64_t a = counters_.allocations, d = counters_.deallocations;
    for (const auto& c : caches_) {
      spin_guard g(c->lock);
      a += c->allocations;
      d += c->deallocations;
    }
    return static_cast<std::size_t>(a - d);
  }

  // ---------------------------------------------------------------------------------------------
  // Thread caches.

  thread_cache* my_cache() {
    // The arena this thread used last: a trivially initialised thread_local, so no TLS guard; the
    // lookup in the table is out of line (its register saves would otherwise tax every call).
    const tls_last_cache& last = last_thread_cache;
    if (last.owner == id_) return static_cast<thread_cache*>(last.cache);
    return my_cache_slow();
  }
  thread_cache* my_cache_slow() {
    tls_last_cache& last = last_thread_cache;
    tls_cache_table& t = thread_cache_table();
    if (void* c = t.find(id_)) {
      last = tls_last_cache{id_, c};
      return static_cast<thread_cache*>(c);
    }
    thread_cache* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!spare_caches_.empty()) {
        c = spare_caches_.back();
        spare_caches_.pop_back();
      } else {
        caches_.push_back(std::make_unique<thread_cache>());
        c = caches_.back().get();
        c->bins.resize(num_classes_);
      }
    }
    t.add(id_, c);
    last = tls_last_cache{id_, c};
    return c;
  }

  block* cache_take(thread_cache& c, std::size_t r, std::size_t alignment, cudaStream_t stream) noexcept {
    const std::size_t cls = size_class_of(r);
    if (cls >= c.bins.size()) return nullptr;
    cache_bin& bin = c.bins[cls];
    for (std::uint32_t i = bin.n; i-- > 0;) {
      block* b = bin.e[i].b;
      if (bin.e[i].stream == stream && b->size >= r && (b->addr & (alignment - 1)) == 0) {
        for (std::uint32_t j = i; j + 1 < bin.n; ++j) bin.e[j] = bin.e[j + 1];
        --bin.n;
        c.bytes -= b->size;
        return b;
      }
    }
    return nullptr;
  }

  void cache_put(thread_cache& c, block* b, cudaStream_t stream) {
    cache_bin& bin = c.bins[size_class_of(b->size)];
    if (bin.n == cache_ways) {
      // Full: the older half leaves (to the shared lists).
      constexpr std::uint32_t half = cache_ways / 2;
      for (std::uint32_t i = 0; i < half; ++i) {
        c.evicted.push_back(bin.e[i]);
        c.bytes -= bin.e[i].b->size;
      }
      for (std::uint32_t i = half; i < cache_ways; ++i) bin.e[i - half] = bin.e[i];
      bin.n -= half;
    }
    bin.e[bin.n++] = cache_entry{b, stream};
    c.bytes += b->size;
    b->state.store(st_cached, std::memory_order_release);
    // Over the byte budget: the oldest entries of the largest classes leave.
    for (std::size_t k = c.bins.size(); c.bytes > opts_.thread_cache_bytes && k-- > 0;) {
      cache_bin& x = c.bins[k];
      while (x.n != 0 && c.bytes > opts_.thread_cache_bytes) {
        c.evicted.push_back(x.e[0]);
        c.bytes -= x.e[0].b->size;
        for (std::uint32_t j = 1; j < x.n; ++j) x.e[j - 1] = x.e[j];
        --x.n;
      }
    }
  }

  // Moves every entry of `c` into `out` (c's lock held).
  void drain(thread_cache& c, std::vector<cache_entry>& out) {
    for (cache_bin& bin : c.bins) {
      for (std::uint32_t i = 0; i < bin.n; ++i) out.push_back(bin.e[i]);
      bin.n = 0;
    }
    c.bytes = 0;
    if (c.pending != 0) {
      add_in_use(c.pending);
      c.pending = 0;
    }
  }

  void flush_evicted(thread_cache& c) {
    std::lock_guard<std::mutex> lock(mu_);
    insert_cache_entries(c.evicted);
    c.evicted.clear();
  }

  void insert_cache_entries(const std::vector<cache_entry>& entries) {
    for (const cache_entry& e : entries) {
      stream_state* st = state_for(e.stream);
      std::vector<dep> deps{dep{st, tick(st)}};
      ++st->refs;
      insert_free(*eager_, e.b, st, std::move(deps));
    }
  }

  // Empties every thread cache into the shared lists (mu_ held). True if anything moved.
  bool flush_all_caches_locked() {
    std::vector<cache_entry> all;
    for (const auto& c : caches_) {
      spin_guard g(c->lock);
      drain(*c, all);
    }
    insert_cache_entries(all);
    return !all.empty();
  }

  // Empties the calling thread's cache into the shared lists (mu_ held). True if anything moved.
  bool flush_own_cache_locked() {
    void* c = thread_cache_table().find(id_);
    if (c == nullptr) return false;
    std::vector<cache_entry> all;
    {
      spin_guard g(static_cast<thread_cache*>(c)->lock);
      drain(*static_cast<thread_cache*>(c), all);
    }
    insert_cache_entries(all);
    return !all.empty();
  }

  void on_thread_exit(void* cache, std::uint64_t thread) noexcept override {
    try {
      auto* c = static_cast<thread_cache*>(cache);
      std::vector<cache_entry> all;
      {
        spin_guard g(c->lock);
        drain(*c, all);
      }
      std::lock_guard<std::mutex> lock(mu_);
      insert_cache_entries(all);
      spare_caches_.push_back(c);
      // The thread's per-thread default stream dies with it; every free on it was recorded.
      for (auto it = streams_.begin(); it != streams_.end();) {
        auto next = std::next(it);
        if (it->second->thread_bound && it->second->thread == thread) retire(it);
        it = next;
      }
      sweep_retired();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fusex::arena: returning an exiting thread's cache failed: %s\n", e.what());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Streams, events, dependencies (mu_ held).

  stream_key key_of(cudaStream_t s) const noexcept {
    return stream_key{s, backend_.is_thread_bound(s) ? thread_serial() : 0};
  }

  stream_state* state_for(cudaStream_t s) {
    const stream_key k = key_of(s);
    auto it = streams_.find(k);
    if (it != streams_.end()) return it->second.get();
    auto st = std::make_unique<stream_state>();
    st->id = next_state_id_++;
    st->handle = s;
    st->thread = k.thread;
    st->thread_bound = k.thread != 0;
    stream_state* raw = st.get();
    streams_.emplace(k, std::move(st));
    return raw;
  }

  stream_state* service_state() {
    if (service_ == nullptr) {
      const cudaStream_t s = backend_.create_service_stream();
      service_ = state_for(s);
    }
    return service_;
  }

  static std::uint64_t tick(stream_state* st) noexcept { return ++st->counter; }

  void record_now(stream_state* st) {
    if (!st->has_event) {
      st->event = backend_.create_event();
      st->has_event = true;
    }
    backend_.record_event(st->event, st->handle);
    st->recorded = st->counter;
    ++counters_.records;
  }

  // Makes sure the stream's event covers `d`; false when that needs a record the arena may not
  // make now (the stream is being captured, or belongs to another thread).
  bool ensure_recorded(const dep& d) {
    stream_state* st = d.s;
    if (d.seq <= st->recorded || st->retired) return true;
    if (st->thread_bound) {
      if (st->thread != thread_serial()) return false;
      record_now(st);
      return true;
    }
    if (backend_.capture_status(st->handle).active) return false;
    record_now(st);
    return true;
  }

  // Makes `st` wait for `d` (already covered by a record).
  void wait_for(stream_state* st, const dep& d) {
    if (d.s == st) return;
    for (auto& w : st->waited) {
      if (w.first == d.s->id) {
        if (w.second >= d.seq) return;
        backend_.wait_event(st->handle, d.s->event);
        w.second = d.s->recorded;
        ++counters_.waits;
        return;
      }
    }
    backend_.wait_event(st->handle, d.s->event);
    st->waited.emplace_back(d.s->id, d.s->recorded);
    ++counters_.waits;
  }

  // Records and waits so that `b` may be used on `st`. False if not possible now.
  bool satisfy(block* b, stream_state* st) {
    for (const dep& d : b->deps)
      if (d.s != st && !ensure_recorded(d)) return false;
    for (const dep& d : b->deps) wait_for(st, d);
    return true;
  }

  static bool only_own_deps(const block* b, const stream_state* st) noexcept {
    for (const dep& d : b->deps)
      if (d.s != st) return false;
    return true;
  }

  void clear_deps(block* b) noexcept {
    for (const dep& d : b->deps) --d.s->refs;
    b->deps.clear();
  }
  void clear_uses(block* b) noexcept {
    for (stream_state* u : b->uses) --u->refs;
    b->uses.clear();
    b->has_uses.store(false, std::memory_order_release);
  }
  // Adds `d` to `b`'s dependencies, taking over its reference.
  static void add_dep(block* b, const dep& d) {
    for (dep& x : b->deps) {
      if (x.s == d.s) {
        x.seq = std::max(x.seq, d.seq);
        --d.s->refs;
        return;
      }
    }
    b->deps.push_back(d);
  }
  static void copy_deps(block* to, const block* from) {
    for (const dep& d : from->deps) {
      ++d.s->refs;
      add_dep(to, d);
    }
  }

  void retire(typename std::unordered_map<stream_key, std::unique_ptr<stream_state>, stream_key_hash>::iterator it) {
    it->second->retired = true;
    retired_.push_back(std::move(it->second));
    streams_.erase(it);
  }

  void destroy_state_event(stream_state& st) noexcept {
    if (st.has_event) {
      backend_.destroy_event(st.event);
      st.has_event = false;
    }
  }

  // Deletes retired streams nothing refers to any more.
  void sweep_retired() {
    for (std::size_t i = 0; i < retired_.size();) {
      stream_state* st = retired_[i].get();
      bool used = st->refs != 0;
      auto check_pool = [&](pool& p) {
        auto it = p.lists.find(st);
        if (it == p.lists.end()) return;
        if (it->second->empty()) p.lists.erase(it);
        else used = true;
      };
      check_pool(*eager_);
      for (auto& p : private_) check_pool(*p);
      if (used) {
        ++i;
        continue;
      }
      destroy_state_event(*st);
      retired_[i] = std::move(retired_.back());
      retired_.pop_back();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Blocks (mu_ held).

  block* new_block() {
    if (!spare_.empty()) {
      block* b = spare_.back();
      spare_.pop_back();
      return b;
    }
    blocks_.push_back(std::make_unique<block>());
    return blocks_.back().get();
  }

  void recycle(block* b) noexcept {
    clear_deps(b);
    clear_uses(b);
    b->prev_phys = b->next_phys = nullptr;
    b->next_free = b->prev_free = nullptr;
    b->home = nullptr;
    b->idx = nullptr;
    b->ch = nullptr;
    b->requested = b->alignment = 0;
    b->state.store(st_spare, std::memory_order_relaxed);
    spare_.push_back(b);
  }

  // Splits `b` at `at` bytes; returns the new upper part (state spare, same deps).
  block* split(block* b, std::size_t at) {
    block* n = new_block();
    n->addr = b->addr + at;
    n->size = b->size - at;
    n->ch = b->ch;
    n->prev_phys = b;
    n->next_phys = b->next_phys;
    if (b->next_phys != nullptr) b->next_phys->prev_phys = n;
    b->next_phys = n;
    b->size = at;
    copy_deps(n, b);
    map_.insert(n->addr, n);
    return n;
  }

  // `left` absorbs its free upper neighbour `right` (both out of any index).
  void absorb(block* left, block* right) {
    left->size += right->size;
    left->next_phys = right->next_phys;
    if (right->next_phys != nullptr) right->next_phys->prev_phys = left;
    for (const dep& d : right->deps) add_dep(left, d);
    right->deps.clear();
    map_.erase(right->addr);
    recycle(right);
  }

  // Puts `b` into `p`'s index of `home` with `deps` (references already taken), coalescing with
  // free neighbours of the same index.
  void insert_free(pool& p, block* b, stream_state* home, std::vector<dep> deps) {
    clear_deps(b);
    for (const dep& d : deps) add_dep(b, d);
    index_type& idx = p.index_for(home);
    block* prev = b->prev_phys;
    if (prev != nullptr && prev->state.load(std::memory_order_relaxed) == st_free && prev->idx == &idx) {
      idx.remove(prev);
      absorb(prev, b);
      b = prev;
    }
    block* next = b->next_phys;
    if (next != nullptr && next->state.load(std::memory_order_relaxed) == st_free && next->idx == &idx) {
      idx.remove(next);
      absorb(b, next);
    }
    b->home = home;
    b->idx = &idx;
    b->requested = b->alignment = 0;
    b->state.store(st_free, std::memory_order_release);
    idx.insert(b);
  }

  // Takes `b` out of its index and cuts the allocation of `r` bytes at `alignment` from it; the
  // rest stays free where it was. Returns the allocated block (no dependencies).
  block* carve(block* b, std::size_t r, std::size_t alignment) {
    index_type& idx = *b->idx;
    stream_state* home = b->home;
    idx.remove(b);
    const std::uintptr_t start = (b->addr + alignment - 1) & ~(static_cast<std::uintptr_t>(alignment) - 1);
    if (start > b->addr) {
      block* rest = split(b, static_cast<std::size_t>(start - b->addr));
      b->state.store(st_free, std::memory_order_release);
      idx.insert(b);  // the front stays free, home and dependencies unchanged
      rest->home = home;
      rest->idx = &idx;
      b = rest;
    }
    if (b->size - r >= arena_granule) {
      block* tail = split(b, r);
      tail->home = home;
      tail->idx = &idx;
      tail->state.store(st_free, std::memory_order_release);
      idx.insert(tail);
    }
    clear_deps(b);
    b->home = nullptr;
    b->idx = nullptr;
    return b;
  }

  void make_live(block* b, std::size_t bytes, std::size_t alignment) {
    b->requested = bytes;
    b->alignment = alignment;
    b->has_uses.store(false, std::memory_order_relaxed);
    ++counters_.allocations;
    add_in_use(static_cast<std::int64_t>(bytes));
    b->state.store(st_live, std::memory_order_release);
  }

  // A block of `p` from st's own list, made usable on `st`. Null if none fits.
  block* take_own(pool& p, stream_state* st, std::size_t r, std::size_t alignment) {
    if (index_type* own = p.find_index(st)) {
      if (block* b = own->find(r, alignment)) {
        if (satisfy(b, st)) return carve(b, r, alignment);
      }
    }
    return nullptr;
  }

  // A block of `p` from another stream's list, handed over to `st` through events. Null if none.
  block* take_other(pool& p, stream_state* st, std::size_t r, std::size_t alignment) {
    for (auto& kv : p.lists) {
      if (kv.first == st || kv.second->empty()) continue;
      block* b = kv.second->find(r, alignment);
      if (b == nullptr || !satisfy(b, st)) continue;
      ++counters_.handoffs;
      return carve(b, r, alignment);
    }
    return nullptr;
  }

  block* take_from(pool& p, stream_state* st, std::size_t r, std::size_t alignment) {
    block* b = take_own(p, st, r, alignment);
    return b != nullptr ? b : take_other(p, st, r, alignment);
  }

  // Merges neighbouring free blocks of different streams (dependencies united). True if any.
  bool merge_cross_stream(pool& p) {
    bool any = false;
    for (chunk* c : p.chunks) {
      for (block* b = c->first; b != nullptr;) {
        block* n = b->next_phys;
        if (n != nullptr && b->state.load(std::memory_order_relaxed) == st_free &&
            n->state.load(std::memory_order_relaxed) == st_free) {
          index_type* idx = b->idx;
          idx->remove(b);
          n->idx->remove(n);
          absorb(b, n);
          b->state.store(st_free, std::memory_order_relaxed);
          idx->insert(b);
          any = true;
          continue;
        }
        b = n;
      }
    }
    return any;
  }

  // ---------------------------------------------------------------------------------------------
  // Chunks (mu_ held).

  // Gets a chunk of `bytes` from upstream for `p`, its block free in the index of `home`, usable
  // on `stream` at once and elsewhere after `stream`'s current work. Returns the upstream error.
  cudaError_t add_chunk(pool& p, std::size_t bytes, cudaStream_t stream, stream_state* home, block** out = nullptr) {
    if (opts_.max_reserved_bytes != 0 && reserved_ + bytes > opts_.max_reserved_bytes) return cudaErrorMemoryAllocation;
    std::uintptr_t addr = 0;
    const cudaError_t err = backend_.allocate_chunk(addr, bytes, stream);
    if (err != cudaSuccess) return err;
    chunks_.push_back(std::make_unique<chunk>());
    chunk* c = chunks_.back().get();
    c->addr = addr;
    c->size = bytes;
    c->owner.store(&p, std::memory_order_release);
    block* b = new_block();
    b->addr = addr;
    b->size = bytes;
    b->ch = c;
    c->first = b;
    map_.insert(addr, b);
    p.chunks.push_back(c);
    p.reserved += bytes;
    reserved_ += bytes;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    ++counters_.upstream_allocations;
    std::vector<dep> deps;
    if (backend_.chunks_are_stream_ordered()) {
      stream_state* st = state_for(stream);
      deps.push_back(dep{st, tick(st)});
      ++st->refs;
    }
    insert_free(p, b, home, std::move(deps));
    if (backend_.chunks_are_stream_ordered()) {
      stream_state* st = state_for(stream);
      if (st->thread_bound || opts_.free_events == free_event::at_free) record_best_effort(st, st);
    }
    if (out != nullptr) *out = b;
    return cudaSuccess;
  }

  static bool chunk_is_free(const chunk* c) noexcept {
    return c->first->next_phys == nullptr && c->first->state.load(std::memory_order_relaxed) == st_free;
  }

  // Returns a free chunk of the eager pool to upstream, ordered after its dependencies. False if
  // that is not possible now.
  bool release_chunk(chunk* c) {
    block* b = c->first;
    if (!backend_.free_is_capture_safe() && active_captures_.load(std::memory_order_acquire) != 0) return false;
    for (const dep& d : b->deps)
      if (!ensure_recorded(d)) return false;
    stream_state* svc = service_state();
    for (const dep& d : b->deps) wait_for(svc, d);
    backend_.free_chunk(c->addr, c->size, svc->handle);
    b->idx->remove(b);
    map_.erase(b->addr);
    recycle(b);
    pool& p = *c->owner.load(std::memory_order_relaxed);
    p.chunks.erase(std::find(p.chunks.begin(), p.chunks.end(), c));
    p.reserved -= c->size;
    reserved_ -= c->size;
    ++counters_.upstream_frees;
    for (auto it = chunks_.begin(); it != chunks_.end(); ++it) {
      if (it->get() == c) {
        chunks_.erase(it);
        break;
      }
    }
    return true;
  }

  std::size_t trim_locked(std::size_t keep_bytes) {
    merge_cross_stream(*eager_);
    std::vector<chunk*> cs = eager_->chunks;
    std::sort(cs.begin(), cs.end(), [](const chunk* a, const chunk* b) { return a->size > b->size; });
    std::size_t released = 0;
    for (chunk* c : cs) {
      if (reserved_ <= keep_bytes) break;
      if (!chunk_is_free(c)) continue;
      const std::size_t size = c->size;
      if (release_chunk(c)) released += size;
    }
    return released;
  }

  std::size_t free_bytes_locked(std::size_t* largest) const {
    std::size_t total = 0;
    for (const auto& kv : eager_->lists) {
      total += kv.second->bytes();
      *largest = std::max(*largest, kv.second->largest());
    }
    return total;
  }

  [[noreturn]] void throw_out_of_memory(std::size_t bytes, std::size_t alignment, cudaStream_t stream,
                                        std::size_t chunk_bytes, cudaError_t err) {
    ++counters_.failed;
    std::size_t largest = 0;
    const std::size_t free_bytes = free_bytes_locked(&largest);
    const std::int64_t in_use = std::max<std::int64_t>(0, in_use_.load(std::memory_order_relaxed));
    std::string upstream;
    if (opts_.max_reserved_bytes != 0 && reserved_ + chunk_bytes > opts_.max_reserved_bytes) {
      upstream =
          "the arena's max_reserved_bytes limit of " + format_bytes(opts_.max_reserved_bytes) + " would be exceeded";
    } else {
      upstream = std::string(backend_.upstream_name()) + " failed with " + backend_.error_string(err);
    }
    throw bad_alloc("fusex::arena: out of memory: cannot allocate " + format_bytes(bytes) + " (alignment " +
                        std::to_string(alignment) + ") on stream " + format_pointer(stream) + ": a new chunk of " +
                        format_bytes(chunk_bytes) + " was refused: " + upstream +
                        ". Arena state: " + format_bytes(reserved_) + " reserved in " + std::to_string(chunks_.size()) +
                        " chunk(s), " + format_bytes(static_cast<std::size_t>(in_use)) + " in use (peak " +
                        format_bytes(static_cast<std::size_t>(peak_in_use_.load())) + "), " + format_bytes(free_bytes) +
                        " free (largest free block " + format_bytes(largest) + "), " + std::to_string(private_.size()) +
                        " graph-private pool(s). Unused chunks were returned first; no live allocation was "
                        "touched and the arena remains usable.",
                    bytes, err);
  }

  // Grows the eager pool for a request (mu_ held); returns the allocated block or throws.
  block* grow(stream_state* st, std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream) {
    const std::size_t pad = alignment > arena_granule ? alignment - arena_granule : 0;
    const std::size_t need = round_up(r + pad, opts_.chunk_granularity);
    std::size_t geo = round_up(static_cast<std::size_t>(static_cast<double>(reserved_) * opts_.growth_ratio),
                               opts_.chunk_granularity);
    geo = std::max(geo, round_up(opts_.initial_chunk_bytes, opts_.chunk_granularity));
    geo = std::min(geo, std::max(opts_.max_chunk_bytes, opts_.chunk_granularity));
    std::size_t want = std::max(need, geo);
    if (opts_.max_reserved_bytes != 0 && reserved_ + want > opts_.max_reserved_bytes) {
      const std::size_t room = opts_.max_reserved_bytes > reserved_ ? opts_.max_reserved_bytes - reserved_ : 0;
      want = std::max(need, room / opts_.chunk_granularity * opts_.chunk_granularity);
    }
    block* b = nullptr;
    cudaError_t err = add_chunk(*eager_, want, stream, st, &b);
    if (err != cudaSuccess && want > need) err = add_chunk(*eager_, need, stream, st, &b);
    if (err != cudaSuccess) {
      // Out of memory: give unused chunks back (they may sit in another stream's lists, or be the
      // wrong size) and try once more for exactly what is needed.
      if (trim_locked(0) != 0) err = add_chunk(*eager_, need, stream, st, &b);
    }
    if (err != cudaSuccess) throw_out_of_memory(bytes, alignment, stream, need, err);
    // The new chunk's only dependency is on `stream` itself.
    return carve(b, r, alignment);
  }

  // ---------------------------------------------------------------------------------------------
  // Slow paths.

  void* allocate_slow(std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream,
                      const capture_state* known) {
    std::lock_guard<std::mutex> lock(mu_);
    const capture_state cap = known != nullptr ? *known : backend_.capture_status(stream);
    if (cap.active) return allocate_captured(bytes, r, alignment, stream, cap);
    stream_state* st = state_for(stream);
    // Own stream first (no event), then what threads keep cached, then other streams (an event
    // each), then free neighbours of different streams merged, and only then upstream.
    block* b = take_own(*eager_, st, r, alignment);
    if (b == nullptr && flush_own_cache_locked()) b = take_own(*eager_, st, r, alignment);
    if (b == nullptr) b = take_other(*eager_, st, r, alignment);
    if (b == nullptr && flush_all_caches_locked()) b = take_from(*eager_, st, r, alignment);
    if (b == nullptr && merge_cross_stream(*eager_)) b = take_from(*eager_, st, r, alignment);
    if (b == nullptr) b = grow(st, bytes, r, alignment, stream);
    make_live(b, bytes, alignment);
    return reinterpret_cast<void*>(b->addr);
  }

  // Finds the private pool whose capture has id `id` (mu_ held).
  pool* route(unsigned long long id) {
    for (auto& p : private_) {
      if (!p->capturing) continue;
      if (!p->id_known) {
        const capture_state o = backend_.capture_status(p->origin);
        if (o.active) {
          p->id_known = true;
          p->capture_id = o.id;
        }
      }
      if (p->id_known && p->capture_id == id) return p.get();
    }
    return nullptr;
  }

  void* allocate_captured(std::size_t bytes, std::size_t r, std::size_t alignment, cudaStream_t stream,
                          const capture_state& cap) {
    pool* p = route(cap.id);
    if (p == nullptr) {
      throw error("fusex::arena: allocate_async(" + std::to_string(bytes) + " bytes) on stream " +
                  format_pointer(stream) + ", which is being captured into a CUDA graph (capture id " +
                  std::to_string(cap.id) +
                  "), without a graph-private pool. Rule: while a stream is captured the arena never grows, "
                  "never records or queries events for it, and gives it only memory that eager code cannot "
                  "reuse while the graph lives. Call arena::begin_private_pool(origin stream) before "
                  "cudaStreamBeginCapture and end_private_pool after cudaStreamEndCapture (fusex's graph "
                  "capture does this), or allocate before capturing.");
    }
    stream_state* st = state_for(stream);
    block* b = nullptr;
    // Only the capturing stream's own frees and the pool's neutral blocks: no events in a capture.
    if (index_type* own = p->find_index(st)) {
      if (block* x = own->find(r, alignment); x != nullptr && only_own_deps(x, st)) b = carve(x, r, alignment);
    }
    if (b == nullptr) {
      if (index_type* neutral = p->find_index(nullptr)) {
        if (block* x = neutral->find(r, alignment)) b = carve(x, r, alignment);
      }
    }
    if (b == nullptr) {
      const std::size_t pad = alignment > arena_granule ? alignment - arena_granule : 0;
      p->shortfall += r + pad;
      ++counters_.failed;
      throw bad_alloc("fusex::arena: graph-private pool exhausted during stream capture: cannot allocate " +
                          format_bytes(bytes) + " (alignment " + std::to_string(alignment) + ") on stream " +
                          format_pointer(stream) + "; the pool holds " + format_bytes(p->reserved) + ", " +
                          format_bytes(p->in_use) + " of it in use, and has fallen short by " +
                          format_bytes(p->shortfall) +
                          " in this capture. The arena never grows while a stream is captured: reserve more "
                          "before capturing (private_pool_options::reserve_bytes, private_pool::reserve).",
                      bytes, cudaErrorMemoryAllocation);
    }
    p->in_use += bytes;
    make_live(b, bytes, alignment);
    return reinterpret_cast<void*>(b->addr);
  }

  void deallocate_slow(block* b, cudaStream_t stream, const capture_state* known) {
    std::unique_lock<std::mutex> lock(mu_);
    capture_state cap;
    try {
      cap = known != nullptr ? *known : backend_.capture_status(stream);
    } catch (...) {
      b->state.store(st_live, std::memory_order_release);
      throw;
    }
    pool* owner = b->ch->owner.load(std::memory_order_relaxed);
    const std::size_t req = b->requested;
    if (cap.active) {
      pool* p = route(cap.id);
      if (p == nullptr) {
        b->state.store(st_live, std::memory_order_release);
        throw error("fusex::arena: deallocate_async(" + format_pointer(reinterpret_cast<void*>(b->addr)) +
                    ") on stream " + format_pointer(stream) +
                    ", which is being captured into a CUDA graph (capture id " + std::to_string(cap.id) +
                    "), without a graph-private pool. Rule: memory freed inside a capture may still be used by "
                    "the graph's replays, so a graph-private pool must keep it for as long as the graph lives. "
                    "Call arena::begin_private_pool(origin stream) before cudaStreamBeginCapture.");
      }
      if (owner == p) {
        p->in_use -= req;
        clear_uses(b);
        insert_free(*p, b, state_for(stream), {});
      } else {
        b->state.store(st_kept, std::memory_order_release);
        p->kept.push_back(b);
      }
      ++counters_.deallocations;
      add_in_use(-static_cast<std::int64_t>(req));
      return;
    }
    stream_state* st = state_for(stream);
    std::vector<dep> deps{dep{st, tick(st)}};
    ++st->refs;
    for (stream_state* u : b->uses) {
      if (u == st) continue;
      deps.push_back(dep{u, tick(u)});
      ++u->refs;
    }
    clear_uses(b);
    std::vector<stream_state*> to_record;
    if (opts_.free_events == free_event::at_free) {
      for (const dep& d : deps) to_record.push_back(d.s);
    } else if (st->thread_bound) {
      to_record.push_back(st);
    }
    if (!owner->eager) owner->in_use -= req;
    insert_free(*owner, b, st, std::move(deps));
    ++counters_.deallocations;
    add_in_use(-static_cast<std::int64_t>(req));
    // Recorded now, while the streams are known to be alive, so that no later call touches them;
    // after the block is back in its list, so that a failing record loses nothing.
    for (stream_state* x : to_record) record_best_effort(x, st);
  }

  // Records x's event now unless a record already covers its work, x is being captured (a
  // record_stream stream inside a capture keeps the lazy protocol: recorded at a hand-off), or x
  // belongs to another thread. Best effort: an unrecorded dependency is still covered at a
  // hand-off by ensure_recorded. `known` is a stream known not to be captured (mu_ held).
  void record_best_effort(stream_state* x, const stream_state* known) noexcept {
    if (x->recorded >= x->counter || x->retired) return;
    if (x->thread_bound && x->thread != thread_serial()) return;
    try {
      if (x != known && !x->thread_bound && backend_.capture_status(x->handle).active) return;
      record_now(x);
    } catch (...) {
      (void)0;  // see above: the hand-off records it if it still can
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Private pools (called through basic_private_pool).

  static pool* pool_of(private_pool& h, const char* call) {
    if (h.p_ == nullptr)
      throw invalid_argument(std::string("fusex::arena: ") + call + " with an empty private_pool handle");
    return static_cast<pool*>(h.p_);
  }

  void pool_grow_locked(pool& p, std::size_t bytes, cudaStream_t stream) {
    const std::size_t size = round_up(bytes, opts_.chunk_granularity);
    if (adopt_free_chunk(p, size)) return;
    cudaError_t err = add_chunk(p, size, stream, nullptr);
    if (err != cudaSuccess) {
      // Out of memory: the eager pool's free memory may sit in thread caches or in pieces of a
      // chunk on several streams' lists. Gather it and try adopting again, then give unused
      // chunks of any size back to upstream and try once more (as the eager pool's grow does).
      const bool flushed = flush_all_caches_locked();
      const bool merged = merge_cross_stream(*eager_);
      if ((flushed || merged) && adopt_free_chunk(p, size)) return;
      if (trim_locked(0) != 0) err = add_chunk(p, size, stream, nullptr);
    }
    if (err != cudaSuccess) throw_out_of_memory(bytes, arena_granule, stream, size, err);
  }

  // Gives `p` a wholly free chunk of the eager pool of at least `size` bytes (the smallest, at most
  // twice `size`) instead of a new one from upstream: each graph's pool would otherwise take a new
  // chunk, and the chunks of destroyed pools (which return to the eager pool) would pile up
  // unused (the stress test reserved the whole GPU in 64 MiB chunks in two seconds). The chunk's
  // block keeps its dependencies: begin_private_pool orders the capture's origin after them.
  // False when no chunk fits or one's last users cannot be covered by an event now (a stream
  // being captured).
  bool adopt_free_chunk(pool& p, std::size_t size) {
    chunk* best = nullptr;
    for (chunk* c : eager_->chunks) {
      if (c->size < size || c->size > 2 * size || !chunk_is_free(c)) continue;
      if (best != nullptr && c->size >= best->size) continue;
      bool recordable = true;
      for (const dep& d : c->first->deps) recordable = recordable && ensure_recorded(d);
      if (recordable) best = c;
    }
    if (best == nullptr) return false;
    block* b = best->first;
    std::vector<dep> deps;
    for (const dep& d : b->deps) {
      ++d.s->refs;
      deps.push_back(d);
    }
    b->idx->remove(b);
    eager_->chunks.erase(std::find(eager_->chunks.begin(), eager_->chunks.end(), best));
    eager_->reserved -= best->size;
    best->owner.store(&p, std::memory_order_release);
    p.chunks.push_back(best);
    p.reserved += best->size;
    insert_free(p, b, nullptr, std::move(deps));
    ++counters_.pool_adoptions;
    return true;
  }

  void pool_reserve(void* handle, std::size_t bytes, cudaStream_t stream) {
    auto* p = static_cast<pool*>(handle);
    std::lock_guard<std::mutex> lock(mu_);
    if (p->capturing || backend_.capture_status(stream).active) {
      throw error(
          "fusex::arena: private_pool::reserve during a capture: a pool never grows while a stream is "
          "captured; reserve before cudaStreamBeginCapture");
    }
    if (bytes != 0) pool_grow_locked(*p, bytes, stream);
  }

  void pool_set_release_stream(void* handle, cudaStream_t stream) {
    check_pool_stream(stream, "private_pool::set_release_stream");
    std::lock_guard<std::mutex> lock(mu_);
    static_cast<pool*>(handle)->release_stream = stream;
  }

  void pool_info(void* handle, std::size_t* reserved, std::size_t* in_use, std::size_t* shortfall,
                 bool* capturing) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto* p = static_cast<const pool*>(handle);
    *reserved = p->reserved;
    *in_use = p->in_use;
    *shortfall = p->shortfall;
    *capturing = p->capturing;
  }

  // The graph is gone: the pool's memory returns to the eager pool, ordered after the release
  // stream's work at this point (the graph may still be running there).
  void pool_destroy(void* handle) {
    auto* p = static_cast<pool*>(handle);
    std::lock_guard<std::mutex> lock(mu_);
    if (p->capturing) {
      p->capturing = false;
      active_captures_.fetch_sub(1, std::memory_order_acq_rel);
    }
    stream_state* rel = state_for(p->release_stream);
    const std::uint64_t seq = tick(rel);
    std::vector<stream_state*> ticked;  // record_stream streams of kept blocks, recorded below
    // Blocks of other pools freed during this pool's captures go back to their own pool.
    for (block* b : p->kept) {
      pool* owner = b->ch->owner.load(std::memory_order_relaxed);
      if (owner == p) owner = eager_.get();
      std::vector<dep> deps{dep{rel, seq}};
      ++rel->refs;
      for (stream_state* u : b->uses) {
        if (u == rel) continue;
        deps.push_back(dep{u, tick(u)});
        ++u->refs;
        ticked.push_back(u);
      }
      clear_uses(b);
      if (!owner->eager) owner->in_use -= b->requested;
      insert_free(*owner, b, rel, std::move(deps));
    }
    p->kept.clear();
    // The pool's chunks become the eager pool's; live blocks stay live and are freed as eager.
    std::vector<block*> all;
    for (auto& kv : p->lists) kv.second->for_each([&](block* b) { all.push_back(b); });
    for (block* b : all) {
      b->idx->remove(b);
      b->state.store(st_moving, std::memory_order_relaxed);
    }
    for (chunk* c : p->chunks) {
      c->owner.store(eager_.get(), std::memory_order_release);
      eager_->chunks.push_back(c);
      eager_->reserved += c->size;
    }
    for (block* b : all) {
      if (b->state.load(std::memory_order_relaxed) != st_moving) continue;  // absorbed meanwhile
      ++rel->refs;
      std::vector<dep> deps;
      for (const dep& d : b->deps) {
        ++d.s->refs;
        deps.push_back(d);
      }
      deps.push_back(dep{rel, seq});
      insert_free(*eager_, b, rel, std::move(deps));
    }
    if (opts_.free_events == free_event::at_free) {
      // As at a free: the release stream (and record_stream streams of kept blocks) may be
      // destroyed once the graph is gone.
      record_best_effort(rel, nullptr);
      for (stream_state* u : ticked) record_best_effort(u, nullptr);
    }
    for (auto it = private_.begin(); it != private_.end(); ++it) {
      if (it->get() == p) {
        private_.erase(it);
        break;
      }
    }
  }

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
  void reset() {
    if (a_ != nullptr) {
      Arena* a = std::exchange(a_, nullptr);
      a->pool_destroy(std::exchange(p_, nullptr));
    }
  }

 private:
  friend Arena;
  basic_private_pool(Arena* a, void* p) noexcept : a_(a), p_(p) {}

  struct pool_info_t {
    std::size_t reserved = 0, in_use = 0, shortfall = 0;
    bool capturing = false;
  };
  Arena& checked() const {
    if (a_ == nullptr) throw invalid_argument("fusex::private_pool: empty handle");
    return *a_;
  }
  pool_info_t info() const {
    pool_info_t i;
    checked().pool_info(p_, &i.reserved, &i.in_use, &i.shortfall, &i.capturing);
    return i;
  }
  void reset_noexcept() noexcept {
    try {
      reset();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fusex::private_pool: returning the pool failed: %s\n", e.what());
    }
  }

  Arena* a_ = nullptr;
  void* p_ = nullptr;
};

}  // namespace fusex::detail
