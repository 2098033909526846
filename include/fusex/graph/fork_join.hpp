#pragma once
/// \file
/// Side streams in a capture: fusex::scoped_fork forks a stream into a capture and joins it back
/// when the scope ends, so that work on several streams is captured as parallel branches of one
/// graph.
///
///     fusex::graph_capture cap(s);
///     fusex::eval(a, x + 1.0f, s);
///     {
///       fusex::scoped_fork side(cap, s2);            // s2 now follows s's work so far
///       fusex::eval(c, fusex::exp(x), s2);          // branch 2
///       fusex::eval(b, a * 2.0f, s);                // branch 1
///     }                                              // s waits for s2 again
///     fusex::eval(y, b + c, s);
///     fusex::graph_exec g = cap.finish();

#include <fusex/graph/graph_capture.hpp>

#include <cuda_runtime_api.h>

#include <exception>
#include <utility>

namespace fusex {

/// Forks `side` into a capture on construction (graph_capture::fork) and joins it back on
/// destruction (graph_capture::join), also when the scope is left by an exception (errors while
/// unwinding are reported on stderr, never thrown). join() joins early.
class scoped_fork {
 public:
  scoped_fork(graph_capture& capture, cudaStream_t side) : cap_(&capture), side_(side) { capture.fork(side); }
  scoped_fork(const scoped_fork&) = delete;
  scoped_fork& operator=(const scoped_fork&) = delete;
  scoped_fork(scoped_fork&& o) noexcept : cap_(std::exchange(o.cap_, nullptr)), side_(o.side_) {}
  scoped_fork& operator=(scoped_fork&&) = delete;
  ~scoped_fork() {
    if (cap_ == nullptr || !cap_->active()) return;
    try {
      cap_->join(side_);
    } catch (const std::exception& e) {
      detail::report_noexcept("scoped_fork: joining the side stream failed", e);
    }
  }

  /// Joins the side stream back now (throws as graph_capture::join does).
  void join() {
    graph_capture* c = std::exchange(cap_, nullptr);
    if (c != nullptr) c->join(side_);
  }
  /// The side stream.
  cudaStream_t stream() const noexcept { return side_; }

 private:
  graph_capture* cap_;
  cudaStream_t side_;
};

}  // namespace fusex
