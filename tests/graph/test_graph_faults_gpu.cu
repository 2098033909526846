// GPU suite for graph capture faults: each broken rule raises fusex::capture_error (or the
// arena's fusex::error / fusex::bad_alloc) naming the rule, and the streams stay usable afterwards
// (checked by running ordinary work and a fresh capture on them).
#include "graph_gpu_util.hpp"

#include <cmath>
#include <string>
#include <thread>
#include <vector>

using namespace graph_test;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

fusex::capture_options no_pool() {
  fusex::capture_options o;
  o.memory = fusex::capture_memory::none();
  return o;
}

template <class F>
fusex::capture_rule rule_of(F&& f) {
  try {
    f();
  } catch (const fusex::capture_error& e) {
    INFO(e.what());
    const std::string m = e.what();
    CHECK(m.find(fusex::to_string(e.rule())) != std::string::npos);
    return e.rule();
  }
  FAIL("expected a fusex::capture_error");
  return fusex::capture_rule::not_capturing;
}

// Eager work and a capture on `s` both run correctly: the stream is usable.
void check_stream_usable(cudaStream_t s) {
  REQUIRE_FALSE(fusex::is_capturing(s));
  problem p(8, 300, 7);
  eval_relu2(p.yv(), p.xv(), p.bv(), s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
  p.y.poison();
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, no_pool());
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    g = cap.finish();
  }
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
}

}  // namespace

TEST_CASE("gpu graph faults: the default streams cannot be captured", "[gpu][graph][faults]") {
  CHECK(rule_of([] { fusex::graph_capture cap(nullptr); }) == fusex::capture_rule::default_stream);
  CHECK(rule_of([] { fusex::graph_capture cap(cudaStreamLegacy); }) == fusex::capture_rule::default_stream);
  CHECK(rule_of([] { fusex::graph_capture cap(cudaStreamPerThread); }) == fusex::capture_rule::default_stream);
  stream_guard s;
  fusex::graph_capture cap(s, no_pool());
  CHECK(rule_of([&] { cap.fork(cudaStreamLegacy); }) == fusex::capture_rule::default_stream);
  cap.abandon();
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: guards do not nest on one stream", "[gpu][graph][faults]") {
  problem p(8, 300, 3);
  stream_guard s, s2, s3;
  {
    fusex::graph_capture outer(s, no_pool());
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    CHECK(rule_of([&] { fusex::graph_capture inner(s, no_pool()); }) == fusex::capture_rule::nested_capture);
    // A side stream of the capture cannot be captured on its own either.
    outer.fork(s2);
    CHECK(rule_of([&] { fusex::graph_capture inner(s2, no_pool()); }) == fusex::capture_rule::nested_capture);
    outer.join(s2);
    // Nor can another guard fork a stream that this capture owns.
    fusex::graph_capture other(s3, no_pool());
    CHECK(rule_of([&] { other.fork(s); }) == fusex::capture_rule::nested_capture);
    other.abandon();
    // The outer capture is intact.
    CHECK(outer.status() == cudaStreamCaptureStatusActive);
    fusex::graph_exec g = outer.finish();
    p.y.poison();
    g.launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    CHECK(p.check_relu2().empty());
  }
  // A stream captured by someone else (raw CUDA) is refused too.
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s3, cudaStreamCaptureModeThreadLocal));
  CHECK(rule_of([&] { fusex::graph_capture inner(s3, no_pool()); }) == fusex::capture_rule::nested_capture);
  cudaGraph_t raw = nullptr;
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s3, &raw));
  FUSEX_CUDA_CHECK(cudaGraphDestroy(raw));
  check_stream_usable(s);
  check_stream_usable(s2);
  check_stream_usable(s3);
}

