#pragma once
/// \file
/// fusex::graph_exec: an instantiated CUDA graph made by fusex::graph_capture, with the
/// graph-private memory its replays use. Move-only.

#include <fusex/device/launch_hook.hpp>
#include <fusex/error.hpp>
#include <fusex/graph/capture_memory.hpp>
#include <fusex/graph/capture_rules.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fusex {

/// How graph_capture::finish_into brought a graph_exec up to date.
enum class graph_update {
  updated,         ///< cudaGraphExecUpdate changed the executable graph in place.
  reinstantiated,  ///< The update was refused (see reason); the new graph was instantiated.
  instantiated,    ///< The graph_exec was empty: the new graph was instantiated.
};

/// A short name for a cudaGraphExecUpdateResult.
inline const char* to_string(cudaGraphExecUpdateResult r) noexcept {
  switch (r) {
    case cudaGraphExecUpdateSuccess: return "success";
    case cudaGraphExecUpdateError: return "error";
    case cudaGraphExecUpdateErrorTopologyChanged: return "topology changed";
    case cudaGraphExecUpdateErrorNodeTypeChanged: return "node type changed";
    case cudaGraphExecUpdateErrorFunctionChanged: return "kernel function changed";
    case cudaGraphExecUpdateErrorParametersChanged: return "parameters changed unsupportedly";
    case cudaGraphExecUpdateErrorNotSupported: return "not supported";
    case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return "unsupported kernel function change";
    case cudaGraphExecUpdateErrorAttributesChanged: return "attributes changed";
  }
  return "unknown";
}

inline const char* to_string(graph_update u) noexcept {
  switch (u) {
    case graph_update::updated: return "updated";
    case graph_update::reinstantiated: return "reinstantiated";
    case graph_update::instantiated: return "instantiated";
  }
  return "unknown";
}

/// What graph_capture::finish_into did.
struct update_result {
  graph_update how = graph_update::instantiated;
  /// Why cudaGraphExecUpdate refused (how == reinstantiated); cudaGraphExecUpdateSuccess otherwise.
  cudaGraphExecUpdateResult reason = cudaGraphExecUpdateSuccess;

  bool updated() const noexcept { return how == graph_update::updated; }
};

class graph_capture;

namespace detail {
inline std::size_t count_nodes(cudaGraph_t g, bool kernels_only) {
  if (g == nullptr) return 0;
  std::size_t n = 0;
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  if (!kernels_only) return n;
  std::vector<cudaGraphNode_t> nodes(n);
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  std::size_t k = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    FUSEX_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    if (t == cudaGraphNodeTypeKernel) ++k;
  }
  return k;
}

// Bytes of the graph's memory allocation nodes (the graph memory of the cudaMallocAsync path).
inline std::size_t graph_alloc_bytes(cudaGraph_t g) {
  if (g == nullptr) return 0;
  std::size_t n = 0;
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  std::size_t bytes = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    FUSEX_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    if (t == cudaGraphNodeTypeMemAlloc) {
      cudaMemAllocNodeParams p{};
      FUSEX_CUDA_CHECK(cudaGraphMemAllocNodeGetParams(node, &p));
      bytes += p.bytesize;
    }
  }
  return bytes;
}

inline void report_noexcept(const char* what, const std::exception& e) noexcept {
  std::fprintf(stderr, "fusex: %s: %s\n", what, e.what());
}
}  // namespace detail

/// An instantiated graph and the graph-private memory its replays use. Made by
/// graph_capture::finish(); launched with launch(stream) any number of times. Each replay reads
/// and writes the addresses that were captured (see docs/graph.md, "inputs").
///
/// Not thread-safe: launch one graph_exec from one thread at a time. Launches of one graph_exec
/// are ordered after each other by CUDA, whatever their streams.
class graph_exec {
 public:
  /// An empty graph_exec (launching it throws).
  graph_exec() noexcept = default;

  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  graph_exec(graph_exec&& o) noexcept { swap(o); }
  graph_exec& operator=(graph_exec&& o) noexcept {
    if (this != &o) {
      graph_exec tmp(std::move(o));
      swap(tmp);
    }
    return *this;
  }
  /// Destroys the executable graph (safe while a launch is in flight: CUDA frees it when that
  /// completes) and returns the graph-private memory, ordered after the last launch.
  ~graph_exec() { destroy_noexcept(); }

