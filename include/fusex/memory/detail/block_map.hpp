#pragma once
/// \file
/// The arena's address -> block map: every block (live, cached or free) is found by its start
/// address. Sharded 64 ways with a spin lock per shard, so that frees from many threads rarely
/// meet; each shard is an open-addressing table with linear probing and backward-shift deletion.
/// Mutated only by the arena's slow path (under its mutex, when blocks are split or merged); read
/// by every deallocation.

#include <fusex/memory/detail/arena_util.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fusex::detail {

template <class Block>
class block_map {
 public:
  static constexpr std::size_t shard_count = 64;

  block_map() = default;
  block_map(const block_map&) = delete;
  block_map& operator=(const block_map&) = delete;

  void insert(std::uintptr_t key, Block* b) {
    shard& s = shard_of(key);
    spin_guard g(s.lock);
    if ((s.count + 1) * 2 > s.slots.size()) grow(s);
    if (place(s, key, b)) ++s.count;
  }

  void erase(std::uintptr_t key) noexcept {
    shard& s = shard_of(key);
    spin_guard g(s.lock);
    if (s.slots.empty()) return;
    const std::size_t mask = s.slots.size() - 1;
    std::size_t i = home(key, mask);
    while (s.slots[i].key != key) {
      if (s.slots[i].key == 0) return;
      i = (i + 1) & mask;
    }
    // Backward-shift deletion: move later members of the probe run into the hole.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask; s.slots[j].key != 0; j = (j + 1) & mask) {
      const std::size_t h = home(s.slots[j].key, mask);
      const bool movable = hole <= j ? (h <= hole || h > j) : (h <= hole && h > j);
      if (movable) {
        s.slots[hole] = s.slots[j];
        hole = j;
      }
    }
    s.slots[hole] = slot{};
    --s.count;
  }

  /// Looks `key` up and, under the shard's lock, calls f(Block* or nullptr) and returns its result.
  template <class F>
  auto with(std::uintptr_t key, F&& f) {
    shard& s = shard_of(key);
    spin_guard g(s.lock);
    return f(find_locked(s, key));
  }

  Block* find(std::uintptr_t key) {
    return with(key, [](Block* b) { return b; });
  }

  std::size_t size() {
    std::size_t n = 0;
    for (shard& s : shards_) {
      spin_guard g(s.lock);
      n += s.count;
    }
    return n;
  }

 private:
  struct slot {
    std::uintptr_t key = 0;
    Block* value = nullptr;
  };
  struct alignas(64) shard {
    spinlock lock;
    std::vector<slot> slots;
    std::size_t count = 0;
  };

  static std::uint64_t hash(std::uintptr_t key) noexcept {
    return (static_cast<std::uint64_t>(key) >> arena_granule_log2) * 0x9E3779B97F4A7C15ull;
  }
  shard& shard_of(std::uintptr_t key) noexcept { return shards_[hash(key) >> 58]; }
  static std::size_t home(std::uintptr_t key, std::size_t mask) noexcept {
    return static_cast<std::size_t>(hash(key) >> 20) & mask;
  }
  static Block* find_locked(shard& s, std::uintptr_t key) noexcept {
    if (s.slots.empty()) return nullptr;
    const std::size_t mask = s.slots.size() - 1;
    for (std::size_t i = home(key, mask);; i = (i + 1) & mask) {
      if (s.slots[i].key == key) return s.slots[i].value;
      if (s.slots[i].key == 0) return nullptr;
    }
  }
  // Returns true when `key` was not there before.
  static bool place(shard& s, std::uintptr_t key, Block* b) noexcept {
    const std::size_t mask = s.slots.size() - 1;
    std::size_t i = home(key, mask);
    while (s.slots[i].key != 0 && s.slots[i].key != key) i = (i + 1) & mask;
    const bool fresh = s.slots[i].key == 0;
    s.slots[i] = slot{key, b};
    return fresh;
  }
  static void grow(shard& s) {
    std::vector<slot> old;
    old.swap(s.slots);
    s.slots.assign(old.empty() ? 64 : old.size() * 2, slot{});
    for (const slot& e : old)
      if (e.key != 0) place(s, e.key, e.value);
  }

  shard shards_[shard_count];
};

}  // namespace fusex::detail
