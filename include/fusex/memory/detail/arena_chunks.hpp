#pragma once
/// \file
/// The arena's chunks from upstream: construction and destruction, growth (geometric, bounded by
/// max_reserved_bytes), returning chunks (trim, release) ordered after their last users, and the
/// out-of-memory report.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/error.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/thread_caches.hpp>

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
inline basic_arena<Backend>::basic_arena(Backend backend, const arena_options& options)
    : backend_(std::move(backend)), opts_(options) {
  if (opts_.chunk_granularity == 0 || opts_.chunk_granularity % arena_granule != 0) {
    throw invalid_argument("fusex::arena: chunk_granularity " + std::to_string(opts_.chunk_granularity) +
                           " is not a non-zero multiple of " + std::to_string(arena_granule));
  }
  if (!(opts_.growth_ratio >= 0.0)) {
    throw invalid_argument("fusex::arena: growth_ratio must be >= 0, got " + std::to_string(opts_.growth_ratio));
  }
  if (opts_.max_cached_block_bytes > opts_.thread_cache_bytes) opts_.max_cached_block_bytes = opts_.thread_cache_bytes;
  num_classes_ = opts_.max_cached_block_bytes >= arena_granule ? size_class_of(opts_.max_cached_block_bytes) + 1 : 0;
  eager_ = std::make_unique<pool>();
  eager_->eager = true;
  cache_registry& r = arena_registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  id_ = r.next_id.fetch_add(1, std::memory_order_relaxed);
  r.alive.emplace(id_, static_cast<cache_owner*>(this));
}

template <class Backend>
inline basic_arena<Backend>::~basic_arena() {
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

template <class Backend>
inline std::size_t basic_arena<Backend>::trim(std::size_t keep_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  flush_all_caches_locked();
  const std::size_t r = trim_locked(keep_bytes);
  sweep_retired();
  return r;
}

template <class Backend>
inline void basic_arena<Backend>::release() {
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

template <class Backend>
inline cudaError_t basic_arena<Backend>::add_chunk(pool& p, std::size_t bytes, cudaStream_t stream, stream_state* home,
                                                   block** out) {
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

template <class Backend>
inline bool basic_arena<Backend>::chunk_is_free(const chunk* c) noexcept {
  return c->first->next_phys == nullptr && c->first->state.load(std::memory_order_relaxed) == st_free;
}

template <class Backend>
inline bool basic_arena<Backend>::release_chunk(chunk* c) {
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

template <class Backend>
inline std::size_t basic_arena<Backend>::trim_locked(std::size_t keep_bytes) {
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

template <class Backend>
inline std::size_t basic_arena<Backend>::free_bytes_locked(std::size_t* largest) const {
  std::size_t total = 0;
  for (const auto& kv : eager_->lists) {
    total += kv.second->bytes();
    *largest = std::max(*largest, kv.second->largest());
  }
  return total;
}

template <class Backend>
[[noreturn]] inline void basic_arena<Backend>::throw_out_of_memory(std::size_t bytes, std::size_t alignment,
                                                                   cudaStream_t stream, std::size_t chunk_bytes,
                                                                   cudaError_t err) {
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

template <class Backend>
inline auto basic_arena<Backend>::grow(stream_state* st, std::size_t bytes, std::size_t r, std::size_t alignment,
                                       cudaStream_t stream) -> block* {
  const std::size_t pad = alignment > arena_granule ? alignment - arena_granule : 0;
  const std::size_t need = round_up(r + pad, opts_.chunk_granularity);
  std::size_t geo =
      round_up(static_cast<std::size_t>(static_cast<double>(reserved_) * opts_.growth_ratio), opts_.chunk_granularity);
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

}  // namespace fusex::detail
