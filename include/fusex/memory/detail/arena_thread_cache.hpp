#pragma once
/// \file
/// The arena's per-thread caches of recently freed blocks (the data structures that find a thread's
/// cache are in thread_caches.hpp): lookup, take and put, eviction to the shared lists, flushing,
/// and handing an exiting thread's cache back.
///
/// One of the headers that define basic_arena's member functions, one concern each (arena_impl.hpp
/// lists them; the class definition is arena_core.hpp). Host code: nvcc's device pass sees the
/// declarations only (memory/arena.hpp includes the definitions where FUSEX_DETAIL_HOST_BODIES is set, config.hpp).

#include <fusex/memory/detail/arena_core.hpp>
#include <fusex/memory/detail/arena_util.hpp>
#include <fusex/memory/detail/thread_caches.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace fusex::detail {

template <class Backend>
inline auto basic_arena<Backend>::my_cache() -> thread_cache* {
  // The arena this thread used last: a trivially initialised thread_local, so no TLS guard; the
  // lookup in the table is out of line (its register saves would otherwise tax every call).
  const tls_last_cache& last = last_thread_cache;
  if (last.owner == id_) return static_cast<thread_cache*>(last.cache);
  return my_cache_slow();
}

template <class Backend>
inline auto basic_arena<Backend>::my_cache_slow() -> thread_cache* {
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

template <class Backend>
inline auto basic_arena<Backend>::cache_take(thread_cache& c, std::size_t r, std::size_t alignment,
                                             cudaStream_t stream) noexcept -> block* {
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

template <class Backend>
inline void basic_arena<Backend>::cache_put(thread_cache& c, block* b, cudaStream_t stream) {
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

template <class Backend>
inline void basic_arena<Backend>::drain(thread_cache& c, std::vector<cache_entry>& out) {
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

template <class Backend>
inline void basic_arena<Backend>::flush_evicted(thread_cache& c) {
  std::lock_guard<std::mutex> lock(mu_);
  insert_cache_entries(c.evicted);
  c.evicted.clear();
}

template <class Backend>
inline void basic_arena<Backend>::insert_cache_entries(const std::vector<cache_entry>& entries) {
  for (const cache_entry& e : entries) {
    stream_state* st = state_for(e.stream);
    std::vector<dep> deps{dep{st, tick(st)}};
    ++st->refs;
    insert_free(*eager_, e.b, st, std::move(deps));
  }
}

template <class Backend>
inline bool basic_arena<Backend>::flush_all_caches_locked() {
  std::vector<cache_entry> all;
  for (const auto& c : caches_) {
    spin_guard g(c->lock);
    drain(*c, all);
  }
  insert_cache_entries(all);
  return !all.empty();
}

template <class Backend>
inline bool basic_arena<Backend>::flush_own_cache_locked() {
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

template <class Backend>
inline void basic_arena<Backend>::on_thread_exit(void* cache, std::uint64_t thread) noexcept {
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

}  // namespace fusex::detail
