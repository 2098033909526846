#pragma once
/// \file
/// Per-thread lookup of an arena's thread cache, and the process-wide registry of live arenas
/// through which a thread that exits hands its caches back. Plain C++.
///
/// Each arena has a process-unique id. A thread keeps a small table {arena id -> cache}; the cache
/// itself is owned by the arena. When the thread exits, the table's destructor asks every arena
/// that is still alive (looked up in the registry, under the registry's mutex) to take its cache
/// back; an arena that is destroyed first removes itself from the registry, so stale entries are
/// never followed.

#include <fusex/memory/detail/arena_util.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fusex::detail {

/// Implemented by the arena: takes back the cache of a thread that is exiting.
class cache_owner {
 public:
  virtual void on_thread_exit(void* cache, std::uint64_t thread) noexcept = 0;

 protected:
  ~cache_owner() = default;
};

struct cache_registry {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, cache_owner*> alive;
  std::atomic<std::uint64_t> next_id{1};
};

/// Never destroyed: threads may exit during static destruction.
inline cache_registry& arena_registry() {
  static cache_registry* r = new cache_registry;
  return *r;
}

/// The calling thread's most recent {arena id -> cache} lookup, checked before the table. An entry
/// goes stale when its arena is destroyed, harmlessly: arena ids come from one process-wide counter
/// and are never reused, so no later arena matches it and its cache pointer is never followed. The
/// other way a cache leaves its thread, the thread's exit, clears the entry (the table does).
struct tls_last_cache {
  std::uint64_t owner;
  void* cache;
};
inline thread_local tls_last_cache last_thread_cache{0, nullptr};

class tls_cache_table {
 public:
  tls_cache_table() : thread_(thread_serial()) {}
  tls_cache_table(const tls_cache_table&) = delete;
  tls_cache_table& operator=(const tls_cache_table&) = delete;

  void* find(std::uint64_t owner) const noexcept {
    for (std::size_t i = 0; i < n_; ++i)
      if (slots_[i].owner == owner) return slots_[i].cache;
    for (const slot& s : more_)
      if (s.owner == owner) return s.cache;
    return nullptr;
  }

  void add(std::uint64_t owner, void* cache) {
    if (n_ == capacity) purge_dead();
    if (n_ < capacity) slots_[n_++] = slot{owner, cache};
    else more_.push_back(slot{owner, cache});
  }

  /// Forgets the entry of `owner` (the arena took the cache back).
  void remove(std::uint64_t owner) noexcept {
    for (std::size_t i = 0; i < n_; ++i) {
      if (slots_[i].owner == owner) {
        slots_[i] = slots_[--n_];
        return;
      }
    }
    for (std::size_t i = 0; i < more_.size(); ++i) {
      if (more_[i].owner == owner) {
        more_[i] = more_.back();
        more_.pop_back();
        return;
      }
    }
  }

  ~tls_cache_table() {
    last_thread_cache = tls_last_cache{0, nullptr};
    cache_registry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto give_back = [&](const slot& s) {
      auto it = r.alive.find(s.owner);
      if (it != r.alive.end()) it->second->on_thread_exit(s.cache, thread_);
    };
    for (std::size_t i = 0; i < n_; ++i) give_back(slots_[i]);
    for (const slot& s : more_) give_back(s);
  }

 private:
  static constexpr std::size_t capacity = 8;
  struct slot {
    std::uint64_t owner = 0;
    void* cache = nullptr;
  };

  void purge_dead() {
    cache_registry& r = arena_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::size_t k = 0;
    for (std::size_t i = 0; i < n_; ++i)
      if (r.alive.count(slots_[i].owner) != 0) slots_[k++] = slots_[i];
    n_ = k;
    std::vector<slot> keep;
    for (const slot& s : more_)
      if (r.alive.count(s.owner) != 0) keep.push_back(s);
    more_.swap(keep);
  }

  slot slots_[capacity];
  std::size_t n_ = 0;
  std::vector<slot> more_;
  std::uint64_t thread_;
};

/// The calling thread's table.
inline tls_cache_table& thread_cache_table() {
  static thread_local tls_cache_table t;
  return t;
}

}  // namespace fusex::detail
