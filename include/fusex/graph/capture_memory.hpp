#pragma once
/// \file
/// Memory during graph capture: the integration point between fusex::graph_capture and memory
/// resources.
///
/// Just before a stream is captured, the guard asks its fusex::capture_memory for the
/// fusex::capture_pool(s) of that capture: graph-private memory. Allocations made through the
/// resource while the stream (or a side stream forked into the capture) is captured come from that
/// pool; the pool never grows, polls events or synchronises during the capture; memory freed inside
/// the capture is reusable later in the same graph; memory allocated before the capture and freed
/// inside it is kept until the graph is gone. The graph_exec made from the capture owns the pool
/// and keeps it alive for its replays; destroying the graph_exec returns the memory, ordered after
/// its last launch.
///
/// Strategy: reserved memory. fusex::arena (the default resource) reserves each capture's pool
/// before the capture begins (private_pool_options::reserve_bytes) and routes the capture's
/// allocations to it; an allocation the pool cannot satisfy throws fusex::bad_alloc naming the
/// shortfall instead of growing. Resources that are not arenas keep their own behaviour: with
/// fusex::cuda_async_resource, allocations inside a capture become graph memory nodes (graph-safe;
/// see docs/graph.md for their limits).
///
/// The capture_memory of a capture (capture_options::memory):
///  - default (automatic): a pool of the current device's default resource if it is a
///    fusex::arena (it is, unless set_default_resource replaced it);
///  - fusex::arena_capture_memory(my_arena, options): a pool of that arena (combine several with
///    operator+, e.g. `capture_memory() + arena_capture_memory(my_arena)` for the default arena and
///    one's own);
///  - capture_memory::none(): no pool (captures that allocate nothing, or resources of their own).

#include <fusex/error.hpp>
#include <fusex/memory/arena.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusex {

/// The graph-private memory of one capture (see the file comment). Implemented by memory
/// resources; owned first by the capture guard, then by the graph_exec made from the capture.
/// Destroying it returns the memory, ordered after the release stream's work.
class capture_pool {
 public:
  virtual ~capture_pool() = default;
  /// Called once, right after cudaStreamEndCapture (also when the capture failed or was
  /// abandoned): stop routing allocations to this pool.
  virtual void end_capture() = 0;
  /// The stream whose work (the graph's last launch) must finish before the memory is reused once
  /// the pool is destroyed.
  virtual void set_release_stream(cudaStream_t stream) = 0;
  /// Bytes the pool holds.
  virtual std::size_t bytes_reserved() const = 0;
  /// Bytes of requests the pool had to refuse during its capture (reserve that much more).
  virtual std::size_t shortfall_bytes() const { return 0; }
};

namespace detail {

// Adapter over an arena's graph-private pools: `arena.begin_private_pool(origin, options)`
// returns an owning handle, `arena.end_private_pool(handle)` ends the routing, the handle's
// destructor returns the memory (ordered on `handle.set_release_stream(...)`), and
// `handle.bytes_reserved()` / `handle.shortfall_bytes()` report on it. fusex::arena provides
// this; any type of that shape works.
template <class Arena, class Options>
class arena_capture_pool final : public capture_pool {
 public:
  using handle_type = std::decay_t<decltype(std::declval<Arena&>().begin_private_pool(std::declval<cudaStream_t>(),
                                                                                      std::declval<const Options&>()))>;

  arena_capture_pool(Arena& arena, cudaStream_t origin, const Options& options)
      : arena_(&arena), handle_(arena.begin_private_pool(origin, options)) {}

  arena_capture_pool(const arena_capture_pool&) = delete;
  arena_capture_pool& operator=(const arena_capture_pool&) = delete;

  ~arena_capture_pool() override {
    if (capturing_) {
      try {
        end_capture();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fusex: ending a graph-private pool's capture failed: %s\n", e.what());
      }
    }
    // handle_'s destructor returns the memory.
  }

  void end_capture() override {
    if (capturing_) {
      capturing_ = false;
      arena_->end_private_pool(handle_);
    }
  }
  void set_release_stream(cudaStream_t stream) override { handle_.set_release_stream(stream); }
  std::size_t bytes_reserved() const override { return handle_.bytes_reserved(); }
  std::size_t shortfall_bytes() const override { return handle_.shortfall_bytes(); }

  handle_type& handle() noexcept { return handle_; }

