#pragma once
/// \file
/// The arena's blocks within their chunks: the spare-record pool, splitting, carving an
/// allocation out of a free block, and coalescing free neighbours (within one stream's index, and
/// across streams when memory is short).
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fusex::detail {

template <class Backend>
inline auto basic_arena<Backend>::new_block() -> block* {
  if (!spare_.empty()) {
    block* b = spare_.back();
    spare_.pop_back();
    return b;
  }
  blocks_.push_back(std::make_unique<block>());
  return blocks_.back().get();
}

template <class Backend>
inline void basic_arena<Backend>::recycle(block* b) noexcept {
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

template <class Backend>
inline auto basic_arena<Backend>::split(block* b, std::size_t at) -> block* {
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

template <class Backend>
inline void basic_arena<Backend>::absorb(block* left, block* right) {
  left->size += right->size;
  left->next_phys = right->next_phys;
  if (right->next_phys != nullptr) right->next_phys->prev_phys = left;
  for (const dep& d : right->deps) add_dep(left, d);
  right->deps.clear();
  map_.erase(right->addr);
  recycle(right);
}

template <class Backend>
inline void basic_arena<Backend>::insert_free(pool& p, block* b, stream_state* home, std::vector<dep> deps) {
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

template <class Backend>
inline auto basic_arena<Backend>::carve(block* b, std::size_t r, std::size_t alignment) -> block* {
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

template <class Backend>
inline bool basic_arena<Backend>::merge_cross_stream(pool& p) {
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

}  // namespace fusex::detail