TEST_CASE("gpu graph faults: a local capture is finished on the thread that began it", "[gpu][graph][faults]") {
  problem p(8, 300, 5);
  stream_guard s;
  fusex::graph_capture cap(s, no_pool());
  eval_relu2(p.yv(), p.xv(), p.bv(), s);
  fusex::capture_rule seen = fusex::capture_rule::not_capturing;
  std::string message;
  std::thread t([&] {
    try {
      (void)cap.finish();
    } catch (const fusex::capture_error& e) {
      seen = e.rule();
      message = e.what();
    }
  });
  t.join();
  INFO(message);
  CHECK(seen == fusex::capture_rule::wrong_thread);
  CHECK(message.find("thread") != std::string::npos);
  CHECK(cap.active());  // the capture continues
  fusex::graph_exec g = cap.finish();
  p.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
  // In relaxed mode another thread may finish it.
  fusex::capture_options relaxed = no_pool();
  relaxed.mode = fusex::capture_mode::relaxed;
  fusex::graph_capture rcap(s, relaxed);
  eval_relu2(p.yv(), p.xv(), p.bv(), s);
  fusex::graph_exec rg;
  std::string relaxed_error;
  std::thread t2([&] {
    try {
      rg = rcap.finish();
    } catch (const std::exception& e) {
      relaxed_error = e.what();
    }
  });
  t2.join();
  INFO(relaxed_error);
  REQUIRE(rg);
  p.y.poison();
  rg.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: synchronising calls fusex sees are refused before they break the capture",
          "[gpu][graph][faults]") {
  problem p(8, 300, 9);
  stream_guard s, other;
  cudaEvent_t ev;
  FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  FUSEX_CUDA_CHECK(cudaEventRecord(ev, other));
  {
    fusex::graph_capture cap(s, no_pool());
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    CHECK(rule_of([&] { fusex::stream_synchronize(s); }) == fusex::capture_rule::sync_during_capture);
    CHECK(rule_of([&] { fusex::device_synchronize(); }) == fusex::capture_rule::sync_during_capture);
    CHECK(rule_of([&] { (void)fusex::event_query(ev); }) == fusex::capture_rule::sync_during_capture);
    // Another thread is not restricted by a local capture.
    bool other_ok = false;
    std::thread t([&] {
      try {
        fusex::stream_synchronize(other);
        (void)fusex::event_query(ev);
        other_ok = true;
      } catch (const std::exception&) {}
    });
    t.join();
    CHECK(other_ok);
    // Refused before CUDA saw them: the capture is still valid.
    CHECK(cap.status() == cudaStreamCaptureStatusActive);
    fusex::graph_exec g = cap.finish();
    p.y.poison();
    g.launch(s);
    fusex::stream_synchronize(s);  // allowed again
    CHECK(p.check_relu2().empty());
  }
  FUSEX_CUDA_CHECK(cudaEventDestroy(ev));
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: an arena never grows during a capture", "[gpu][graph][faults][memory]") {
  stream_guard s;
  fusex::arena A;
  // A pool too small for what the capture allocates: fusex::bad_alloc naming the shortfall.
  fusex::private_pool_options po;
  po.reserve_bytes = 2 * MiB;
  fusex::capture_options co;
  co.memory = fusex::arena_capture_memory(A, po);
  const auto reserved_before = A.stats().bytes_reserved;
  try {
    fusex::graph_capture cap(s, co);
    fusex::buffer<float> big(8 * MiB / sizeof(float), s, A);
    FAIL("the pool must refuse 8 MiB");
  } catch (const fusex::bad_alloc& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("reserve") != std::string::npos);
  }
  // Only the pool's reservation, made before the capture, was added: nothing during it.
  CHECK(A.stats().bytes_reserved == reserved_before + 2 * MiB);
  check_stream_usable(s);
  // No pool for an arena at all: its allocation during the capture is refused, not served.
  fusex::arena_options bo;
  bo.capture = fusex::capture_check::always;
  fusex::arena B(bo);
  try {
    fusex::graph_capture cap(s, no_pool());
    fusex::buffer<float> t(1024, s, B);
    FAIL("an arena allocation during a capture without a private pool must throw");
  } catch (const fusex::error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("captur") != std::string::npos);
  }
  CHECK(A.stats().private_pools == 0);
  CHECK(B.stats().private_pools == 0);
  CHECK(B.stats().bytes_reserved == 0);
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: CUDA's own capture errors are reported and the stream recovers", "[gpu][graph][faults]") {
  problem p(8, 300, 13);
  stream_guard s;
  fusex::graph_capture cap(s, no_pool());
  eval_relu2(p.yv(), p.xv(), p.bv(), s);
  const cudaError_t refused = cudaStreamSynchronize(s);  // not through fusex: CUDA refuses it
  CHECK(refused != cudaSuccess);
  try {
    (void)cap.finish();
    FAIL("finish() of an invalidated capture must throw");
  } catch (const fusex::capture_error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(e.rule() == fusex::capture_rule::invalidated);
    CHECK(m.find(cudaGetErrorName(refused)) != std::string::npos);  // the refused call's error is named
  }
  CHECK_FALSE(cap.active());
  CHECK(rule_of([&] { (void)cap.finish(); }) == fusex::capture_rule::not_capturing);
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: side streams must join back", "[gpu][graph][faults][fork]") {
  problem p(8, 300, 17);
  stream_guard s, s2;
  // Forked with the guard and never joined.
  {
    fusex::graph_capture cap(s, no_pool());
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    cap.fork(s2);
    eval_relu2(p.yv(), p.xv(), p.bv(), s2);
    CHECK(rule_of([&] { (void)cap.finish(); }) == fusex::capture_rule::unjoined_fork);
  }
  check_stream_usable(s);
  check_stream_usable(s2);
  // Forked by hand with an event and never joined: CUDA's error, reported as the same rule.
  {
    cudaEvent_t e;
    FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    fusex::graph_capture cap(s, no_pool());
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    FUSEX_CUDA_CHECK(cudaEventRecord(e, s));
    FUSEX_CUDA_CHECK(cudaStreamWaitEvent(s2, e, 0));
    eval_relu2(p.yv(), p.xv(), p.bv(), s2);
    try {
      (void)cap.finish();
      FAIL("an unjoined side stream must make finish() throw");
    } catch (const fusex::capture_error& err) {
      INFO(err.what());
      CHECK(err.rule() == fusex::capture_rule::unjoined_fork);
    }
    FUSEX_CUDA_CHECK(cudaEventDestroy(e));
  }
  check_stream_usable(s);
  check_stream_usable(s2);
  // join() of a stream that is not part of the capture is an error, and so is forking the origin.
  {
    fusex::graph_capture cap(s, no_pool());
    const std::string mj = thrown_message<fusex::invalid_argument>([&] { cap.join(s2); });
    INFO(mj);
    CHECK(mj.find("graph_capture::join") != std::string::npos);
    CHECK(mj.find("is not part of this capture") != std::string::npos);
    const std::string mf = thrown_message<fusex::invalid_argument>([&] { cap.fork(s); });
    INFO(mf);
    CHECK(mf.find("graph_capture::fork: the side stream is the origin stream") != std::string::npos);
  }
  check_stream_usable(s);
}

