#pragma once
// A fake CUDA for the arena's bookkeeping: an upstream that hands out address ranges (no memory
// behind them), events and streams modelled as timelines, and capture state the test sets. It
// records what the arena asked for, so tests can check the cross-stream rule ("a block freed on A
// is reused on B only after B waited on an event recorded on A after the free") and the capture
// rule (no upstream call, event record or wait on a stream being captured).
#include <fusex/error.hpp>
#include <fusex/memory/detail/arena_impl.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fusex_test {

struct fake_world {
  std::mutex m;
  // Upstream.
  std::uintptr_t next_addr = 0x100000000ull;
  std::size_t limit = ~std::size_t{0};  // bytes the fake "device" has
  std::size_t reserved = 0;
  std::size_t peak_reserved = 0;
  std::map<std::uintptr_t, std::size_t> chunks;
  std::uint64_t chunk_allocs = 0, chunk_frees = 0, failed_allocs = 0;
  bool stream_ordered = true;
  // Streams as timelines: pos counts work enqueued; known[a] = the position of stream a's timeline
  // that this stream is ordered after.
  struct stream_info {
    std::uint64_t pos = 0;
    std::map<cudaStream_t, std::uint64_t> known;
    bool capturing = false;
    unsigned long long capture_id = 0;
  };
  std::map<cudaStream_t, stream_info> streams;
  struct event_info {
    bool live = true;
    bool recorded = false;
    cudaStream_t stream{};
    std::map<cudaStream_t, std::uint64_t> covers;  // what waiting on it orders after
  };
  std::vector<event_info> events;
  std::uint64_t records = 0, waits = 0, capture_queries = 0, capture_violations = 0;
  std::set<cudaStream_t> destroyed;  // streams the "user" destroyed: any call on them is a bug
  std::uint64_t destroyed_touches = 0;
  std::set<cudaStream_t> foreign;  // streams "of another device"
  int service_streams = 0;

  // --- helpers for tests (lock held by the caller or not: they lock) ---
  void advance(cudaStream_t s, std::uint64_t n = 1) {
    std::lock_guard<std::mutex> l(m);
    streams[s].pos += n;
  }
  std::uint64_t pos(cudaStream_t s) {
    std::lock_guard<std::mutex> l(m);
    return streams[s].pos;
  }
  /// True when work enqueued on `b` from now on runs after position `p` of stream `a`.
  bool ordered_after(cudaStream_t b, cudaStream_t a, std::uint64_t p) {
    if (a == b) return true;
    std::lock_guard<std::mutex> l(m);
    auto& k = streams[b].known;
    auto it = k.find(a);
    return it != k.end() && it->second >= p;
  }
  /// The user orders `b` after all work enqueued on `a` so far (cudaStreamWaitEvent of their own).
  void user_wait(cudaStream_t b, cudaStream_t a) {
    std::lock_guard<std::mutex> l(m);
    auto& known = streams[b].known;
    for (const auto& kv : streams[a].known) known[kv.first] = std::max(known[kv.first], kv.second);
    known[a] = std::max(known[a], streams[a].pos);
  }
  void set_capturing(cudaStream_t s, bool on, unsigned long long id) {
    std::lock_guard<std::mutex> l(m);
    streams[s].capturing = on;
    streams[s].capture_id = id;
  }
};

struct fake_backend {
  using event_type = std::size_t;

  std::shared_ptr<fake_world> w = std::make_shared<fake_world>();

  int device() const noexcept { return 0; }

