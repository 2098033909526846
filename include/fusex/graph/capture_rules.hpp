#pragma once
/// \file
/// The rules of graph capture as fusex enforces them: capture modes, fusex::capture_error (which
/// names the rule that was broken), the registry of fusex's active captures, and synchronising
/// helpers that refuse to run where they would invalidate a capture.

#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fusex {

/// How a capture interacts with "potentially unsafe" CUDA calls (cudaMalloc, synchronisation,
/// event queries) made while it is in progress. See cudaThreadExchangeStreamCaptureMode.
enum class capture_mode {
  /// cudaStreamCaptureModeThreadLocal (fusex's default): unsafe calls are refused on the thread
  /// that captures; other threads are unaffected.
  local,
  /// cudaStreamCaptureModeGlobal: unsafe calls are refused on every thread (other threads in
  /// global mode) while the capture is in progress.
  global,
  /// cudaStreamCaptureModeRelaxed: no call is refused for being unsafe; calls that necessarily
  /// conflict with the capture still fail. The capture may be finished on any thread.
  relaxed,
};

/// The rule a fusex::capture_error reports.
enum class capture_rule {
  default_stream,       ///< The legacy (or per-thread) default stream cannot be captured.
  nested_capture,       ///< A stream can be in one capture at a time (guards do not nest on a stream).
  wrong_thread,         ///< A local or global capture must be finished on the thread that began it.
  sync_during_capture,  ///< No synchronisation, event query or allocator growth while capturing.
  unjoined_fork,        ///< Every side stream forked into a capture must join back before it ends.
  invalidated,          ///< CUDA invalidated the capture (an operation not permitted during capture).
  released_memory,      ///< A graph_exec whose memory was released cannot be launched.
  empty_exec,           ///< An empty (default-constructed or moved-from) graph_exec cannot be launched.
  not_capturing,        ///< The guard's capture already ended (finished, abandoned or failed).
};

/// A short name of a rule, as it appears in messages.
inline const char* to_string(capture_rule r) noexcept {
  switch (r) {
    case capture_rule::default_stream: return "default_stream";
    case capture_rule::nested_capture: return "nested_capture";
    case capture_rule::wrong_thread: return "wrong_thread";
    case capture_rule::sync_during_capture: return "sync_during_capture";
    case capture_rule::unjoined_fork: return "unjoined_fork";
    case capture_rule::invalidated: return "invalidated";
    case capture_rule::released_memory: return "released_memory";
    case capture_rule::empty_exec: return "empty_exec";
    case capture_rule::not_capturing: return "not_capturing";
  }
  return "unknown";
}

/// A rule of graph capture was broken. what() reads
/// "fusex: graph capture rule <name> broken: <what happened and what to do>". When CUDA reported
/// the problem, cuda_code() is its error (else cudaSuccess).
class capture_error : public error {
 public:
  capture_error(capture_rule rule, const std::string& message, cudaError_t cuda_code = cudaSuccess)
      : error(std::string("fusex: graph capture rule ") + to_string(rule) + " broken: " + message),
        rule_(rule),
        code_(cuda_code) {}

  /// The rule that was broken.
  capture_rule rule() const noexcept { return rule_; }
  /// The CUDA error that reported it, or cudaSuccess when fusex detected it first.
  cudaError_t cuda_code() const noexcept { return code_; }

 private:
  capture_rule rule_;
  cudaError_t code_;
};