 private:
  Arena* arena_;
  handle_type handle_;
  bool capturing_ = true;
};

// Several pools (several arenas) as one.
class composite_capture_pool final : public capture_pool {
 public:
  explicit composite_capture_pool(std::vector<std::unique_ptr<capture_pool>> pools) : pools_(std::move(pools)) {}
  void end_capture() override {
    std::exception_ptr first;
    for (auto& p : pools_) {
      try {
        p->end_capture();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
  void set_release_stream(cudaStream_t stream) override {
    for (auto& p : pools_) p->set_release_stream(stream);
  }
  std::size_t bytes_reserved() const override {
    std::size_t b = 0;
    for (const auto& p : pools_) b += p->bytes_reserved();
    return b;
  }
  std::size_t shortfall_bytes() const override {
    std::size_t b = 0;
    for (const auto& p : pools_) b += p->shortfall_bytes();
    return b;
  }

 private:
  std::vector<std::unique_ptr<capture_pool>> pools_;
};

}  // namespace detail

/// Where allocations made during a capture go (see the file comment). Cheap to copy.
class capture_memory {
 public:
  using factory = std::function<std::unique_ptr<capture_pool>(cudaStream_t origin)>;

  /// Automatic: a pool of the current device's default resource when it is a fusex::arena,
  /// reserved with the capture's capture_options::pool.
  capture_memory() = default;
  /// No graph-private pool at all.
  static capture_memory none() {
    capture_memory m;
    m.automatic_ = false;
    return m;
  }
  /// A pool from `make(origin)`, called just before `origin` is captured. `identity` (for
  /// instance the resource's address) keeps one resource from getting two pools when memories are
  /// combined.
  static capture_memory from(factory make, const void* identity = nullptr) {
    capture_memory m = none();
    m.sources_.push_back(source{identity, std::move(make)});
    return m;
  }

  /// Both memories: every pool of `a` and of `b` (a resource named by both gets one pool).
  friend capture_memory operator+(capture_memory a, const capture_memory& b) {
    a.automatic_ = a.automatic_ || b.automatic_;
    for (const source& s : b.sources_) a.sources_.push_back(s);
    return a;
  }

  /// True for the default (automatic) memory.
  bool automatic() const noexcept { return automatic_; }
  /// True for capture_memory::none().
  bool is_none() const noexcept { return !automatic_ && sources_.empty(); }

  /// The pool for a capture about to begin on `origin` (null when there is none).
  /// `automatic_options` reserves the default arena's pool in automatic mode.
  std::unique_ptr<capture_pool> begin(cudaStream_t origin, const private_pool_options& automatic_options) const {
    std::vector<std::unique_ptr<capture_pool>> pools;
    std::vector<const void*> seen;
    for (const source& s : sources_) {
      if (s.identity != nullptr && contains(seen, s.identity)) continue;
      if (auto p = s.make(origin)) pools.push_back(std::move(p));
      if (s.identity != nullptr) seen.push_back(s.identity);
    }
    if (automatic_) {
      if (arena* a = get_default_resource().target<arena>()) {
        if (!contains(seen, a)) {
          pools.push_back(
              std::make_unique<detail::arena_capture_pool<arena, private_pool_options>>(*a, origin, automatic_options));
        }
      }
    }
    if (pools.empty()) return nullptr;
    if (pools.size() == 1) return std::move(pools.front());
    return std::make_unique<detail::composite_capture_pool>(std::move(pools));
  }

 private:
  struct source {
    const void* identity;
    factory make;
  };
  static bool contains(const std::vector<const void*>& v, const void* p) {
    for (const void* q : v)
      if (q == p) return true;
    return false;
  }

  bool automatic_ = true;
  std::vector<source> sources_;
};

/// Graph-private pools from `arena`, one per capture, each reserved with `options` before its
/// capture begins. The arena must outlive every graph_exec captured with it. Works with
/// fusex::arena and any type of the same shape (`begin_private_pool(cudaStream_t, const Options&)
/// -> Handle`, `end_private_pool(Handle&)`, a movable Handle with `set_release_stream`,
/// `bytes_reserved` and `shortfall_bytes`).
template <class Arena, class Options = private_pool_options>
capture_memory arena_capture_memory(Arena& arena, const Options& options = Options()) {
  Arena* a = &arena;
  return capture_memory::from(
      [a, options](cudaStream_t origin) -> std::unique_ptr<capture_pool> {
        return std::make_unique<detail::arena_capture_pool<Arena, Options>>(*a, origin, options);
      },
      static_cast<const void*>(a));
}

}  // namespace fusex
