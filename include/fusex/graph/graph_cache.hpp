#pragma once
/// \file
/// fusex::graph_cache: captured graphs by key (shapes, a batch-size bucket, whatever the caller
/// chooses). The first call for a key warms the work up, captures it and replays the graph; later
/// calls only replay. Bounded, least recently used entries evicted first, with statistics.
///
///     fusex::graph_cache cache({/*capacity=*/8});
///     const auto bucket = buckets.bucket_for(batch);          // pad the batch up to a bucket
///     cache.run(fusex::graph_key{bucket}, s, [&](cudaStream_t st) { forward(bucket, st); });
///
/// The bookkeeping (basic_graph_cache, detail::lru_map) is templated on the executable type and
/// on a policy that captures and launches, so that it is tested on the host without a GPU.

#include <fusex/error.hpp>
#include <fusex/graph/graph_capture.hpp>
#include <fusex/graph/graph_exec.hpp>
#include <fusex/graph/graph_key.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace fusex {

namespace detail {

/// A map of at most `capacity` entries that evicts the least recently used one. find() counts as
/// a use. Values stay at a stable address while they are in the map.
template <class Key, class Value, class Hash = std::hash<Key>, class Eq = std::equal_to<Key>>
class lru_map {
 public:
  explicit lru_map(std::size_t capacity) : capacity_(checked(capacity)) {}

  /// The value of `key` (now the most recently used), or null.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    if (it->second != order_.begin()) order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  /// The value of `key` without counting a use, or null.
  const Value* peek(const Key& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &it->second->second;
  }
  bool contains(const Key& key) const { return index_.count(key) != 0; }

  /// Inserts or replaces the value of `key` as the most recently used, first evicting least
  /// recently used entries so that the size stays within the capacity. Returns the number evicted.
  /// `on_evict(key, value)` is called for each before it is destroyed.
  template <class OnEvict>
  std::size_t insert(const Key& key, Value value, OnEvict&& on_evict) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return 0;
    }
    std::size_t evicted = 0;
    while (order_.size() >= capacity_) {
      evict_last(on_evict);
      ++evicted;
    }
    order_.emplace_front(key, std::move(value));
    try {
      index_.emplace(order_.front().first, order_.begin());
    } catch (...) {
      order_.pop_front();
      throw;
    }
    return evicted;
  }
  std::size_t insert(const Key& key, Value value) {
    return insert(key, std::move(value), [](const Key&, Value&) {});
  }

  /// Removes `key`; returns whether it was there.
  bool erase(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    auto pos = it->second;
    index_.erase(it);
    order_.erase(pos);
    return true;
  }
  void clear() {
    index_.clear();
    order_.clear();
  }

  /// Changes the capacity, evicting least recently used entries beyond it. Returns the number
  /// evicted.
  template <class OnEvict>
  std::size_t set_capacity(std::size_t capacity, OnEvict&& on_evict) {
    capacity_ = checked(capacity);
    std::size_t evicted = 0;
    while (order_.size() > capacity_) {
      evict_last(on_evict);
      ++evicted;
    }
    return evicted;
  }

  std::size_t size() const noexcept { return order_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return order_.empty(); }

  /// Visits (key, value) from the most to the least recently used.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& kv : order_) f(kv.first, kv.second);
  }
  template <class F>
  void for_each(F&& f) {
    for (auto& kv : order_) f(kv.first, kv.second);
  }

 private:
  static std::size_t checked(std::size_t c) {
    if (c == 0) throw invalid_argument("fusex: a graph cache needs a capacity of at least 1");
    return c;
  }
  template <class OnEvict>
  void evict_last(OnEvict& on_evict) {
    auto last = std::prev(order_.end());
    on_evict(last->first, last->second);
    index_.erase(last->first);
    order_.erase(last);
  }

  using list_t = std::list<std::pair<Key, Value>>;
  std::size_t capacity_;
  list_t order_;
  std::unordered_map<Key, typename list_t::iterator, Hash, Eq> index_;
};

}  // namespace detail

/// Statistics of a graph cache.
struct graph_cache_stats {
  std::uint64_t hits = 0;             ///< Calls that replayed a cached graph.
  std::uint64_t misses = 0;           ///< Calls that found no graph for their key.
  std::uint64_t captures = 0;         ///< Graphs captured (misses whose capture succeeded).
  std::uint64_t failed_captures = 0;  ///< Misses whose warm-up or capture threw.
  std::uint64_t evictions = 0;        ///< Graphs evicted to stay within the capacity.
  std::uint64_t launches = 0;         ///< Graph launches.
  std::size_t entries = 0;            ///< Graphs held now.
  std::size_t capacity = 0;           ///< The most graphs held.
  std::size_t memory_bytes = 0;       ///< Memory the held graphs keep for their replays.
};

/// The bookkeeping of a graph cache over any executable type. `Policy` provides
///
///     template <class Work> Exec capture(cudaStream_t, Work&);   // warm up, capture, return
///     void launch(Exec&, cudaStream_t);
///     std::size_t memory_bytes(const Exec&) const;
///
/// Not thread-safe: use one cache per thread (or lock around it).
template <class Key, class Exec, class Policy, class Hash = std::hash<Key>, class Eq = std::equal_to<Key>>
class basic_graph_cache {
 public:
  explicit basic_graph_cache(std::size_t capacity, Policy policy = Policy())
      : policy_(std::move(policy)), map_(capacity) {}

  basic_graph_cache(const basic_graph_cache&) = delete;
  basic_graph_cache& operator=(const basic_graph_cache&) = delete;