  /// Replays the graph on `stream` (asynchronous). Throws fusex::capture_error for an empty
  /// graph_exec (rule empty_exec) or one whose memory was released (rule released_memory), and
  /// fusex::cuda_error when CUDA refuses the launch.
  void launch(cudaStream_t stream) {
    if (exec_ == nullptr) {
      throw capture_error(capture_rule::empty_exec,
                          "launch of an empty graph_exec (default-constructed, moved from, or whose capture "
                          "failed); make one with graph_capture::finish()");
    }
    if (released_) {
      throw capture_error(capture_rule::released_memory,
                          "launch of a graph_exec whose graph-private memory was released (release_memory()): "
                          "its replays would use memory that may now belong to other allocations; capture it "
                          "again (graph_capture::finish_into re-arms it)");
    }
    if (memory_ && stream != release_stream_) {
      if (detail::is_default_stream(stream)) {
        throw invalid_argument(
            "fusex: graph_exec::launch: a graph that holds a graph-private pool must be launched on "
            "a stream you created, not " +
            detail::stream_text(stream) + " (its memory is returned ordered after the stream of its last launch)");
      }
      memory_->set_release_stream(stream);
      release_stream_ = stream;
    }
    const cudaError_t err = cudaGraphLaunch(exec_, stream);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_error(err, "cudaGraphLaunch(exec, stream)", __FILE__, __LINE__);
    }
    ++launches_;
    detail::note_graph_launch();  // fusex::launch_monitor
  }

  /// Uploads the graph to the device ahead of its first launch (optional; the first launch does it
  /// otherwise).
  void upload(cudaStream_t stream) {
    if (exec_ == nullptr) throw capture_error(capture_rule::empty_exec, "upload of an empty graph_exec");
    FUSEX_CUDA_CHECK(cudaGraphUpload(exec_, stream));
  }

  /// Returns the graph-private memory now (ordered after the last launch). Launching afterwards
  /// throws capture_error (rule released_memory) until graph_capture::finish_into re-arms it.
  void release_memory() {
    std::unique_ptr<capture_pool> m = std::move(memory_);
    m.reset();  // ordered after the last launch: launch() keeps the pool's release stream current
    alloc_bytes_ = 0;
    released_ = true;
  }

  /// True unless empty.
  explicit operator bool() const noexcept { return exec_ != nullptr; }
  /// True after release_memory().
  bool released() const noexcept { return released_; }
  /// The executable graph.
  cudaGraphExec_t native_handle() const noexcept { return exec_; }
  /// The captured graph it was instantiated from (owned by this object; for inspection).
  cudaGraph_t graph() const noexcept { return graph_; }
  /// Nodes of the captured graph.
  std::size_t node_count() const { return detail::count_nodes(graph_, false); }
  /// Kernel nodes of the captured graph.
  std::size_t kernel_node_count() const { return detail::count_nodes(graph_, true); }
  /// Bytes of memory held for the replays: the graph-private pool's reservation, or (without a
  /// pool) the bytes of the graph's memory allocation nodes.
  std::size_t memory_bytes() const {
    if (memory_) return memory_->bytes_reserved();
    return alloc_bytes_;
  }
  /// Whether a graph-private pool is held.
  bool has_private_pool() const noexcept { return static_cast<bool>(memory_); }
  /// Launches so far.
  std::uint64_t launches() const noexcept { return launches_; }
  /// The stream that was captured.
  cudaStream_t capture_stream() const noexcept { return capture_stream_; }

  void swap(graph_exec& o) noexcept {
    std::swap(exec_, o.exec_);
    std::swap(graph_, o.graph_);
    std::swap(memory_, o.memory_);
    std::swap(capture_stream_, o.capture_stream_);
    std::swap(release_stream_, o.release_stream_);
    std::swap(alloc_bytes_, o.alloc_bytes_);
    std::swap(launches_, o.launches_);
    std::swap(released_, o.released_);
  }

 private:
  friend class graph_capture;

  graph_exec(cudaGraphExec_t exec, cudaGraph_t graph, std::unique_ptr<capture_pool> memory, cudaStream_t stream,
             std::size_t alloc_bytes) noexcept
      : exec_(exec),
        graph_(graph),
        memory_(std::move(memory)),
        capture_stream_(stream),
        release_stream_(stream),
        alloc_bytes_(alloc_bytes) {}

  // Replaces the graph and memory after an in-place update (exec kept) or a re-instantiation
  // (exec replaced). The previous memory is returned ordered after the last launch (launch()
  // keeps the pool's release stream on the stream of the last launch).
  void adopt(cudaGraphExec_t exec, cudaGraph_t graph, std::unique_ptr<capture_pool> memory, cudaStream_t stream,
             std::size_t alloc_bytes) noexcept {
    if (exec_ != nullptr && exec != exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr && graph != graph_) (void)cudaGraphDestroy(graph_);
    release_memory_noexcept();
    exec_ = exec;
    graph_ = graph;
    memory_ = std::move(memory);
    capture_stream_ = stream;
    release_stream_ = stream;  // the new pool was made (and is released by default) on `stream`
    alloc_bytes_ = alloc_bytes;
    released_ = false;
  }

  void release_memory_noexcept() noexcept {
    try {
      memory_.reset();
    } catch (const std::exception& e) {
      detail::report_noexcept("graph_exec: returning the graph-private memory failed", e);
    }
  }

  void destroy_noexcept() noexcept {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
    release_memory_noexcept();
  }

  cudaGraphExec_t exec_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  std::unique_ptr<capture_pool> memory_;
  cudaStream_t capture_stream_ = nullptr;
  cudaStream_t release_stream_ = nullptr;
  std::size_t alloc_bytes_ = 0;
  std::uint64_t launches_ = 0;
  bool released_ = false;
};

}  // namespace fusex