TEST_CASE("gpu graph faults: a graph_exec whose memory was released cannot be launched", "[gpu][graph][faults]") {
  problem p(8, 300, 19);
  stream_guard s;
  fusex::capture_options co;
  co.pool.reserve_bytes = 2 * MiB;
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, co);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    g = cap.finish();
  }
  g.launch(s);
  // A graph that holds a graph-private pool is launched on a stream the caller created.
  const std::string m = thrown_message<fusex::invalid_argument>([&] { g.launch(cudaStreamLegacy); });
  INFO(m);
  CHECK(m.find("graph_exec::launch") != std::string::npos);
  CHECK(m.find("cudaStreamLegacy") != std::string::npos);
  g.release_memory();
  CHECK(g.released());
  CHECK(g.memory_bytes() == 0);
  CHECK(rule_of([&] { g.launch(s); }) == fusex::capture_rule::released_memory);
  // Capturing again into it re-arms it.
  {
    fusex::graph_capture cap(s, co);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    (void)cap.finish_into(g);
  }
  CHECK_FALSE(g.released());
  p.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
  // Empty and moved-from graph_execs.
  fusex::graph_exec moved = std::move(g);
  CHECK(rule_of([&] { g.launch(s); }) == fusex::capture_rule::empty_exec);  // NOLINT(bugprone-use-after-move)
  moved.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  check_stream_usable(s);
}