  /// Replays the graph of `key` on `stream`; on the first call for the key (or after its
  /// eviction), `work(stream)` is warmed up and captured first (the policy decides how), and the
  /// new graph is launched. `work` must enqueue the same work each time it is called for one key,
  /// on the stream it is given. Returns the graph. An exception from the warm-up or the capture
  /// leaves the cache as it was.
  template <class Work>
  Exec& run(const Key& key, cudaStream_t stream, Work&& work) {
    Exec& e = get(key, stream, work);
    policy_.launch(e, stream);
    ++stats_.launches;
    return e;
  }

  /// The graph of `key`, captured from `work` on `stream` if the cache has none; not launched.
  template <class Work>
  Exec& get(const Key& key, cudaStream_t stream, Work&& work) {
    if (Exec* e = map_.find(key)) {
      ++stats_.hits;
      return *e;
    }
    ++stats_.misses;
    Exec made = capture_counted(stream, work);
    insert(key, std::move(made));
    return *map_.find(key);
  }

  /// Captures `work` for `key` again, replacing the cached graph (or adding it).
  template <class Work>
  Exec& recapture(const Key& key, cudaStream_t stream, Work&& work) {
    Exec made = capture_counted(stream, work);
    insert(key, std::move(made));
    return *map_.find(key);
  }

  /// The cached graph of `key` (counted as a use, not as a hit), or null.
  Exec* find(const Key& key) { return map_.find(key); }
  bool contains(const Key& key) const { return map_.contains(key); }
  /// Drops the graph of `key`; returns whether there was one.
  bool erase(const Key& key) { return map_.erase(key); }
  /// Drops every graph.
  void clear() { map_.clear(); }
  /// Changes the capacity, evicting least recently used graphs beyond it.
  void set_capacity(std::size_t capacity) {
    stats_.evictions += map_.set_capacity(capacity, [](const Key&, Exec&) {});
  }

  std::size_t size() const noexcept { return map_.size(); }
  std::size_t capacity() const noexcept { return map_.capacity(); }

  /// Counters, plus the entries and the memory they hold now.
  graph_cache_stats stats() const {
    graph_cache_stats s = stats_;
    s.entries = map_.size();
    s.capacity = map_.capacity();
    s.memory_bytes = 0;
    map_.for_each([&](const Key&, const Exec& e) { s.memory_bytes += policy_.memory_bytes(e); });
    return s;
  }
  /// Zeroes the counters (not the entries).
  void reset_stats() noexcept { stats_ = graph_cache_stats(); }

  /// Visits (key, graph) from the most to the least recently used.
  template <class F>
  void for_each(F&& f) const {
    map_.for_each(f);
  }

  Policy& policy() noexcept { return policy_; }

 private:
  template <class Work>
  Exec capture_counted(cudaStream_t stream, Work& work) {
    try {
      Exec made = policy_.capture(stream, work);
      ++stats_.captures;
      return made;
    } catch (...) {
      ++stats_.failed_captures;
      throw;
    }
  }
  void insert(const Key& key, Exec made) {
    stats_.evictions += map_.insert(key, std::move(made), [](const Key&, Exec&) {});
  }

  Policy policy_;
  detail::lru_map<Key, Exec, Hash, Eq> map_;
  graph_cache_stats stats_;
};

/// Options of fusex::graph_cache.
struct graph_cache_options {
  /// The most graphs held; the least recently used one is evicted (and its memory returned) to
  /// make room.
  std::size_t capacity = 16;
  /// Eager runs of the work before its capture (lazy initialisation, allocator warm-up). Their
  /// results are overwritten by the graph's launch that follows the capture.
  int warmup_runs = 1;
  /// How each graph is captured (mode, graph-private memory, instantiation flags).
  capture_options capture{};
};

namespace detail {
/// graph_cache's policy: warm up, capture with fusex::graph_capture, launch.
struct graph_capture_policy {
  int warmup_runs = 1;
  capture_options options{};

  template <class Work>
  graph_exec capture(cudaStream_t stream, Work& work) const {
    for (int i = 0; i < warmup_runs; ++i) work(stream);
    graph_capture cap(stream, options);
    work(stream);
    return cap.finish();
  }
  static void launch(graph_exec& e, cudaStream_t stream) { e.launch(stream); }
  static std::size_t memory_bytes(const graph_exec& e) { return e.memory_bytes(); }
};
}  // namespace detail

/// Captured graphs by key (default: fusex::graph_key), replayed on later calls. See
/// basic_graph_cache for the interface and docs/graph.md for a bucketing example.
template <class Key = graph_key, class Hash = std::hash<Key>>
class graph_cache : public basic_graph_cache<Key, graph_exec, detail::graph_capture_policy, Hash> {
  using base = basic_graph_cache<Key, graph_exec, detail::graph_capture_policy, Hash>;

 public:
  explicit graph_cache(const graph_cache_options& options = graph_cache_options())
      : base(options.capacity, make_policy(options)) {}

 private:
  static detail::graph_capture_policy make_policy(const graph_cache_options& o) {
    if (o.warmup_runs < 0) throw invalid_argument("fusex: graph_cache_options::warmup_runs must be >= 0");
    detail::graph_capture_policy p;
    p.warmup_runs = o.warmup_runs;
    p.options = o.capture;
    return p;
  }
};

graph_cache()->graph_cache<>;
graph_cache(const graph_cache_options&)->graph_cache<>;

}  // namespace fusex
