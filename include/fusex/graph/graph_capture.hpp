#pragma once
/// \file
/// fusex::graph_capture: an RAII guard that captures the work enqueued on a stream into a CUDA
/// graph. finish() ends the capture and returns an instantiated fusex::graph_exec; leaving the
/// scope without finish() (an exception, an early return) ends and discards the capture and
/// leaves the stream usable, without ever masking the exception in flight.
///
///     cudaStream_t s;  // cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)
///     fusex::graph_exec g = [&] {
///       fusex::graph_capture cap(s);
///       fusex::eval(y, fusex::relu(x * w + b), s);  // recorded, not run
///       return cap.finish();
///     }();
///     g.launch(s);  // replays it
///
/// See docs/graph.md for the rules (memory during capture, side streams, inputs).

#include <fusex/error.hpp>
#include <fusex/graph/capture_memory.hpp>
#include <fusex/graph/capture_rules.hpp>
#include <fusex/graph/graph_exec.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fusex {

/// How a capture is made.
struct capture_options {
  /// Interaction with unsafe calls of this and other threads (default: local, i.e. CUDA's
  /// thread-local mode).
  capture_mode mode = capture_mode::local;
  /// Where allocations made during the capture go. Default (automatic): a graph-private pool of
  /// the current device's default arena. See fusex::arena_capture_memory, capture_memory::none()
  /// and docs/graph.md.
  capture_memory memory{};
  /// The reservation of the automatic pool (memory of explicit arena_capture_memory pools is set
  /// there). A capture that allocates more through the arena gets fusex::bad_alloc naming the
  /// shortfall; one that allocates nothing may set reserve_bytes to 0.
  private_pool_options pool{};
  /// Flags for cudaGraphInstantiateWithFlags. The default lets a graph that allocates memory it
  /// does not free be relaunched (CUDA frees the previous launch's allocations first).
  unsigned long long instantiate_flags = cudaGraphInstantiateFlagAutoFreeOnLaunch;
};

