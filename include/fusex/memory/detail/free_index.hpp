#pragma once
/// \file
/// A two-level segregated-fit index (TLSF) of free blocks: O(1) insert, remove and search, eight
/// bins per power of two, bitmaps to find the first non-empty bin. Plain C++ over any block type
/// with the fields `addr`, `size`, `next_free`, `prev_free` and `bin`.

#include <fusex/memory/detail/arena_util.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace fusex::detail {

/// TLSF bin of a size (>= arena_granule): eight bins per power of two.
inline int tlsf_bin(std::size_t size) noexcept {
  const int f = floor_log2(size);
  const int s = static_cast<int>((size >> (f - 3)) & 7u);
  return (f - arena_granule_log2) * 8 + s;
}
/// Smallest size of a TLSF bin.
inline std::size_t tlsf_lower_bound(int bin) noexcept {
  const int f = bin / 8 + arena_granule_log2;
  const std::size_t s = static_cast<std::size_t>(bin % 8);
  return (8 + s) << (f - 3);
}

template <class Block>
class free_index {
 public:
  static constexpr int sl_log2 = 3;
  static constexpr int sl_count = 1 << sl_log2;
  // First-level index f covers sizes [2^(f + 8), 2^(f + 9)); sizes reach 2^63.
  static constexpr int fl_count = 64 - arena_granule_log2;
  static constexpr int bin_count = fl_count * sl_count;

  free_index() {
    heads_.fill(nullptr);
    sl_bitmap_.fill(0);
  }
  free_index(const free_index&) = delete;
  free_index& operator=(const free_index&) = delete;

  void insert(Block* b) noexcept {
    const int bin = bin_of(b->size);
    b->bin = static_cast<std::uint32_t>(bin);
    b->prev_free = nullptr;
    b->next_free = heads_[bin];
    if (heads_[bin] != nullptr) heads_[bin]->prev_free = b;
    heads_[bin] = b;
    const int f = bin / sl_count;
    fl_bitmap_ |= std::uint64_t{1} << f;
    sl_bitmap_[f] |= std::uint8_t(1u << (bin % sl_count));
    bytes_ += b->size;
    ++count_;
  }

  void remove(Block* b) noexcept {
    const int bin = static_cast<int>(b->bin);
    if (b->prev_free != nullptr) b->prev_free->next_free = b->next_free;
    else heads_[bin] = b->next_free;
    if (b->next_free != nullptr) b->next_free->prev_free = b->prev_free;
    b->next_free = b->prev_free = nullptr;
    if (heads_[bin] == nullptr) {
      const int f = bin / sl_count;
      sl_bitmap_[f] &= std::uint8_t(~(1u << (bin % sl_count)));
      if (sl_bitmap_[f] == 0) fl_bitmap_ &= ~(std::uint64_t{1} << f);
    }
    bytes_ -= b->size;
    --count_;
  }

  /// A free block that can hold `bytes` (a multiple of the granule) at `alignment`, or null.
  /// Looks first for the best fit among the first blocks of the request's own bin, then takes the
  /// first block of the smallest non-empty bin whose every block fits.
  Block* find(std::size_t bytes, std::size_t alignment) const noexcept {
    if (count_ == 0) return nullptr;
    const int own = bin_of(bytes);
    Block* best = nullptr;
    int scanned = 0;
    for (Block* b = heads_[own]; b != nullptr && scanned < 32; b = b->next_free, ++scanned) {
      if (fits(b, bytes, alignment) && (best == nullptr || b->size < best->size)) {
        best = b;
        if (b->size == bytes) break;
      }
    }
    if (best != nullptr) return best;
    // Every block of a bin whose lower bound is >= need fits whatever its address.
    const std::size_t need = bytes + (alignment > arena_granule ? alignment - arena_granule : 0);
    int bin = bin_of(need);
    if (lower_bound(bin) < need) ++bin;
    if (bin <= own) bin = own + 1;
    if (bin >= bin_count) return nullptr;
    int f = bin / sl_count;
    const unsigned s = static_cast<unsigned>(bin % sl_count);
    unsigned sl = sl_bitmap_[f] & (~0u << s) & 0xFFu;
    if (sl == 0) {
      if (f + 1 >= fl_count) return nullptr;
      const std::uint64_t fl = fl_bitmap_ & (~std::uint64_t{0} << (f + 1));
      if (fl == 0) return nullptr;
      f = count_trailing_zeros(fl);
      sl = sl_bitmap_[f];
    }
    return heads_[f * sl_count + count_trailing_zeros(sl)];
  }

  /// The largest block (for statistics and error messages).
  std::size_t largest() const noexcept {
    if (fl_bitmap_ == 0) return 0;
    const int f = floor_log2(fl_bitmap_);
    const int s = floor_log2(sl_bitmap_[f]);
    std::size_t m = 0;
    for (Block* b = heads_[f * sl_count + s]; b != nullptr; b = b->next_free) m = b->size > m ? b->size : m;
    return m;
  }

  /// Calls f(block) for every block (f must not modify the index).
  template <class F>
  void for_each(F&& f) const {
    for (Block* h : heads_)
      for (Block* b = h; b != nullptr; b = b->next_free) f(b);
  }

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t count() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }

  static bool fits(const Block* b, std::size_t bytes, std::size_t alignment) noexcept {
    const std::uintptr_t start = (b->addr + alignment - 1) & ~(static_cast<std::uintptr_t>(alignment) - 1);
    return start + bytes <= b->addr + b->size;
  }
  static int bin_of(std::size_t size) noexcept { return tlsf_bin(size); }
  static std::size_t lower_bound(int bin) noexcept { return tlsf_lower_bound(bin); }

 private:
  std::array<Block*, bin_count> heads_;
  std::array<std::uint8_t, fl_count> sl_bitmap_;
  std::uint64_t fl_bitmap_ = 0;
  std::size_t bytes_ = 0;
  std::size_t count_ = 0;
};

}  // namespace fusex::detail
