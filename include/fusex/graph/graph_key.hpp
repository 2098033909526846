#pragma once
/// \file
/// Keys for fusex::graph_cache: fusex::graph_key (a short list of integers: shapes, a batch-size
/// bucket, flags; whatever identifies one captured graph) and fusex::batch_buckets (round a batch
/// size up to one of the captured sizes). Host-only code.

#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusex {

/// A cache key: up to `capacity` 64-bit integers, compared element by element. A shape is added
/// as its rank followed by its extents, so [2, 3] and [6], or ([2], [3]) and ([2, 3]), differ.
class graph_key {
 public:
  static constexpr int capacity = 32;

  graph_key() = default;
  /// A key of these values.
  graph_key(std::initializer_list<std::int64_t> values) {
    for (std::int64_t v : values) push(v);
  }

  /// A key made of each argument in turn (integers and shapes).
  template <class... A>
  static graph_key of(const A&... parts) {
    graph_key k;
    (k.add(parts), ...);
    return k;
  }

  /// Appends an integer (any integral type; bool as 0 or 1).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  graph_key& add(I v) {
    return push(static_cast<std::int64_t>(v));
  }
  /// Appends a shape: its rank, then its extents.
  graph_key& add(const shape_t& s) {
    push(static_cast<std::int64_t>(s.rank()));
    for (std::int64_t e : s) push(e);
    return *this;
  }

  int size() const noexcept { return n_; }
  std::int64_t operator[](int i) const noexcept { return v_[static_cast<std::size_t>(i)]; }
  const std::int64_t* begin() const noexcept { return v_.data(); }
  const std::int64_t* end() const noexcept { return v_.data() + n_; }

  /// A 64-bit hash of the values and their count (splitmix64 finaliser per step).
  std::size_t hash() const noexcept {
    std::uint64_t h = 0x6a09e667f3bcc909ull ^ static_cast<std::uint64_t>(n_);
    for (int i = 0; i < n_; ++i) {
      const auto v = static_cast<std::uint64_t>(v_[static_cast<std::size_t>(i)]);
      h = mix(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
    }
    return static_cast<std::size_t>(mix(h));
  }

  /// "(2, 16, 784)"
  std::string str() const {
    std::string s = "(";
    for (int i = 0; i < n_; ++i) s += (i ? ", " : "") + std::to_string(v_[static_cast<std::size_t>(i)]);
    return s + ")";
  }

  friend bool operator==(const graph_key& a, const graph_key& b) noexcept {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const graph_key& a, const graph_key& b) noexcept { return !(a == b); }

 private:
  graph_key& push(std::int64_t v) {
    if (n_ == capacity) {
      throw invalid_argument("fusex: graph_key holds at most " + std::to_string(capacity) + " values");
    }
    v_[static_cast<std::size_t>(n_++)] = v;
    return *this;
  }
  static std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::array<std::int64_t, capacity> v_{};
  int n_ = 0;
};

/// Rounds batch sizes up to a fixed set of sizes, as serving systems do: one graph is captured per
/// bucket and a batch is padded up to its bucket's size. Host-only.
class batch_buckets {
 public:
  /// Buckets of these sizes (positive; sorted and deduplicated here).
  explicit batch_buckets(std::vector<std::int64_t> sizes) : sizes_(std::move(sizes)) {
    if (sizes_.empty()) throw invalid_argument("fusex: batch_buckets needs at least one size");
    std::sort(sizes_.begin(), sizes_.end());
    sizes_.erase(std::unique(sizes_.begin(), sizes_.end()), sizes_.end());
    if (sizes_.front() <= 0) {
      throw invalid_argument("fusex: batch_buckets sizes must be positive (got " + std::to_string(sizes_.front()) +
                             ")");
    }
  }
  /// Powers of two from `smallest` up to the first power of two >= `largest` (1, 2, 4, 8, ...).
  static batch_buckets powers_of_two(std::int64_t smallest, std::int64_t largest) {
    if (smallest <= 0 || largest < smallest) {
      throw invalid_argument("fusex: batch_buckets::powers_of_two(" + std::to_string(smallest) + ", " +
                             std::to_string(largest) + "): need 0 < smallest <= largest");
    }
    std::vector<std::int64_t> s;
    std::int64_t b = 1;
    while (b < smallest) b *= 2;
    for (;; b *= 2) {
      s.push_back(b);
      if (b >= largest) break;
    }
    return batch_buckets(std::move(s));
  }

  /// The smallest bucket size >= n. Throws fusex::invalid_argument when n <= 0 or n exceeds the
  /// largest bucket (split the batch, or add a bucket).
  std::int64_t bucket_for(std::int64_t n) const {
    if (n <= 0) throw invalid_argument("fusex: batch_buckets: batch size " + std::to_string(n) + " is not positive");
    auto it = std::lower_bound(sizes_.begin(), sizes_.end(), n);
    if (it == sizes_.end()) {
      throw invalid_argument("fusex: batch_buckets: batch size " + std::to_string(n) + " exceeds the largest bucket (" +
                             std::to_string(sizes_.back()) + ")");
    }
    return *it;
  }
  /// The bucket sizes, ascending.
  const std::vector<std::int64_t>& sizes() const noexcept { return sizes_; }
  std::int64_t largest() const noexcept { return sizes_.back(); }

 private:
  std::vector<std::int64_t> sizes_;
};

}  // namespace fusex

namespace std {
template <>
struct hash<fusex::graph_key> {
  std::size_t operator()(const fusex::graph_key& k) const noexcept { return k.hash(); }
};
}  // namespace std
