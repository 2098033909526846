#pragma once
/// \file
/// Memory during graph capture: the integration point between fusex::graph_capture and memory
/// resources.
///
/// A capture may be given a fusex::capture_memory. Just before the stream is captured, the guard
/// asks it for a fusex::capture_pool: the graph-private memory of that one capture. Allocations
/// made through the resource while the stream is captured come from that pool; the pool never
/// grows, polls events or synchronises during the capture; memory freed inside the capture is
/// reusable later in the same graph; memory allocated before the capture and freed inside it is
/// kept until the graph is gone. The graph_exec made from the capture owns the pool and keeps it
/// alive for its replays; destroying the graph_exec returns the memory, ordered after its last
/// launch.
///
/// Two strategies, chosen by what the capture is given:
///  - fusex::arena_capture_memory(arena, options): reserved memory. The arena (fusex/memory)
///    reserves the pool before the capture begins and routes allocations of the capture to it.
///  - nothing (the default): the resource's own behaviour. With fusex's default resource
///    (cudaMallocAsync) allocations inside the capture become graph memory nodes, which CUDA
///    makes graph-safe (the graph owns that memory; graphs are instantiated with
///    cudaGraphInstantiateFlagAutoFreeOnLaunch). See docs/graph.md for its limits.

#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace fusex {

/// The graph-private memory of one capture (see the file comment). Implemented by memory
/// resources; owned first by the capture guard, then by the graph_exec made from the capture.
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
};

/// Where allocations made during a capture go: a factory of capture_pools, or nothing (the
/// default: each resource's own behaviour during capture). Cheap to copy.
class capture_memory {
 public:
  using factory = std::function<std::unique_ptr<capture_pool>(cudaStream_t origin)>;

  /// No graph-private pool.
  capture_memory() = default;
  /// A pool from `make(origin)`, called just before `origin` is captured.
  explicit capture_memory(factory make) : make_(std::move(make)) {}

  /// True when a pool will be made for each capture.
  explicit operator bool() const noexcept { return static_cast<bool>(make_); }

  /// The pool for a capture about to begin on `origin` (null without a factory).
  std::unique_ptr<capture_pool> begin(cudaStream_t origin) const {
    if (!make_) return nullptr;
    return make_(origin);
  }

 private:
  factory make_;
};

namespace detail {

// Adapter over an arena's graph-private pools: `arena.begin_private_pool(origin, options)`
// returns an owning handle, `arena.end_private_pool(handle)` ends the routing, the handle's
// destructor returns the memory (ordered on `handle.set_release_stream(...)`), and
// `handle.bytes_reserved()` reports its size. fusex::arena (include/fusex/memory/) provides this.
template <class Arena, class Options>
class arena_capture_pool final : public capture_pool {
 public:
  using handle_type = std::decay_t<decltype(std::declval<Arena&>().begin_private_pool(
      std::declval<cudaStream_t>(), std::declval<const Options&>()))>;

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

  handle_type& handle() noexcept { return handle_; }

 private:
  Arena* arena_;
  handle_type handle_;
  bool capturing_ = true;
};

}  // namespace detail

/// Graph-private pools from `arena`, one per capture, each reserved with `options` (the arena's
/// private_pool_options: reserve_bytes...) before its capture begins. The arena must outlive every
/// graph_exec captured with it.
///
/// Integration point with fusex::arena: any type with
/// `begin_private_pool(cudaStream_t, const Options&) -> Handle` and `end_private_pool(Handle&)`,
/// whose Handle is movable and has `set_release_stream(cudaStream_t)` and `bytes_reserved()`.
template <class Arena, class Options>
capture_memory arena_capture_memory(Arena& arena, const Options& options) {
  Arena* a = &arena;
  return capture_memory([a, options](cudaStream_t origin) -> std::unique_ptr<capture_pool> {
    return std::make_unique<detail::arena_capture_pool<Arena, Options>>(*a, origin, options);
  });
}

}  // namespace fusex