namespace detail {

inline cudaStreamCaptureMode to_cuda(capture_mode m) noexcept {
  switch (m) {
    case capture_mode::global: return cudaStreamCaptureModeGlobal;
    case capture_mode::relaxed: return cudaStreamCaptureModeRelaxed;
    case capture_mode::local: break;
  }
  return cudaStreamCaptureModeThreadLocal;
}

inline const char* mode_name(capture_mode m) noexcept {
  switch (m) {
    case capture_mode::global: return "global";
    case capture_mode::relaxed: return "relaxed";
    case capture_mode::local: break;
  }
  return "local";
}

/// "stream 0x7f..." for messages.
inline std::string stream_text(cudaStream_t s) {
  if (s == nullptr) return "the legacy default stream (0)";
  if (s == cudaStreamLegacy) return "the legacy default stream (cudaStreamLegacy)";
  if (s == cudaStreamPerThread) return "the per-thread default stream (cudaStreamPerThread)";
  char buf[48];
  std::snprintf(buf, sizeof buf, "stream %p", static_cast<void*>(s));
  return buf;
}

// (A number that tells live threads apart: the id's hash, not the native handle operator<< would
// print; formatting it by hand keeps <sstream>, about 0.5 s of every TU's nvcc time, out.)
inline std::string thread_text(std::thread::id t) { return std::to_string(std::hash<std::thread::id>()(t)); }

inline bool is_default_stream(cudaStream_t s) noexcept {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/// One capture begun by a fusex::graph_capture and not yet ended.
struct capture_entry {
  const void* owner = nullptr;  ///< The guard.
  cudaStream_t origin = nullptr;
  unsigned long long id = 0;  ///< CUDA's capture sequence id.
  std::thread::id thread;     ///< The thread that began it.
  capture_mode mode = capture_mode::local;
};

/// Every capture fusex's guards have begun and not ended, process-wide. Queried by the
/// synchronising helpers below and by the guards themselves (nesting). Cheap when empty (one
/// atomic load).
class capture_registry {
 public:
  static capture_registry& instance() {
    static capture_registry r;
    return r;
  }
  bool any() const noexcept { return count_.load(std::memory_order_acquire) != 0; }

  void add(const capture_entry& e) {
    std::lock_guard<std::mutex> lock(m_);
    entries_.push_back(e);
    count_.fetch_add(1, std::memory_order_acq_rel);
  }
  void remove(const void* owner) noexcept {
    std::lock_guard<std::mutex> lock(m_);
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const capture_entry& e) { return e.owner == owner; });
    if (it != entries_.end()) {
      entries_.erase(it);
      count_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
  /// The capture whose origin is `s`, if fusex began one.
  bool find_origin(cudaStream_t s, capture_entry* out) const {
    if (!any()) return false;
    std::lock_guard<std::mutex> lock(m_);
    for (const capture_entry& e : entries_)
      if (e.origin == s) {
        if (out != nullptr) *out = e;
        return true;
      }
    return false;
  }
  /// The capture with sequence id `id`, if fusex began it.
  bool find_id(unsigned long long id, capture_entry* out) const {
    if (!any()) return false;
    std::lock_guard<std::mutex> lock(m_);
    for (const capture_entry& e : entries_)
      if (e.id == id) {
        if (out != nullptr) *out = e;
        return true;
      }
    return false;
  }
  /// A capture that forbids unsafe calls on thread `self`: a global capture begun on any thread,
  /// or a local one begun on `self`.
  bool find_restricting(std::thread::id self, capture_entry* out) const {
    if (!any()) return false;
    std::lock_guard<std::mutex> lock(m_);
    for (const capture_entry& e : entries_)
      if (e.mode == capture_mode::global || (e.mode == capture_mode::local && e.thread == self)) {
        if (out != nullptr) *out = e;
        return true;
      }
    return false;
  }
  /// Any capture at all (a device-wide synchronisation conflicts with every one of them).
  bool find_any(capture_entry* out) const {
    if (!any()) return false;
    std::lock_guard<std::mutex> lock(m_);
    if (entries_.empty()) return false;
    if (out != nullptr) *out = entries_.front();
    return true;
  }

 private:
  mutable std::mutex m_;
  std::vector<capture_entry> entries_;
  std::atomic<int> count_{0};
};

inline std::string describe(const capture_entry& e) {
  return "the " + std::string(mode_name(e.mode)) + "-mode capture of " + stream_text(e.origin) + " (capture id " +
         std::to_string(e.id) + ", begun on thread " + thread_text(e.thread) + ")";
}

/// Throws capture_error(sync_during_capture) when `stream` is being captured (by anyone), so
/// that `what` (a synchronising call on it) would invalidate the capture.
inline void refuse_if_capturing(cudaStream_t stream, const char* what) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  const cudaError_t err = cudaStreamGetCaptureInfo(stream, &st, &id);
  if (err == cudaErrorStreamCaptureImplicit) {
    (void)cudaGetLastError();
    throw capture_error(capture_rule::sync_during_capture,
                        std::string(what) + " on " + stream_text(stream) +
                            ", which is implicitly synchronised with a blocking stream that is being captured; "
                            "use non-blocking streams, or end the capture first",
                        err);
  }
  FUSEX_CUDA_CHECK(err);
  if (st != cudaStreamCaptureStatusNone) {
    capture_entry e;
    const bool ours = capture_registry::instance().find_id(id, &e);
    throw capture_error(capture_rule::sync_during_capture,
                        std::string(what) + " on " + stream_text(stream) + ", which is part of " +
                            (ours ? describe(e) : "a capture (id " + std::to_string(id) + ")") +
                            ": work on a captured stream is recorded, not run, so waiting for it cannot "
                            "succeed; synchronise before the capture or after finish()");
  }
}

/// Throws capture_error(sync_during_capture) when a fusex capture forbids unsafe calls on this
/// thread (CUDA would refuse `what` and invalidate that capture).
inline void refuse_if_restricted(const char* what) {
  capture_entry e;
  if (capture_registry::instance().find_restricting(std::this_thread::get_id(), &e)) {
    throw capture_error(capture_rule::sync_during_capture,
                        std::string(what) + " while " + describe(e) +
                            " is in progress: CUDA forbids it in this capture mode and would invalidate the "
                            "capture; call it before the capture or after finish() (or capture in relaxed mode)");
  }
}

}  // namespace detail

/// cudaStreamSynchronize(stream), refused with fusex::capture_error (rule sync_during_capture)
/// when the stream is being captured, instead of invalidating the capture.
inline void stream_synchronize(cudaStream_t stream) {
  detail::refuse_if_capturing(stream, "stream_synchronize");
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
}

/// cudaDeviceSynchronize(), refused with fusex::capture_error (rule sync_during_capture) while
/// any fusex capture is in progress (it would wait on the captured streams).
inline void device_synchronize() {
  detail::capture_entry e;
  if (detail::capture_registry::instance().find_any(&e)) {
    throw capture_error(capture_rule::sync_during_capture,
                        "device_synchronize while " + detail::describe(e) +
                            " is in progress: a device-wide synchronisation waits on the captured stream and "
                            "invalidates the capture; synchronise before the capture or after finish()");
  }
  FUSEX_CUDA_CHECK(cudaDeviceSynchronize());
}

/// cudaEventQuery(event) as a bool (true: complete), refused with fusex::capture_error (rule
/// sync_during_capture) while a fusex capture forbids event queries on this thread.
inline bool event_query(cudaEvent_t event) {
  detail::refuse_if_restricted("event_query");
  const cudaError_t err = cudaEventQuery(event);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  FUSEX_CUDA_CHECK(err);
  return true;
}

/// Whether `stream` is being captured into a graph (by fusex or anyone else).
inline bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  FUSEX_CUDA_CHECK(cudaStreamIsCapturing(stream, &st));
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace fusex
