#pragma once
/// \file
/// The arena's allocation and deallocation: allocate_async and deallocate_async (the thread-cache
/// fast path, then the shared slow paths under the arena's mutex: the stream's own list, the
/// thread caches, other streams' lists through events, merged neighbours, growth), owns(), and the
/// argument checks and their messages.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fusex::detail {

template <class Backend>
inline void* basic_arena<Backend>::allocate_async(std::size_t bytes, std::size_t alignment, cudaStream_t stream) {
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

template <class Backend>
inline void basic_arena<Backend>::deallocate_async(void* p, std::size_t bytes, std::size_t alignment,
                                                   cudaStream_t stream) {
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

template <class Backend>
inline bool basic_arena<Backend>::owns(const void* p) {
  if (p == nullptr) return false;
  return map_.with(reinterpret_cast<std::uintptr_t>(p),
                   [](block* x) { return x != nullptr && x->state.load(std::memory_order_acquire) == st_live; });
}

template <class Backend>
inline void basic_arena<Backend>::check_alignment(std::size_t alignment, std::size_t bytes, const char* what) {
  if (!is_pow2(alignment) || alignment > arena_max_alignment) throw_bad_alignment(alignment, bytes, what);
}

template <class Backend>
[[noreturn]] inline void basic_arena<Backend>::throw_bad_alignment(std::size_t alignment, std::size_t bytes,
                                                                   const char* what) {
  throw invalid_argument(std::string("fusex::arena: ") + what + " of " + std::to_string(bytes) +
                         " bytes with alignment " + std::to_string(alignment) +
                         ": the alignment must be a power of two up to " + std::to_string(arena_max_alignment));
}

template <class Backend>
[[noreturn]] inline void basic_arena<Backend>::throw_bad_free(void* p, std::size_t bytes, std::size_t alignment,
                                                              bool found, std::uint8_t seen) {
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

template <class Backend>
inline bool basic_arena<Backend>::must_query_capture() const noexcept {
  return opts_.capture == capture_check::always || active_captures_.load(std::memory_order_acquire) != 0;
}

template <class Backend>
inline bool basic_arena<Backend>::cacheable(const block* b, cudaStream_t stream) const noexcept {
  return b->size <= opts_.max_cached_block_bytes && b->ch->owner.load(std::memory_order_acquire) == eager_.get() &&
         !b->has_uses.load(std::memory_order_acquire) && !backend_.is_thread_bound(stream);
}

template <class Backend>
inline void basic_arena<Backend>::make_live(block* b, std::size_t bytes, std::size_t alignment) {
  b->requested = bytes;
  b->alignment = alignment;
  b->has_uses.store(false, std::memory_order_relaxed);
  ++counters_.allocations;
  add_in_use(static_cast<std::int64_t>(bytes));
  b->state.store(st_live, std::memory_order_release);
}

template <class Backend>
inline auto basic_arena<Backend>::take_own(pool& p, stream_state* st, std::size_t r, std::size_t alignment) -> block* {
  if (index_type* own = p.find_index(st)) {
    if (block* b = own->find(r, alignment)) {
      if (satisfy(b, st)) return carve(b, r, alignment);
    }
  }
  return nullptr;
}

template <class Backend>
inline auto basic_arena<Backend>::take_other(pool& p, stream_state* st, std::size_t r, std::size_t alignment)
    -> block* {
  for (auto& kv : p.lists) {
    if (kv.first == st || kv.second->empty()) continue;
    block* b = kv.second->find(r, alignment);
    if (b == nullptr || !satisfy(b, st)) continue;
    ++counters_.handoffs;
    return carve(b, r, alignment);
  }
  return nullptr;
}

template <class Backend>
inline auto basic_arena<Backend>::take_from(pool& p, stream_state* st, std::size_t r, std::size_t alignment) -> block* {
  block* b = take_own(p, st, r, alignment);
  return b != nullptr ? b : take_other(p, st, r, alignment);
}

template <class Backend>
inline void* basic_arena<Backend>::allocate_slow(std::size_t bytes, std::size_t r, std::size_t alignment,
                                                 cudaStream_t stream, const capture_state* known) {
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

template <class Backend>
inline void basic_arena<Backend>::deallocate_slow(block* b, cudaStream_t stream, const capture_state* known) {
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
                  ") on stream " + format_pointer(stream) + ", which is being captured into a CUDA graph (capture id " +
                  std::to_string(cap.id) +
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

}  // namespace fusex::detail
