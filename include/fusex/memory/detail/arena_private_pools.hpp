#pragma once
/// \file
/// The arena's graph-private pools for stream capture: making, beginning and ending them, routing a
/// captured stream's allocations to its pool, growing a pool (preferably with a wholly free chunk
/// of the eager pool), and returning a pool's memory when its handle (basic_private_pool) goes.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fusex::detail {

template <class Backend>
inline auto basic_arena<Backend>::make_private_pool(cudaStream_t stream, const private_pool_options& options)
    -> private_pool {
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

template <class Backend>
inline auto basic_arena<Backend>::begin_private_pool(cudaStream_t origin, const private_pool_options& options)
    -> private_pool {
  check_pool_stream(origin, "begin_private_pool");
  private_pool p = make_private_pool(origin, options);
  begin_private_pool(origin, p);
  return p;
}

template <class Backend>
inline void basic_arena<Backend>::begin_private_pool(cudaStream_t origin, private_pool& handle) {
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

template <class Backend>
inline void basic_arena<Backend>::end_private_pool(private_pool& handle) {
  pool* p = pool_of(handle, "end_private_pool");
  std::lock_guard<std::mutex> lock(mu_);
  if (!p->capturing) throw error("fusex::arena: end_private_pool: the pool is not capturing");
  p->capturing = false;
  active_captures_.fetch_sub(1, std::memory_order_acq_rel);
}

template <class Backend>
inline void basic_arena<Backend>::check_pool_stream(cudaStream_t s, const char* what) const {
  if (s == nullptr || backend_.is_thread_bound(s) || s == cudaStreamLegacy) {
    throw invalid_argument(std::string("fusex::arena: ") + what +
                           " needs an explicit stream (the default streams cannot be captured by fusex)");
  }
}

template <class Backend>
inline auto basic_arena<Backend>::route(unsigned long long id) -> pool* {
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

template <class Backend>
inline void* basic_arena<Backend>::allocate_captured(std::size_t bytes, std::size_t r, std::size_t alignment,
                                                     cudaStream_t stream, const capture_state& cap) {
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

template <class Backend>
inline auto basic_arena<Backend>::pool_of(private_pool& h, const char* call) -> pool* {
  if (h.p_ == nullptr)
    throw invalid_argument(std::string("fusex::arena: ") + call + " with an empty private_pool handle");
  return static_cast<pool*>(h.p_);
}

template <class Backend>
inline void basic_arena<Backend>::pool_grow_locked(pool& p, std::size_t bytes, cudaStream_t stream) {
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

template <class Backend>
inline bool basic_arena<Backend>::adopt_free_chunk(pool& p, std::size_t size) {
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

template <class Backend>
inline void basic_arena<Backend>::pool_reserve(void* handle, std::size_t bytes, cudaStream_t stream) {
  auto* p = static_cast<pool*>(handle);
  std::lock_guard<std::mutex> lock(mu_);
  if (p->capturing || backend_.capture_status(stream).active) {
    throw error(
        "fusex::arena: private_pool::reserve during a capture: a pool never grows while a stream is "
        "captured; reserve before cudaStreamBeginCapture");
  }
  if (bytes != 0) pool_grow_locked(*p, bytes, stream);
}

template <class Backend>
inline void basic_arena<Backend>::pool_set_release_stream(void* handle, cudaStream_t stream) {
  check_pool_stream(stream, "private_pool::set_release_stream");
  std::lock_guard<std::mutex> lock(mu_);
  static_cast<pool*>(handle)->release_stream = stream;
}

template <class Backend>
inline void basic_arena<Backend>::pool_info(void* handle, std::size_t* reserved, std::size_t* in_use,
                                            std::size_t* shortfall, bool* capturing) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto* p = static_cast<const pool*>(handle);
  *reserved = p->reserved;
  *in_use = p->in_use;
  *shortfall = p->shortfall;
  *capturing = p->capturing;
}

template <class Backend>
inline void basic_arena<Backend>::pool_destroy(void* handle) {
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

template <class Arena>
inline void basic_private_pool<Arena>::reset() {
  if (a_ != nullptr) {
    Arena* a = std::exchange(a_, nullptr);
    a->pool_destroy(std::exchange(p_, nullptr));
  }
}

template <class Arena>
inline Arena& basic_private_pool<Arena>::checked() const {
  if (a_ == nullptr) throw invalid_argument("fusex::private_pool: empty handle");
  return *a_;
}

template <class Arena>
inline auto basic_private_pool<Arena>::info() const -> pool_info_t {
  pool_info_t i;
  checked().pool_info(p_, &i.reserved, &i.in_use, &i.shortfall, &i.capturing);
  return i;
}

template <class Arena>
inline void basic_private_pool<Arena>::reset_noexcept() noexcept {
  try {
    reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusex::private_pool: returning the pool failed: %s\n", e.what());
  }
}

}  // namespace fusex::detail