  cudaError_t allocate_chunk(std::uintptr_t& out, std::size_t bytes, cudaStream_t s) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    if (w->streams[s].capturing) ++w->capture_violations;
    if (w->reserved + bytes > w->limit) {
      ++w->failed_allocs;
      return cudaErrorMemoryAllocation;
    }
    out = w->next_addr;
    w->next_addr += bytes + 0x10000;  // gaps between chunks: blocks must never span two
    w->chunks[out] = bytes;
    w->reserved += bytes;
    w->peak_reserved = std::max(w->peak_reserved, w->reserved);
    ++w->chunk_allocs;
    return cudaSuccess;
  }
  void free_chunk(std::uintptr_t p, std::size_t bytes, cudaStream_t s) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    if (w->streams[s].capturing) ++w->capture_violations;
    auto it = w->chunks.find(p);
    if (it == w->chunks.end() || it->second != bytes) throw fusex::error("fake upstream: bad chunk free");
    w->chunks.erase(it);
    w->reserved -= bytes;
    ++w->chunk_frees;
  }
  bool chunks_are_stream_ordered() const noexcept { return w->stream_ordered; }
  bool free_is_capture_safe() const noexcept { return true; }
  const char* upstream_name() const noexcept { return "fake upstream"; }
  std::string error_string(cudaError_t e) const {
    return e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation (fake device full)" : "fake error";
  }

  event_type create_event() {
    std::lock_guard<std::mutex> l(w->m);
    w->events.emplace_back();
    return w->events.size() - 1;
  }
  void destroy_event(event_type e) noexcept {
    std::lock_guard<std::mutex> l(w->m);
    w->events[e].live = false;
  }
  void record_event(event_type e, cudaStream_t s) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    auto& st = w->streams[s];
    if (st.capturing) ++w->capture_violations;
    auto& ev = w->events.at(e);
    if (!ev.live) throw fusex::error("fake: record of a destroyed event");
    ev.recorded = true;
    ev.stream = s;
    ev.covers = st.known;
    ev.covers[s] = st.pos;
    ++w->records;
  }
  void wait_event(cudaStream_t s, event_type e) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    auto& st = w->streams[s];
    if (st.capturing) ++w->capture_violations;
    const auto& ev = w->events.at(e);
    if (!ev.live) throw fusex::error("fake: wait on a destroyed event");
    for (const auto& kv : ev.covers) {
      auto& k = st.known[kv.first];
      k = std::max(k, kv.second);
    }
    ++w->waits;
  }
  cudaStream_t create_service_stream() {
    std::lock_guard<std::mutex> l(w->m);
    ++w->service_streams;
    return reinterpret_cast<cudaStream_t>(std::uintptr_t{0x5e5e0000} +
                                          static_cast<std::uintptr_t>(w->service_streams) * 16);
  }
  void destroy_service_stream(cudaStream_t) noexcept {}
  fusex::detail::capture_state capture_status(cudaStream_t s) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    ++w->capture_queries;
    const auto& st = w->streams[s];
    return fusex::detail::capture_state{st.capturing, st.capture_id};
  }
  bool is_thread_bound(cudaStream_t s) const noexcept { return s == cudaStreamPerThread; }
  void check_stream(cudaStream_t s) {
    std::lock_guard<std::mutex> l(w->m);
    if (w->destroyed.count(s) != 0) ++w->destroyed_touches;
    // As CUDA's cudaStreamGetDevice, which refuses a capturing stream.
    if (w->streams[s].capturing)
      throw fusex::cuda_error(cudaErrorStreamCaptureUnsupported, "cudaStreamGetDevice", __FILE__, __LINE__);
    if (w->foreign.count(s) != 0) throw fusex::invalid_argument("fake: stream of another device");
  }
};

using fake_arena = fusex::detail::basic_arena<fake_backend>;

/// Stream handles for tests (never 0, 1 or 2, which CUDA reserves).
inline cudaStream_t fake_stream(int i) {
  return reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000} + static_cast<std::uintptr_t>(i) * 16);
}

/// Options for exact, small, deterministic tests.
inline fusex::arena_options small_options() {
  fusex::arena_options o;
  o.initial_chunk_bytes = std::size_t{4} << 20;
  o.chunk_granularity = std::size_t{2} << 20;
  o.stats_batch_bytes = 0;
  o.capture = fusex::capture_check::announced;
  o.thorough_checks = true;
  // Most host tests check the lazy hand-off protocol (record at the hand-off, thread caches);
  // the record-at-free default has its own tests.
  o.free_events = fusex::free_event::lazy;
  return o;
}

}  // namespace fusex_test