/// Captures the work enqueued on a stream (and on side streams forked from it) into a graph. Not
/// copyable or movable: a guard belongs to one scope and, in local and global modes, one thread.
class graph_capture {
 public:
  /// Begins capturing `stream` (a stream the caller created; never a default stream). Throws
  /// fusex::capture_error: rule default_stream for a default stream, nested_capture when the
  /// stream is already being captured (by a guard, as a side stream of a capture, or by anyone
  /// else). The capture's graph-private pool(s) (options.memory; by default one of the current
  /// device's default arena) are reserved before the capture begins.
  explicit graph_capture(cudaStream_t stream, capture_options options = capture_options())
      : stream_(stream), opts_(std::move(options)), thread_(std::this_thread::get_id()) {
    if (detail::is_default_stream(stream)) {
      throw capture_error(capture_rule::default_stream,
                          "cannot capture " + detail::stream_text(stream) +
                              ": CUDA does not capture the legacy default stream, and fusex captures only streams "
                              "the caller created (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))");
    }
    refuse_if_in_capture(stream, "graph_capture");
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    bool begun = false;
    try {
      memory_ = opts_.memory.begin(stream, opts_.pool);  // before the capture: pools reserve memory
      const cudaError_t err = cudaStreamBeginCapture(stream, detail::to_cuda(opts_.mode));
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        refuse_if_in_capture(stream, "graph_capture");  // lost a race with another capture
        throw cuda_error(err, "cudaStreamBeginCapture(stream, mode)", __FILE__, __LINE__);
      }
      begun = true;
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &st, &id_));
      detail::capture_registry::instance().add(detail::capture_entry{this, stream, id_, thread_, opts_.mode});
      active_ = true;
    } catch (...) {
      if (begun) {
        cudaGraph_t g = nullptr;
        (void)cudaStreamEndCapture(stream, &g);
        if (g != nullptr) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
      }
      end_memory_noexcept();
      memory_.reset();
      (void)cudaEventDestroy(event_);
      event_ = nullptr;
      throw;
    }
  }

  graph_capture(const graph_capture&) = delete;
  graph_capture& operator=(const graph_capture&) = delete;

  /// Abandons the capture if it is still in progress (see abandon()). Never throws.
  ~graph_capture() { abandon(); }

  /// Ends the capture and instantiates the graph. Throws fusex::capture_error: wrong_thread (a
  /// local or global capture finished on another thread: the capture continues and may still be
  /// finished on its own thread), unjoined_fork (a side stream was not joined back: the capture is
  /// discarded), invalidated (CUDA invalidated the capture: it is discarded), not_capturing (the
  /// capture already ended). After any other outcome the stream is no longer being captured.
  graph_exec finish() {
    cudaGraph_t g = end_capture("finish");
    const std::size_t alloc = alloc_bytes_or_destroy(g);
    cudaGraphExec_t e = instantiate(g);
    return graph_exec(e, g, std::move(memory_), stream_, alloc);
  }

  /// Ends the capture and brings `exec` up to date with the new graph: cudaGraphExecUpdate where
  /// CUDA accepts it (same topology, new addresses or scalars), else a new instantiation replacing
  /// `exec`'s; an empty `exec` is instantiated. `exec` then holds this capture's memory and
  /// returns its previous memory ordered after its last launch. Reports which path was taken.
  /// Throws as finish() does (exec is then unchanged).
  update_result finish_into(graph_exec& exec) {
    cudaGraph_t g = end_capture("finish_into");
    const std::size_t alloc = alloc_bytes_or_destroy(g);
    update_result r;
    if (!exec) {
      cudaGraphExec_t e = instantiate(g);
      exec.adopt(e, g, std::move(memory_), stream_, alloc);
      r.how = graph_update::instantiated;
      return r;
    }
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t err = cudaGraphExecUpdate(exec.native_handle(), g, &info);
    if (err == cudaSuccess) {
      exec.adopt(exec.native_handle(), g, std::move(memory_), stream_, alloc);
      r.how = graph_update::updated;
      r.reason = cudaGraphExecUpdateSuccess;
      return r;
    }
    (void)cudaGetLastError();
    r.how = graph_update::reinstantiated;
    r.reason = info.result == cudaGraphExecUpdateSuccess ? cudaGraphExecUpdateError : info.result;
    cudaGraphExec_t e = instantiate(g);
    exec.adopt(e, g, std::move(memory_), stream_, alloc);
    return r;
  }

  /// Makes `side` (a stream the caller created, not otherwise being captured) part of this
  /// capture: work enqueued on it from now on is captured and runs after the origin's work
  /// enqueued so far. Join it back with join(side) before finish() (or use fusex::scoped_fork).
  void fork(cudaStream_t side) {
    require_active("fork");
    if (detail::is_default_stream(side)) {
      throw capture_error(capture_rule::default_stream,
                          "cannot fork " + detail::stream_text(side) + " into a capture: use a stream you created");
    }
    if (side == stream_) throw invalid_argument("fusex: graph_capture::fork: the side stream is the origin stream");
    const bool again = std::find(forked_.begin(), forked_.end(), side) != forked_.end();
    if (!again) refuse_if_in_capture(side, "graph_capture::fork");
    FUSEX_CUDA_CHECK(cudaEventRecord(event_, stream_));
    FUSEX_CUDA_CHECK(cudaStreamWaitEvent(side, event_, 0));
    if (!again) forked_.push_back(side);
  }

  /// Makes the origin's later work wait for everything enqueued on `side` so far (a stream forked
  /// with fork(), or joined to this capture by the caller's own event wait).
  void join(cudaStream_t side) {
    require_active("join");
    auto it = std::find(forked_.begin(), forked_.end(), side);
    if (it == forked_.end()) {
      cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
      unsigned long long id = 0;
      FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(side, &st, &id));
      if (st == cudaStreamCaptureStatusNone || id != id_) {
        throw invalid_argument("fusex: graph_capture::join: " + detail::stream_text(side) +
                               " is not part of this capture (fork(side) first)");
      }
    }
    FUSEX_CUDA_CHECK(cudaEventRecord(event_, side));
    FUSEX_CUDA_CHECK(cudaStreamWaitEvent(stream_, event_, 0));
    if (it != forked_.end()) forked_.erase(it);
  }

  /// Ends the capture now and discards it; the stream (and every side stream) is then usable for
  /// ordinary work. Side streams still forked are joined first. No effect when the capture already
  /// ended. Never throws (problems are reported on stderr). In local and global modes it must run
  /// on the thread that began the capture (CUDA's rule); elsewhere it reports that and does nothing.
  void abandon() noexcept {
    if (!active_) return;
    if (opts_.mode != capture_mode::relaxed && std::this_thread::get_id() != thread_) {
      std::fprintf(stderr,
                   "fusex: graph_capture of %s abandoned on thread %s, but CUDA ends a %s-mode capture only on "
                   "the thread that began it (%s): the stream stays in capture until it is ended there\n",
                   detail::stream_text(stream_).c_str(), detail::thread_text(std::this_thread::get_id()).c_str(),
                   detail::mode_name(opts_.mode), detail::thread_text(thread_).c_str());
      // The guard is going away: forget it (CUDA's own checks still see the capture).
      active_ = false;
      detail::capture_registry::instance().remove(this);
      return;
    }
    join_all_noexcept();
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_, &g);
    if (g != nullptr) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();  // an invalidated capture's error must not surface in later checks
    after_end_noexcept();
    end_memory_noexcept();
    memory_.reset();
  }

  /// The captured (origin) stream.
  cudaStream_t stream() const noexcept { return stream_; }
  /// CUDA's id of the capture sequence.
  unsigned long long id() const noexcept { return id_; }
  /// The capture mode.
  capture_mode mode() const noexcept { return opts_.mode; }
  /// True until finish(), finish_into() or abandon() ended the capture.
  bool active() const noexcept { return active_; }
  /// CUDA's view of the capture: active, invalidated (finish() will throw), or none.
  cudaStreamCaptureStatus status() const {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    FUSEX_CUDA_CHECK(cudaStreamIsCapturing(stream_, &st));
    return st;
  }
  /// The graph-private pool of this capture, or null (none given, or already handed to a
  /// graph_exec).
  capture_pool* memory_pool() const noexcept { return memory_.get(); }
  /// Side streams forked and not yet joined.
  const std::vector<cudaStream_t>& forked_streams() const noexcept { return forked_; }

 private:
  // Refuses to start (or fork) a capture on a stream already in one.
  static void refuse_if_in_capture(cudaStream_t s, const char* what) {
    detail::capture_entry e;
    if (detail::capture_registry::instance().find_origin(s, &e)) {
      throw capture_error(capture_rule::nested_capture,
                          std::string(what) + " of " + detail::stream_text(s) + " while " + detail::describe(e) +
                              " is in progress: captures do not nest on one stream; finish the first capture, or "
                              "capture on another stream");
    }
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    FUSEX_CUDA_CHECK(cudaStreamGetCaptureInfo(s, &st, &id));
    if (st != cudaStreamCaptureStatusNone) {
      const bool ours = detail::capture_registry::instance().find_id(id, &e);
      throw capture_error(capture_rule::nested_capture,
                          std::string(what) + " of " + detail::stream_text(s) + ", which is already part of " +
                              (ours ? detail::describe(e) + " (as a side stream)"
                                    : "a capture not made by fusex (capture id " + std::to_string(id) + ")") +
                              ": a stream can be in one capture at a time; end that capture first");
    }
  }

  void require_active(const char* what) const {
    if (!active_) {
      throw capture_error(
          capture_rule::not_capturing,
          std::string(what) + " on a graph_capture of " + detail::stream_text(stream_) +
              " whose capture already ended (finished, abandoned or failed); begin a new graph_capture");
    }
  }

  static bool is_capture_error_code(cudaError_t e) noexcept {
    switch (e) {
      case cudaErrorStreamCaptureUnsupported:
      case cudaErrorStreamCaptureInvalidated:
      case cudaErrorStreamCaptureMerge:
      case cudaErrorStreamCaptureUnmatched:
      case cudaErrorStreamCaptureUnjoined:
      case cudaErrorStreamCaptureIsolation:
      case cudaErrorStreamCaptureImplicit:
      case cudaErrorCapturedEvent:
      case cudaErrorStreamCaptureWrongThread: return true;
      default: return false;
    }
  }

  // Ends the capture; returns the graph or throws. Afterwards the capture is over (except for the
  // wrong_thread and not_capturing errors, which change nothing).
  cudaGraph_t end_capture(const char* what) {
    require_active(what);
    if (opts_.mode != capture_mode::relaxed && std::this_thread::get_id() != thread_) {
      throw capture_error(capture_rule::wrong_thread,
                          std::string(what) + " called on thread " + detail::thread_text(std::this_thread::get_id()) +
                              " for the " + detail::mode_name(opts_.mode) + "-mode capture of " +
                              detail::stream_text(stream_) + " begun on thread " + detail::thread_text(thread_) +
                              ": CUDA ends a local or global capture only on the thread that began it; call " + what +
                              " there (the capture is still in progress), or capture in relaxed mode",
                          cudaErrorStreamCaptureWrongThread);
    }
    std::string unjoined;
    for (cudaStream_t s : forked_) unjoined += (unjoined.empty() ? "" : ", ") + detail::stream_text(s);
    join_all_noexcept();
    // The last error a call made during the capture left on this thread: when CUDA invalidated the
    // capture it is usually the refusal of the call that did it.
    const cudaError_t earlier = cudaPeekAtLastError();
    cudaGraph_t g = nullptr;
    const cudaError_t err = cudaStreamEndCapture(stream_, &g);
    if (err != cudaSuccess) (void)cudaGetLastError();
    after_end_noexcept();
    std::exception_ptr memory_failure;
    try {
      if (memory_) memory_->end_capture();
    } catch (...) {
      memory_failure = std::current_exception();
    }
    auto discard = [&] {
      if (g != nullptr) (void)cudaGraphDestroy(g);
      g = nullptr;
      memory_.reset();
    };
    if (!unjoined.empty()) {
      discard();
      throw capture_error(capture_rule::unjoined_fork,
                          "side stream(s) " + unjoined + " forked into the capture of " + detail::stream_text(stream_) +
                              " were not joined back before " + what +
                              "; fusex joined them and discarded the capture. Call join(side) after the side "
                              "stream's last work (or use fusex::scoped_fork)");
    }
    if (err == cudaErrorStreamCaptureUnjoined) {
      discard();
      throw capture_error(capture_rule::unjoined_fork,
                          "CUDA reports that a stream which joined the capture of " + detail::stream_text(stream_) +
                              " (through an event wait) was not joined back into it before " + what +
                              "; the capture is discarded. Record an event on every side stream after its last "
                              "work and make the origin wait on it (graph_capture::join does this)",
                          err);
    }
    if (err == cudaErrorStreamCaptureInvalidated || (err == cudaSuccess && g == nullptr)) {
      discard();
      std::string m = "CUDA invalidated the capture of " + detail::stream_text(stream_) + " before " + what +
                      ": an operation not permitted during capture was made (a synchronisation, "
                      "an event or stream query, cudaMalloc, work on the legacy default stream, a wait on an event "
                      "recorded outside the capture in another capture...). The capture is discarded and the stream "
                      "usable.";
      if (is_capture_error_code(earlier)) {
        m += std::string(" The call that broke it returned ") + cudaGetErrorName(earlier) + " (" +
             cudaGetErrorString(earlier) + "); check the return codes of the calls made during the capture.";
      }
      throw capture_error(capture_rule::invalidated, m, err == cudaSuccess ? earlier : err);
    }
    if (err != cudaSuccess) {
      discard();
      if (is_capture_error_code(err)) {
        throw capture_error(capture_rule::invalidated,
                            std::string("cudaStreamEndCapture failed with ") + cudaGetErrorName(err) + " (" +
                                cudaGetErrorString(err) + ") for the capture of " + detail::stream_text(stream_) +
                                "; the capture is discarded",
                            err);
      }
      throw cuda_error(err, "cudaStreamEndCapture(stream, &graph)", __FILE__, __LINE__);
    }
    if (memory_failure) {
      discard();
      std::rethrow_exception(memory_failure);
    }
    return g;
  }

  std::size_t alloc_bytes_or_destroy(cudaGraph_t g) {
    if (memory_) return 0;
    try {
      return detail::graph_alloc_bytes(g);
    } catch (...) {
      (void)cudaGraphDestroy(g);
      throw;
    }
  }

  cudaGraphExec_t instantiate(cudaGraph_t g) {
    cudaGraphExec_t e = nullptr;
    const cudaError_t err = cudaGraphInstantiateWithFlags(&e, g, opts_.instantiate_flags);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaGraphDestroy(g);
      memory_.reset();
      throw cuda_error(err, "cudaGraphInstantiateWithFlags(&exec, graph, flags)", __FILE__, __LINE__);
    }
    return e;
  }

  void join_all_noexcept() noexcept {
    for (cudaStream_t s : forked_) {
      if (cudaEventRecord(event_, s) == cudaSuccess) (void)cudaStreamWaitEvent(stream_, event_, 0);
    }
    forked_.clear();
  }

  void after_end_noexcept() noexcept {
    active_ = false;
    detail::capture_registry::instance().remove(this);
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }

  void end_memory_noexcept() noexcept {
    if (!memory_) return;
    try {
      memory_->end_capture();
    } catch (const std::exception& e) {
      detail::report_noexcept("graph_capture: ending the graph-private pool's capture failed", e);
    }
  }

  cudaStream_t stream_;
  capture_options opts_;
  std::thread::id thread_;
  unsigned long long id_ = 0;
  cudaEvent_t event_ = nullptr;
  std::unique_ptr<capture_pool> memory_;
  std::vector<cudaStream_t> forked_;
  bool active_ = false;
};

}  // namespace fusex
