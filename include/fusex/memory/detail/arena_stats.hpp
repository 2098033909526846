#pragma once
/// \file
/// The arena's statistics (stats(), the batched in-use counter) and validate(), the check of its
/// invariants used by the tests.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace fusex::detail {

template <class Backend>
inline arena_stats basic_arena<Backend>::stats() const {
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

template <class Backend>
inline std::string basic_arena<Backend>::validate() {
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

template <class Backend>
inline void basic_arena<Backend>::add_in_use(std::int64_t delta) noexcept {
  const std::int64_t now = in_use_.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (delta > 0) {
    std::int64_t peak = peak_in_use_.load(std::memory_order_relaxed);
    while (now > peak && !peak_in_use_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  }
}

template <class Backend>
inline void basic_arena<Backend>::note_in_use(thread_cache& c, std::int64_t delta) noexcept {
  c.pending += delta;
  const auto batch = static_cast<std::int64_t>(opts_.stats_batch_bytes);
  if (c.pending >= batch || (c.pending <= -batch && (batch == 0 || -c.pending > static_cast<std::int64_t>(c.bytes)))) {
    add_in_use(c.pending);
    c.pending = 0;
  }
}

template <class Backend>
inline std::size_t basic_arena<Backend>::live_allocations_locked() const {
  std::uint64_t a = counters_.allocations, d = counters_.deallocations;
  for (const auto& c : caches_) {
    spin_guard g(c->lock);
    a += c->allocations;
    d += c->deallocations;
  }
  return static_cast<std::size_t>(a - d);
}

}  // namespace fusex::detail
