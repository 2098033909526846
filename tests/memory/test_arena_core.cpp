// Host tests of the arena's bookkeeping over a fake device (no GPU): size classes, coalescing,
// per-stream lists, the cross-stream event rule, record_stream, bad input, out of memory, trim and
// release, graph capture rules and private pools, thread caches.
#include "fake_backend.hpp"
#include "fusex_catch.hpp"

#include <fusex/memory/detail/free_index.hpp>
#include <fusex/memory/resource_ref.hpp>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace fusex_test;
using fusex::detail::arena_granule;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

fusex::arena_options no_cache_options() {
  fusex::arena_options o = small_options();
  o.thread_cache_bytes = 0;
  return o;
}

struct fake_block {
  std::uintptr_t addr = 0;
  std::size_t size = 0;
  fake_block* next_free = nullptr;
  fake_block* prev_free = nullptr;
  std::uint32_t bin = 0;
};

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const fusex::error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("size classes: eight per power of two, monotonic", "[memory][host]") {
  using fusex::detail::size_class_of;
  CHECK(size_class_of(256) == 0);
  std::size_t prev = 0;
  for (std::size_t s = 256; s<(std::size_t{1} << 30); s += s / 8> 256 ? (s / 8) / 256 * 256 : 256) {
    const std::size_t c = size_class_of(s);
    CHECK(c >= prev);
    prev = c;
  }
  // Two sizes of one class differ by less than 12.5% of the smaller's power of two.
  CHECK(size_class_of(1024) == size_class_of(1024 + 127));
  CHECK(size_class_of(1024) != size_class_of(1024 + 128));
}

TEST_CASE("TLSF bins: bounds, search guarantees a fit", "[memory][host]") {
  using index = fusex::detail::free_index<fake_block>;
  for (std::size_t s = 256; s < (std::size_t{1} << 40); s = s * 5 / 4 / 256 * 256 + 256) {
    const int b = index::bin_of(s);
    CHECK(index::lower_bound(b) <= s);
    CHECK(s < index::lower_bound(b + 1));
  }
  index idx;
  std::vector<fake_block> blocks(6);
  const std::size_t sizes[] = {256, 4096, 5120, 65536, 1 << 20, 3 << 20};
  std::uintptr_t at = 0x10000;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].addr = at;
    blocks[i].size = sizes[i];
    at += sizes[i];
    idx.insert(&blocks[i]);
  }
  CHECK(idx.count() == 6);
  CHECK(idx.largest() == (3u << 20));
  fake_block* b = idx.find(4608, 256);
  REQUIRE(b != nullptr);
  CHECK(b->size >= 4608);
  CHECK(idx.find(4 << 20, 256) == nullptr);
  // Aligned search: the block found can hold the request at the alignment.
  fake_block* a = idx.find(60000 / 256 * 256, 4096);
  REQUIRE(a != nullptr);
  CHECK(index::fits(a, 60000 / 256 * 256, 4096));
  idx.remove(&blocks[5]);
  CHECK(idx.largest() == (1u << 20));
}

TEST_CASE("arena: zero bytes, alignment rules, statistics", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  const cudaStream_t s = fake_stream(1);
  CHECK(a.allocate_async(0, 256, s) == nullptr);
  a.deallocate_async(nullptr, 0, 256, s);
  CHECK_THROWS_AS(a.deallocate_async(nullptr, 16, 256, s), fusex::invalid_argument);
  for (std::size_t align = 1; align <= 4096; align *= 2) {
    void* p = a.allocate_async(1000, align, s);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % align == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
    a.deallocate_async(p, 1000, align, s);
  }
  for (std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{48}, std::size_t{8192}}) {
    const std::string m = message_of([&] { (void)a.allocate_async(64, bad, s); });
    CHECK(contains(m, "power of two up to 4096"));
    CHECK_THROWS_AS(a.allocate_async(64, bad, s), fusex::invalid_argument);
  }
  void* p = a.allocate_async(5000, 256, s);
  auto st = a.stats();
  CHECK(st.bytes_in_use == 5000);
  CHECK(st.allocations_in_use == 1);
  CHECK(st.peak_bytes_in_use >= 5000);
  a.deallocate_async(p, 5000, 256, s);
  st = a.stats();
  CHECK(st.bytes_in_use == 0);
  CHECK(st.allocations_in_use == 0);
  CHECK(st.reuse_rate() > 0.5);
  CHECK(a.validate().empty());
}

TEST_CASE("arena: in-use statistics published in batches stay exact, the peak within its bounds", "[memory][host]") {
  // stats_batch_bytes > 0: a thread publishes a rise once it reaches the batch, a fall only once it
  // exceeds what the thread keeps cached. bytes_in_use adds the unpublished parts back (exact);
  // the peak is at most a batch below the true peak and, with other threads' cached frees still
  // unpublished, at most their cached bytes above it.
  fusex::arena_options o = small_options();
  o.stats_batch_bytes = 4 * MiB;
  o.thorough_checks = false;
  fake_arena a(fake_backend{}, o);
  const cudaStream_t s = fake_stream(1);
  constexpr std::size_t big = 64 * MiB;
  for (int i = 0; i < 5; ++i) {
    void* p = a.allocate_async(big, 256, s);
    auto st = a.stats();
    CHECK(st.bytes_in_use == big);
    CHECK(st.peak_bytes_in_use == big);
    a.deallocate_async(p, big, 256, s);
    st = a.stats();
    CHECK(st.bytes_in_use == 0);
    CHECK(st.peak_bytes_in_use == big);  // one thread: never above the true peak
  }
  CHECK(a.stats().cache_hits >= 4);  // the cycle ran on the thread cache
  // Small allocations below the batch: exact in-use, the peak unchanged.
  std::vector<void*> small;
  for (int i = 0; i < 100; ++i) small.push_back(a.allocate_async(1000, 256, s));
  CHECK(a.stats().bytes_in_use == 100 * 1000);
  CHECK(a.stats().peak_bytes_in_use == big);
  for (void* p : small) a.deallocate_async(p, 1000, 256, s);
  CHECK(a.stats().bytes_in_use == 0);

  // Another thread frees a large block into its own cache and stays alive (its fall unpublished)
  // while this thread frees and takes back a block of its own cache: in-use exact, the peak at
  // most a batch per thread below the true peak (72 MiB) and at most the other's cached bytes above.
  void* q = a.allocate_async(8 * MiB, 256, s);
  std::mutex m;
  std::condition_variable cv;
  int phase = 0;
  std::thread other([&] {
    const cudaStream_t s2 = fake_stream(2);
    void* p = a.allocate_async(big, 256, s2);
    a.deallocate_async(p, big, 256, s2);
    std::unique_lock<std::mutex> l(m);
    phase = 1;
    cv.notify_all();
    cv.wait(l, [&] { return phase == 2; });
  });
  {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return phase == 1; });
  }
  const auto hits = a.stats().cache_hits;
  a.deallocate_async(q, 8 * MiB, 256, s);
  q = a.allocate_async(8 * MiB, 256, s);
  auto st = a.stats();
  CHECK(st.cache_hits == hits + 1);
  CHECK(st.bytes_in_use == 8 * MiB);
  CHECK(st.bytes_cached >= big);
  CHECK(st.peak_bytes_in_use >= big + 8 * MiB - 2 * o.stats_batch_bytes);
  CHECK(st.peak_bytes_in_use <= big + 8 * MiB + big);
  {
    std::lock_guard<std::mutex> l(m);
    phase = 2;
  }
  cv.notify_all();
  other.join();  // its cache goes back to the arena, its unpublished count with it
  st = a.stats();
  CHECK(st.bytes_in_use == 8 * MiB);
  a.deallocate_async(q, 8 * MiB, 256, s);
  CHECK(a.stats().bytes_in_use == 0);
  CHECK(a.validate().empty());
}

TEST_CASE("arena: free neighbours coalesce, nothing fragments", "[memory][host]") {
  fake_arena a(fake_backend{}, no_cache_options());
  const cudaStream_t s = fake_stream(1);
  void* x = a.allocate_async(1 * MiB, 256, s);
  void* y = a.allocate_async(1 * MiB, 256, s);
  void* z = a.allocate_async(1 * MiB, 256, s);
  CHECK(a.stats().chunks == 1);
  const std::size_t reserved = a.stats().bytes_reserved;
  CHECK(reinterpret_cast<std::uintptr_t>(y) == reinterpret_cast<std::uintptr_t>(x) + MiB);
  a.deallocate_async(y, MiB, 256, s);
  CHECK(a.validate().empty());
  a.deallocate_async(x, MiB, 256, s);
  CHECK(a.validate().empty());
  a.deallocate_async(z, MiB, 256, s);
  CHECK(a.validate().empty());
  auto st = a.stats();
  CHECK(st.bytes_free == reserved);
  CHECK(st.largest_free_block == reserved);  // one block again
  // The whole chunk serves one request of its size without growing.
  void* big = a.allocate_async(reserved, 256, s);
  CHECK(big == x);
  CHECK(a.stats().upstream_allocations == 1);
  a.deallocate_async(big, reserved, 256, s);
}

TEST_CASE("arena: same-stream reuse needs no event", "[memory][host]") {
  for (bool cache : {false, true}) {
    fake_arena a(fake_backend{}, cache ? small_options() : no_cache_options());
    auto w = a.backend().w;
    const cudaStream_t s = fake_stream(1);
    void* p = a.allocate_async(4096, 256, s);
    a.deallocate_async(p, 4096, 256, s);
    void* q = a.allocate_async(4096, 256, s);
    CHECK(q == p);
    a.deallocate_async(q, 4096, 256, s);
    CHECK(w->records == 0);
    CHECK(w->waits == 0);
    if (cache) CHECK(a.stats().cache_hits == 1);
  }
}

TEST_CASE("arena: cross-stream hand-off through a lazily recorded event", "[memory][host]") {
  for (bool cache : {false, true}) {
    fusex::arena_options o = cache ? small_options() : no_cache_options();
    o.initial_chunk_bytes = 2 * MiB;
    fake_arena a(fake_backend{}, o);
    auto w = a.backend().w;
    const cudaStream_t A = fake_stream(1), B = fake_stream(2);
    void* p = a.allocate_async(2 * MiB, 256, A);  // the whole chunk
    w->advance(A, 5);                             // work using p on A
    const std::uint64_t free_point = w->pos(A);
    a.deallocate_async(p, 2 * MiB, 256, A);
    CHECK(w->records == 0);  // nothing recorded at the free
    w->advance(A, 3);        // later work on A
    void* q = a.allocate_async(2 * MiB, 256, B);
    CHECK(q == p);  // reused, not grown
    CHECK(a.stats().upstream_allocations == 1);
    CHECK(w->records == 1);
    CHECK(w->waits == 1);
    CHECK(w->ordered_after(B, A, free_point));
    CHECK(a.stats().stream_handoffs == 1);
    a.deallocate_async(q, 2 * MiB, 256, B);
    CHECK(a.validate().empty());
  }
}

TEST_CASE("arena: one record covers many frees, one wait per record", "[memory][host]") {
  fusex::arena_options o = no_cache_options();
  o.initial_chunk_bytes = 2 * MiB;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  const cudaStream_t A = fake_stream(1), B = fake_stream(2);
  std::vector<void*> ps;
  for (int i = 0; i < 8; ++i) ps.push_back(a.allocate_async(256 * 1024, 256, A));
  CHECK(a.stats().chunks == 1);
  for (void* p : ps) a.deallocate_async(p, 256 * 1024, 256, A);
  // Two blocks handed to B: with coalescing they come from the one free block of A.
  void* b1 = a.allocate_async(256 * 1024, 256, B);
  void* b2 = a.allocate_async(256 * 1024, 256, B);
  CHECK(w->records == 1);
  CHECK(w->waits == 1);
  a.deallocate_async(b1, 256 * 1024, 256, B);
  a.deallocate_async(b2, 256 * 1024, 256, B);
}

TEST_CASE("arena: record_stream orders reuse after the other stream's work", "[memory][host]") {
  for (bool cache : {false, true}) {
    fake_arena a(fake_backend{}, cache ? small_options() : no_cache_options());
    auto w = a.backend().w;
    const cudaStream_t A = fake_stream(1), U = fake_stream(3);
    void* p = a.allocate_async(8192, 256, A);
    a.record_stream(p, U);
    w->advance(U, 7);  // a kernel on U reads p
    const std::uint64_t use_point = w->pos(U);
    a.deallocate_async(p, 8192, 256, A);
    void* q = a.allocate_async(8192, 256, A);  // same stream: still must wait for U
    CHECK(q == p);
    CHECK(w->ordered_after(A, U, use_point));
    a.deallocate_async(q, 8192, 256, A);
    // The mark does not outlive the allocation: the next cycle needs no further wait.
    const auto waits = w->waits;
    void* r = a.allocate_async(8192, 256, A);
    a.deallocate_async(r, 8192, 256, A);
    void* t = a.allocate_async(8192, 256, A);
    a.deallocate_async(t, 8192, 256, A);
    CHECK(w->waits == waits);
    CHECK_THROWS_AS(a.record_stream(reinterpret_cast<void*>(0x1234500), U), fusex::invalid_argument);
  }
}

TEST_CASE("arena: bad deallocations are clear errors that change nothing", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  const cudaStream_t s = fake_stream(1);
  void* p = a.allocate_async(4096, 256, s);
  auto* c = static_cast<char*>(p);
  std::string m = message_of([&] { a.deallocate_async(reinterpret_cast<void*>(0xdead0000), 4096, 256, s); });
  CHECK(contains(m, "not allocated by this arena"));
  m = message_of([&] { a.deallocate_async(c + 256, 4096, 256, s); });
  CHECK(contains(m, "not allocated by this arena"));
  m = message_of([&] { a.deallocate_async(p, 4000, 256, s); });
  CHECK(contains(m, "allocated with 4096 bytes and alignment 256"));
  m = message_of([&] { a.deallocate_async(p, 4096, 512, s); });
  CHECK(contains(m, "allocated with 4096 bytes and alignment 256"));
  CHECK(a.owns(p));
  CHECK(a.validate().empty());
  a.deallocate_async(p, 4096, 256, s);
  m = message_of([&] { a.deallocate_async(p, 4096, 256, s); });
  CHECK(contains(m, "double free"));
  CHECK_THROWS_AS(a.deallocate_async(p, 4096, 256, s), fusex::invalid_argument);
  // Double free of a block that went to the shared lists (too big for the cache).
  void* big = a.allocate_async(200 * MiB, 256, s);
  a.deallocate_async(big, 200 * MiB, 256, s);
  CHECK(contains(message_of([&] { a.deallocate_async(big, 200 * MiB, 256, s); }), "double free"));
  CHECK(a.validate().empty());
  CHECK(a.stats().allocations_in_use == 0);
}

TEST_CASE("arena: thorough checks reject a stream of another device", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  const cudaStream_t s = fake_stream(1), other = fake_stream(9);
  w->foreign.insert(other);
  CHECK_THROWS_AS(a.allocate_async(4096, 256, other), fusex::invalid_argument);
  void* p = a.allocate_async(4096, 256, s);
  CHECK_THROWS_AS(a.deallocate_async(p, 4096, 256, other), fusex::invalid_argument);
  CHECK(a.owns(p));  // still live
  a.deallocate_async(p, 4096, 256, s);
}

TEST_CASE("arena: thorough checks never query a capturing stream", "[memory][host]") {
  // CUDA refuses cudaStreamGetDevice on a capturing stream (the fake backend's check_stream does
  // too): the device check must skip captures, whether capture queries are announced or always on.
  for (const auto mode : {fusex::capture_check::announced, fusex::capture_check::always}) {
    fusex::arena_options o = small_options();
    o.capture = mode;
    fake_arena a(fake_backend{}, o);
    auto w = a.backend().w;
    const cudaStream_t s = fake_stream(1);
    fusex::private_pool_options po;
    po.reserve_bytes = 4 * MiB;
    auto pool = a.begin_private_pool(s, po);
    w->set_capturing(s, true, 5);
    void* p = nullptr;
    CHECK_NOTHROW(p = a.allocate_async(4096, 256, s));
    CHECK_NOTHROW(a.deallocate_async(p, 4096, 256, s));
    w->set_capturing(s, false, 0);
    a.end_private_pool(pool);
    CHECK(a.validate().empty());
  }
}

TEST_CASE("arena: out of memory throws fusex::bad_alloc and the arena stays usable", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  w->limit = 8 * MiB;
  const cudaStream_t s = fake_stream(1);
  void* p = a.allocate_async(6 * MiB, 256, s);
  bool caught = false;
  try {
    (void)a.allocate_async(6 * MiB, 256, s);
  } catch (const fusex::bad_alloc& e) {
    caught = true;
    const std::string m = e.what();
    CHECK(contains(m, "6291456 bytes"));
    CHECK(contains(m, "reserved"));
    CHECK(contains(m, "fake device full"));
    CHECK(contains(m, "remains usable"));
    CHECK(e.requested_bytes() == 6 * MiB);
    CHECK(e.upstream_error() == cudaErrorMemoryAllocation);
  }
  CHECK(caught);
  CHECK_THROWS_AS(a.allocate_async(6 * MiB, 256, s), fusex::bad_alloc);
  CHECK_THROWS_AS(a.allocate_async(6 * MiB, 256, s), fusex::error);
  CHECK(a.owns(p));
  CHECK(a.stats().failed_allocations == 3);
  CHECK(a.validate().empty());
  a.deallocate_async(p, 6 * MiB, 256, s);
  void* q = a.allocate_async(6 * MiB, 256, s);  // fits now
  CHECK(q != nullptr);
  a.deallocate_async(q, 6 * MiB, 256, s);
}

TEST_CASE("arena: out of memory first returns unused chunks, then retries", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.initial_chunk_bytes = 2 * MiB;
  o.growth_ratio = 0;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  w->limit = 16 * MiB;
  const cudaStream_t A = fake_stream(1), B = fake_stream(2);
  std::vector<void*> ps;
  for (int i = 0; i < 8; ++i) ps.push_back(a.allocate_async(2 * MiB, 256, A));  // 8 chunks of 2 MiB
  CHECK(a.stats().chunks == 8);
  for (void* p : ps) a.deallocate_async(p, 2 * MiB, 256, A);
  // 12 MiB does not fit in any 2 MiB chunk and upstream is full: the arena gives the chunks back
  // and gets one chunk of 12 MiB.
  void* big = a.allocate_async(12 * MiB, 256, B);
  CHECK(big != nullptr);
  CHECK(a.stats().upstream_frees >= 6);
  CHECK(w->reserved <= 16 * MiB);
  a.deallocate_async(big, 12 * MiB, 256, B);
  CHECK(a.validate().empty());
}

TEST_CASE("arena: max_reserved_bytes limits growth", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.max_reserved_bytes = 8 * MiB;
  fake_arena a(fake_backend{}, o);
  const cudaStream_t s = fake_stream(1);
  void* p = a.allocate_async(7 * MiB, 256, s);
  const std::string m = message_of([&] { (void)a.allocate_async(4 * MiB, 256, s); });
  CHECK(contains(m, "max_reserved_bytes"));
  a.deallocate_async(p, 7 * MiB, 256, s);
}

TEST_CASE("arena: trim returns unused chunks, release returns everything", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  const cudaStream_t A = fake_stream(1), B = fake_stream(2);
  void* keep = a.allocate_async(1 * MiB, 256, A);
  std::vector<void*> ps;
  for (int i = 0; i < 20; ++i) ps.push_back(a.allocate_async(3 * MiB, 256, i % 2 ? A : B));
  for (int i = 0; i < 20; ++i) a.deallocate_async(ps[i], 3 * MiB, 256, i % 2 ? A : B);
  const std::size_t before = a.stats().bytes_reserved;
  CHECK(a.stats().bytes_cached > 0);
  const std::size_t released = a.trim();
  CHECK(released > 0);
  CHECK(a.stats().bytes_reserved == before - released);
  CHECK(a.stats().bytes_cached == 0);
  CHECK(a.stats().chunks == 1);  // the chunk holding `keep`
  CHECK(w->chunks.size() == 1);
  CHECK(a.owns(keep));
  CHECK_THROWS_AS(a.release(), fusex::error);  // a live allocation
  a.deallocate_async(keep, 1 * MiB, 256, A);
  a.release();
  CHECK(a.stats().bytes_reserved == 0);
  CHECK(w->chunks.empty());
  CHECK(w->capture_violations == 0);
  // Chunk frees were ordered after the streams that last used them.
  CHECK(w->waits >= 1);
  // Usable after release.
  void* p = a.allocate_async(4096, 256, A);
  a.deallocate_async(p, 4096, 256, A);
}

TEST_CASE("arena: geometric growth keeps the chunk count logarithmic", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.max_chunk_bytes = std::size_t{1} << 40;
  fake_arena a(fake_backend{}, o);
  const cudaStream_t s = fake_stream(1);
  std::vector<void*> ps;
  for (int i = 0; i < 4000; ++i) ps.push_back(a.allocate_async(1 * MiB, 256, s));  // 4000 MiB live
  const auto st = a.stats();
  // Each chunk is at least 1/8 of what was reserved before it: ~log(1000)/log(1.125) chunks.
  CHECK(st.chunks < 80);
  CHECK(static_cast<double>(st.bytes_reserved) <= 1.125 * 4000.0 * MiB + 8.0 * MiB);
  for (void* p : ps) a.deallocate_async(p, 1 * MiB, 256, s);
}

TEST_CASE("arena: allocation during an unannounced capture is refused by rule", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());  // capture_check::announced
  auto w = a.backend().w;
  const cudaStream_t s = fake_stream(1);
  w->set_capturing(s, true, 42);
  const std::string m = message_of([&] { (void)a.allocate_async(4096, 256, s); });
  CHECK(contains(m, "being captured"));
  CHECK(contains(m, "begin_private_pool"));
  CHECK(contains(m, "never grows"));
  CHECK_THROWS_AS(a.allocate_async(4096, 256, s), fusex::error);
  CHECK(w->capture_violations == 0);
  CHECK(w->chunk_allocs == 0);
  w->set_capturing(s, false, 0);
  void* p = a.allocate_async(4096, 256, s);
  // A free during an unannounced capture of a block the cache does not take is refused too, and
  // leaves the block live.
  void* big = a.allocate_async(200 * MiB, 256, s);
  w->set_capturing(s, true, 43);
  CHECK(contains(message_of([&] { a.deallocate_async(big, 200 * MiB, 256, s); }), "graph-private pool"));
  CHECK(a.owns(big));
  w->set_capturing(s, false, 0);
  a.deallocate_async(big, 200 * MiB, 256, s);
  a.deallocate_async(p, 4096, 256, s);
  CHECK(w->capture_violations == 0);
}

TEST_CASE("arena: capture_check::always also catches the hot path", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.capture = fusex::capture_check::always;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  const cudaStream_t s = fake_stream(1);
  void* p = a.allocate_async(4096, 256, s);
  a.deallocate_async(p, 4096, 256, s);  // now in the thread cache
  w->set_capturing(s, true, 5);
  CHECK_THROWS_AS(a.allocate_async(4096, 256, s), fusex::error);
  w->set_capturing(s, false, 0);
  CHECK(a.allocate_async(4096, 256, s) == p);
  a.deallocate_async(p, 4096, 256, s);
}

TEST_CASE("arena: graph-private pool serves a capture and keeps its memory from eager code", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  const cudaStream_t origin = fake_stream(1), side = fake_stream(2), eager = fake_stream(3);
  // Eager memory used before the capture.
  void* before = a.allocate_async(64 * 1024, 256, origin);
  void* eager_block = a.allocate_async(32 * 1024, 256, origin);
  a.deallocate_async(before, 64 * 1024, 256, origin);
  const std::size_t eager_reserved = a.stats().bytes_reserved;

  fusex::private_pool_options po;
  po.reserve_bytes = 4 * MiB;
  auto pool = a.begin_private_pool(origin, po);
  CHECK(pool.bytes_reserved() == 4 * MiB);
  CHECK(pool.capturing());
  // cudaStreamBeginCapture(origin); a side stream joins the capture.
  w->set_capturing(origin, true, 77);
  w->set_capturing(side, true, 77);
  const auto chunk_allocs = w->chunk_allocs;
  void* t1 = a.allocate_async(1 * MiB, 256, origin);
  void* t2 = a.allocate_async(1 * MiB, 256, side);
  void* out = a.allocate_async(512 * 1024, 256, origin);  // a graph output, kept after capture
  CHECK(pool.bytes_in_use() == 2 * MiB + 512 * 1024);
  CHECK(t1 != before);
  a.deallocate_async(t1, 1 * MiB, 256, origin);
  void* t3 = a.allocate_async(1 * MiB, 256, origin);  // reuses t1 within the capture, same stream
  CHECK(t3 == t1);
  // An eager block freed during the capture is kept by the pool.
  a.deallocate_async(eager_block, 32 * 1024, 256, origin);
  // Asking for more than the reserve fails with a clear message; no growth during capture.
  const std::string m = message_of([&] { (void)a.allocate_async(8 * MiB, 256, side); });
  CHECK(contains(m, "graph-private pool exhausted"));
  CHECK(pool.shortfall_bytes() >= 8 * MiB);
  CHECK(w->chunk_allocs == chunk_allocs);
  a.deallocate_async(t2, 1 * MiB, 256, side);
  a.deallocate_async(t3, 1 * MiB, 256, origin);
  // cudaStreamEndCapture.
  w->set_capturing(origin, false, 0);
  w->set_capturing(side, false, 0);
  a.end_private_pool(pool);
  CHECK(!pool.capturing());
  CHECK(w->capture_violations == 0);
  CHECK(a.validate().empty());

  // While the pool lives, eager code never gets its memory, nor the kept block.
  std::vector<void*> eager_ps;
  for (int i = 0; i < 64; ++i) {
    void* p = a.allocate_async(32 * 1024, 256, eager);
    CHECK(p != eager_block);
    CHECK(!(reinterpret_cast<std::uintptr_t>(p) >= reinterpret_cast<std::uintptr_t>(t1) &&
            reinterpret_cast<std::uintptr_t>(p) < reinterpret_cast<std::uintptr_t>(t1) + 4 * MiB));
    eager_ps.push_back(p);
  }
  for (void* p : eager_ps) a.deallocate_async(p, 32 * 1024, 256, eager);
  CHECK(a.stats().private_pools == 1);
  CHECK(a.stats().bytes_reserved >= eager_reserved + 4 * MiB);

  // The graph is destroyed after its last replay on `origin`: memory returns, ordered after it.
  w->advance(origin, 10);
  const std::uint64_t last_replay = w->pos(origin);
  pool.reset();
  CHECK(a.stats().private_pools == 0);
  CHECK(a.owns(out));  // the output outlives the pool
  a.deallocate_async(out, 512 * 1024, 256, eager);
  // Reusing the pool's memory on another stream waits for the replay.
  void* big = a.allocate_async(3 * MiB, 256, eager);
  CHECK(w->ordered_after(eager, origin, last_replay));
  a.deallocate_async(big, 3 * MiB, 256, eager);
  CHECK(a.validate().empty());
  CHECK(w->capture_violations == 0);
}

TEST_CASE("arena: a private pool is reused by a later capture", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  const cudaStream_t origin = fake_stream(1), eager = fake_stream(3);
  fusex::private_pool_options po;
  po.reserve_bytes = 2 * MiB;
  auto pool = a.begin_private_pool(origin, po);
  w->set_capturing(origin, true, 1);
  void* out = a.allocate_async(1 * MiB, 256, origin);
  w->set_capturing(origin, false, 0);
  a.end_private_pool(pool);
  // The user frees the first graph's output eagerly on another stream.
  w->advance(eager, 4);
  const std::uint64_t read_point = w->pos(eager);
  a.deallocate_async(out, 1 * MiB, 256, eager);
  // Second capture into the same pool: the origin is first ordered after that free.
  a.begin_private_pool(origin, pool);
  CHECK(w->ordered_after(origin, eager, read_point));
  w->set_capturing(origin, true, 2);
  void* again = a.allocate_async(2 * MiB, 256, origin);  // the whole reserve, coalesced
  CHECK(again != nullptr);
  a.deallocate_async(again, 2 * MiB, 256, origin);
  w->set_capturing(origin, false, 0);
  a.end_private_pool(pool);
  CHECK_THROWS_AS(a.end_private_pool(pool), fusex::error);
  CHECK(w->capture_violations == 0);
  CHECK_THROWS_AS(a.begin_private_pool(nullptr), fusex::invalid_argument);
}

TEST_CASE("arena: a new graph pool takes a destroyed pool's free chunk, not a new upstream one", "[memory][host]") {
  // One pool per captured graph, many graphs over time (the stress test): without reuse every pool
  // took a new upstream chunk and the returned ones piled up in the eager pool.
  fake_arena a(fake_backend{}, small_options());
  auto w = a.backend().w;
  const cudaStream_t first = fake_stream(1), second = fake_stream(2), busy = fake_stream(3);
  fusex::private_pool_options po;
  po.reserve_bytes = 4 * MiB;
  const auto allocs0 = w->chunk_allocs;
  std::uint64_t last_replay = 0;
  {
    auto pool = a.begin_private_pool(first, po);
    w->set_capturing(first, true, 1);
    void* t = a.allocate_async(1 * MiB, 256, first);
    a.deallocate_async(t, 1 * MiB, 256, first);
    w->set_capturing(first, false, 0);
    a.end_private_pool(pool);
    w->advance(first, 7);  // replays
    last_replay = w->pos(first);
  }  // the graph is gone: its chunk returns to the eager pool, ordered after `first`
  CHECK(w->chunk_allocs == allocs0 + 1);
  for (int i = 0; i < 20; ++i) {
    // Alternate the capture streams, each graph replayed on its own stream: every new capture
    // must be ordered after the previous graph's last replay, on the other stream.
    const cudaStream_t on = i % 2 ? first : second, before = i % 2 ? second : first;
    auto pool = a.begin_private_pool(on, po);
    CHECK(pool.bytes_reserved() == 4 * MiB);
    CHECK(w->ordered_after(on, before, last_replay));
    w->set_capturing(on, true, 2 + static_cast<unsigned long long>(i));
    void* t = a.allocate_async(4 * MiB, 256, on);  // the whole reserve
    a.deallocate_async(t, 4 * MiB, 256, on);
    w->set_capturing(on, false, 0);
    a.end_private_pool(pool);
    w->advance(on, 3);  // this graph's replays
    last_replay = w->pos(on);
  }
  CHECK(w->chunk_allocs == allocs0 + 1);
  CHECK(a.stats().pool_chunk_reuses == 20);
  CHECK(a.validate().empty());
  // A chunk last used by a stream that is being captured now cannot be covered by an event: the
  // pool gets a new chunk instead, and the capture is not touched.
  {
    fake_arena b(fake_backend{}, no_cache_options());
    auto wb = b.backend().w;
    void* e = b.allocate_async(4 * MiB, 256, busy);
    b.deallocate_async(e, 4 * MiB, 256, busy);  // a wholly free chunk; its free not yet recorded
    const auto n = wb->chunk_allocs;
    wb->set_capturing(busy, true, 99);
    {
      auto pool = b.make_private_pool(second, po);
      CHECK(wb->chunk_allocs == n + 1);
      CHECK(b.stats().pool_chunk_reuses == 0);
    }
    wb->set_capturing(busy, false, 0);
    CHECK(wb->capture_violations == 0);
    // Two pools at once: both free chunks are adopted, the one `busy` freed among them (its free
    // is recorded on `busy` now that the capture is over).
    const auto records = wb->records;
    {
      auto p1 = b.make_private_pool(second, po);
      auto p2 = b.make_private_pool(second, po);
      CHECK(wb->chunk_allocs == n + 1);
      CHECK(b.stats().pool_chunk_reuses == 2);
      CHECK(wb->records > records);
    }
    CHECK(b.validate().empty());
  }
  // Out of memory for a pool's reserve: free memory the eager pool holds in other sizes is given
  // back to upstream first, then the reserve is taken.
  {
    fusex::arena_options o = no_cache_options();
    o.initial_chunk_bytes = 2 * MiB;
    fake_arena c(fake_backend{}, o);
    auto wc = c.backend().w;
    wc->limit = 12 * MiB;
    void* e1 = c.allocate_async(2 * MiB, 256, busy);
    void* e2 = c.allocate_async(10 * MiB, 256, busy);  // the device is full: 2 + 10 MiB
    c.deallocate_async(e1, 2 * MiB, 256, busy);
    c.deallocate_async(e2, 10 * MiB, 256, busy);
    auto pool = c.make_private_pool(second, po);  // 4 MiB: no free chunk of 4-8 MiB to adopt
    CHECK(pool.bytes_reserved() == 4 * MiB);
    CHECK(wc->chunk_frees >= 1);
    CHECK(c.validate().empty());
  }
}

TEST_CASE("arena: forget_stream records once and never touches the stream again", "[memory][host]") {
  fusex::arena_options o = no_cache_options();
  o.initial_chunk_bytes = 2 * MiB;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  const cudaStream_t A = fake_stream(1), B = fake_stream(2);
  void* p = a.allocate_async(2 * MiB, 256, A);
  w->advance(A, 2);
  const std::uint64_t free_point = w->pos(A);
  a.deallocate_async(p, 2 * MiB, 256, A);
  a.forget_stream(A);
  CHECK(w->records == 1);
  // cudaStreamDestroy(A); the handle may come back as a new stream: it gets no old block unordered.
  void* q = a.allocate_async(2 * MiB, 256, B);
  CHECK(q == p);
  CHECK(w->records == 1);
  CHECK(w->ordered_after(B, A, free_point));
  a.deallocate_async(q, 2 * MiB, 256, B);
  a.forget_stream(B);
  a.release();
}

TEST_CASE("arena: with events at the free (the default) a stream may be destroyed right after its frees",
          "[memory][host]") {
  fusex::arena_options o = small_options();
  o.free_events = fusex::free_event::at_free;
  o.initial_chunk_bytes = 2 * MiB;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  const cudaStream_t A = fake_stream(1), B = fake_stream(2), C = fake_stream(3);
  void* p = a.allocate_async(1 * MiB, 256, A);
  void* r = a.allocate_async(512 * 1024, 256, A);
  a.record_stream(r, C);  // used on C too
  w->advance(A, 4);
  w->advance(C, 2);
  const std::uint64_t free_a = w->pos(A), free_c = w->pos(C);
  a.deallocate_async(p, 1 * MiB, 256, A);
  a.deallocate_async(r, 512 * 1024, 256, A);
  CHECK(w->records >= 2);  // at the frees, on A and on C
  // cudaStreamDestroy(A) and (C) without telling the arena.
  w->destroyed.insert(A);
  w->destroyed.insert(C);
  void* q = a.allocate_async(1 * MiB, 256, B);
  CHECK(q == p);  // reused through the events recorded at the free
  CHECK(w->ordered_after(B, A, free_a));
  void* q2 = a.allocate_async(512 * 1024, 256, B);
  CHECK(w->ordered_after(B, C, free_c));
  a.deallocate_async(q, 1 * MiB, 256, B);
  a.deallocate_async(q2, 512 * 1024, 256, B);
  a.trim();
  CHECK(a.stats().chunks == 0);
  CHECK(w->destroyed_touches == 0);
  CHECK(a.validate().empty());
}

TEST_CASE("arena: the per-thread default stream is keyed by thread", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.initial_chunk_bytes = 2 * MiB;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  void* p = a.allocate_async(2 * MiB, 256, cudaStreamPerThread);
  a.deallocate_async(p, 2 * MiB, 256, cudaStreamPerThread);
  const auto records = w->records;
  CHECK(records >= 1);  // recorded at the free: no other thread could record it later
  void* q = a.allocate_async(2 * MiB, 256, cudaStreamPerThread);  // same thread: same stream
  CHECK(q == p);
  CHECK(w->waits == 0);
  a.deallocate_async(q, 2 * MiB, 256, cudaStreamPerThread);
  void* r = nullptr;
  std::thread t([&] { r = a.allocate_async(2 * MiB, 256, cudaStreamPerThread); });
  t.join();
  CHECK(r == p);  // another thread's per-thread stream: handed over with a wait
  CHECK(w->waits == 1);
  std::thread t2([&] { a.deallocate_async(r, 2 * MiB, 256, cudaStreamPerThread); });
  t2.join();
  CHECK(a.validate().empty());
}

TEST_CASE("arena: an exiting thread's cache returns to the arena", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  const cudaStream_t s = fake_stream(1);
  void* p = nullptr;
  std::thread t([&] {
    p = a.allocate_async(64 * 1024, 256, s);
    a.deallocate_async(p, 64 * 1024, 256, s);
    void* q = a.allocate_async(64 * 1024, 256, s);
    a.deallocate_async(q, 64 * 1024, 256, s);
  });
  t.join();
  const auto st = a.stats();
  CHECK(st.bytes_cached == 0);
  CHECK(st.cache_hits == 1);
  CHECK(st.bytes_in_use == 0);
  CHECK(a.allocate_async(64 * 1024, 256, s) == p);
  a.deallocate_async(p, 64 * 1024, 256, s);
  CHECK(a.validate().empty());
}

TEST_CASE("arena: thread cache respects its byte budget", "[memory][host]") {
  fusex::arena_options o = small_options();
  o.thread_cache_bytes = 4 * MiB;
  o.max_cached_block_bytes = 2 * MiB;
  fake_arena a(fake_backend{}, o);
  const cudaStream_t s = fake_stream(1);
  std::vector<void*> ps;
  for (int i = 0; i < 10; ++i) ps.push_back(a.allocate_async(1 * MiB, 256, s));
  for (void* p : ps) a.deallocate_async(p, 1 * MiB, 256, s);
  CHECK(a.stats().bytes_cached <= 4 * MiB);
  CHECK(a.validate().empty());
}

// Error catalogue (docs/reliability.md): every misuse of the arena throws the documented type and
// the message names the call and the culprit (pointer, size, alignment, stream or option).
TEST_CASE("arena: each misuse throws its type and names the call and the culprit", "[memory][host][errors]") {
  using fusex::detail::format_pointer;
  SECTION("options") {
    fusex::arena_options o = small_options();
    o.chunk_granularity = 1000;
    const std::string m1 = thrown_message<fusex::invalid_argument>([&] { fake_arena a(fake_backend{}, o); });
    INFO(m1);
    CHECK(contains(m1, "chunk_granularity 1000 is not a non-zero multiple of 256"));
    o = small_options();
    o.growth_ratio = -1.0;
    const std::string m2 = thrown_message<fusex::invalid_argument>([&] { fake_arena a(fake_backend{}, o); });
    CHECK(contains(m2, "growth_ratio must be >= 0, got -1"));
  }
  SECTION("allocation and deallocation") {
    fake_arena a(fake_backend{}, small_options());
    const cudaStream_t s = fake_stream(1);
    const std::string m1 = thrown_message<fusex::invalid_argument>([&] { (void)a.allocate_async(64, 3, s); });
    INFO(m1);
    CHECK(contains(m1, "allocate_async of 64 bytes with alignment 3"));
    const std::size_t huge = std::size_t{1} << 63;
    bool caught = false;
    try {
      (void)a.allocate_async(huge, 256, s);
    } catch (const fusex::bad_alloc& e) {
      caught = true;
      CHECK(contains(e.what(), "cannot allocate " + std::to_string(huge) + " bytes"));
      CHECK(contains(e.what(), "larger than any device"));
      CHECK(e.requested_bytes() == huge);
    }
    CHECK(caught);
    const std::string m2 = thrown_message<fusex::invalid_argument>([&] { a.deallocate_async(nullptr, 16, 256, s); });
    CHECK(contains(m2, "deallocate_async(nullptr, 16 bytes)"));
    void* p = a.allocate_async(4096, 256, s);
    void* foreign = reinterpret_cast<void*>(0xdead0000);
    const std::string m3 = thrown_message<fusex::invalid_argument>([&] { a.deallocate_async(foreign, 4096, 256, s); });
    INFO(m3);
    CHECK(contains(m3, "deallocate_async(" + format_pointer(foreign) + ", 4096 bytes, alignment 256)"));
    CHECK(contains(m3, "not allocated by this arena"));
    const std::string m4 = thrown_message<fusex::invalid_argument>([&] { a.deallocate_async(p, 4000, 256, s); });
    CHECK(contains(m4, "deallocate_async(" + format_pointer(p) + ", 4000 bytes, alignment 256)"));
    CHECK(contains(m4, "allocated with 4096 bytes and alignment 256"));
    const std::string m5 = thrown_message<fusex::invalid_argument>([&] { a.record_stream(p, cudaStreamPerThread); });
    CHECK(contains(m5, "record_stream with the per-thread default stream"));
    const std::string m6 = thrown_message<fusex::invalid_argument>([&] { a.record_stream(foreign, fake_stream(2)); });
    CHECK(contains(m6, "record_stream(" + format_pointer(foreign) + "): not the start of a live allocation"));
    const std::string m7 = thrown_message<fusex::error>([&] { a.release(); });
    CHECK(contains(m7, "release() with 1 live allocation(s) and 0 graph-private pool(s)"));
    a.deallocate_async(p, 4096, 256, s);
    const std::string m8 = thrown_message<fusex::invalid_argument>([&] { a.deallocate_async(p, 4096, 256, s); });
    CHECK(contains(m8, "deallocate_async(" + format_pointer(p) + ", 4096 bytes, alignment 256)"));
    CHECK(contains(m8, "double free"));
    CHECK(a.validate().empty());
  }
  SECTION("growth limits") {
    fusex::arena_options o = small_options();
    o.max_reserved_bytes = 8 * MiB;
    fake_arena a(fake_backend{}, o);
    const cudaStream_t s = fake_stream(1);
    void* p = a.allocate_async(7 * MiB, 256, s);
    const std::string m = thrown_message<fusex::bad_alloc>([&] { (void)a.allocate_async(4 * MiB, 256, s); });
    INFO(m);
    CHECK(contains(m, std::to_string(4 * MiB) + " bytes"));
    CHECK(contains(m, "max_reserved_bytes"));
    a.deallocate_async(p, 7 * MiB, 256, s);
  }
  SECTION("streams being captured") {
    fake_arena a(fake_backend{}, no_cache_options());
    auto w = a.backend().w;
    const cudaStream_t s = fake_stream(1);
    // A free not yet covered by an event, then the stream is captured: the arena cannot record on it.
    void* p = a.allocate_async(4096, 256, s);
    a.deallocate_async(p, 4096, 256, s);
    w->set_capturing(s, true, 7);
    const std::string m1 = thrown_message<fusex::error>([&] { a.forget_stream(s); });
    INFO(m1);
    CHECK(contains(m1, "forget_stream(" + format_pointer(s) + ") while the stream is being captured"));
    const std::string m2 = thrown_message<fusex::error>([&] { a.release(); });
    CHECK(contains(m2, "release(): 1 chunk(s) could not be returned now"));
    const std::string m3 = thrown_message<fusex::error>([&] { (void)a.allocate_async(4096, 256, s); });
    CHECK(contains(m3, "allocate_async(4096 bytes) on stream " + format_pointer(s)));
    CHECK(contains(m3, "capture id 7"));
    const std::string m4 = thrown_message<fusex::error>([&] { (void)a.make_private_pool(s); });
    CHECK(contains(m4, "make_private_pool on a stream that is being captured"));
    w->set_capturing(s, false, 0);
    void* big = a.allocate_async(200 * MiB, 256, s);
    w->set_capturing(s, true, 8);
    const std::string m5 = thrown_message<fusex::error>([&] { a.deallocate_async(big, 200 * MiB, 256, s); });
    CHECK(contains(m5, "deallocate_async(" + format_pointer(big) + ") on stream " + format_pointer(s)));
    CHECK(contains(m5, "capture id 8"));
    w->set_capturing(s, false, 0);
    a.deallocate_async(big, 200 * MiB, 256, s);
    a.forget_stream(s);
    a.release();
    CHECK(w->capture_violations == 0);
  }
  SECTION("graph-private pools") {
    fake_arena a(fake_backend{}, small_options());
    auto w = a.backend().w;
    const cudaStream_t origin = fake_stream(1), eager = fake_stream(3);
    for (cudaStream_t d : {static_cast<cudaStream_t>(nullptr), cudaStreamLegacy, cudaStreamPerThread}) {
      const std::string m = thrown_message<fusex::invalid_argument>([&] { (void)a.make_private_pool(d); });
      CHECK(contains(m, "make_private_pool needs an explicit stream"));
      CHECK(contains(thrown_message<fusex::invalid_argument>([&] { (void)a.begin_private_pool(d); }),
                     "begin_private_pool needs an explicit stream"));
    }
    fake_arena::private_pool none;
    const std::string m0 = thrown_message<fusex::invalid_argument>([&] { a.end_private_pool(none); });
    CHECK(contains(m0, "end_private_pool with an empty private_pool handle"));
    CHECK(contains(thrown_message<fusex::invalid_argument>([&] { none.reserve(MiB, origin); }),
                   "private_pool: empty handle"));
    fusex::private_pool_options po;
    po.reserve_bytes = 2 * MiB;
    auto pool = a.make_private_pool(origin, po);
    const std::string m1 = thrown_message<fusex::error>([&] { a.end_private_pool(pool); });
    CHECK(contains(m1, "end_private_pool: the pool is not capturing"));
    a.begin_private_pool(origin, pool);
    const std::string m2 = thrown_message<fusex::error>([&] { a.begin_private_pool(origin, pool); });
    CHECK(contains(m2, "begin_private_pool: the pool is already capturing"));
    w->set_capturing(origin, true, 11);
    const std::string m3 = thrown_message<fusex::error>([&] { pool.reserve(MiB, origin); });
    CHECK(contains(m3, "private_pool::reserve during a capture"));
    void* out = a.allocate_async(1 * MiB, 256, origin);
    bool caught = false;
    try {
      (void)a.allocate_async(8 * MiB, 256, origin);
    } catch (const fusex::bad_alloc& e) {
      caught = true;
      const std::string m = e.what();
      INFO(m);
      CHECK(contains(m, "graph-private pool exhausted during stream capture: cannot allocate " +
                            std::to_string(8 * MiB) + " bytes"));
      CHECK(contains(m, "on stream " + format_pointer(origin)));
      CHECK(e.requested_bytes() == 8 * MiB);
    }
    CHECK(caught);
    w->set_capturing(origin, false, 0);
    a.end_private_pool(pool);
    // The graph's output is freed eagerly on a stream (no event yet) that someone then captures:
    // the next capture into the pool cannot order itself after that free.
    a.deallocate_async(out, 1 * MiB, 256, eager);
    w->set_capturing(eager, true, 12);
    const std::string m4 = thrown_message<fusex::error>([&] { a.begin_private_pool(origin, pool); });
    CHECK(contains(m4, "begin_private_pool: memory of the pool was last used on a stream that is being captured"));
    w->set_capturing(eager, false, 0);
    w->set_capturing(origin, true, 13);
    const std::string m5 = thrown_message<fusex::error>([&] { a.begin_private_pool(origin, pool); });
    CHECK(contains(m5, "begin_private_pool on a stream that is already being captured"));
    w->set_capturing(origin, false, 0);
    pool.reset();
    CHECK(a.validate().empty());
    CHECK(w->capture_violations == 0);
  }
}

namespace {
struct plain_resource {
  void* allocate_async(std::size_t, std::size_t, cudaStream_t) { return nullptr; }
  void deallocate_async(void*, std::size_t, std::size_t, cudaStream_t) {}
};
}  // namespace

TEST_CASE("device_resource_ref: type erasure, record_stream, target", "[memory][host]") {
  fake_arena a(fake_backend{}, small_options());
  fusex::device_resource_ref r(a);
  CHECK(r.supports_record_stream());
  CHECK(r.target<fake_arena>() == &a);
  CHECK(r.target<plain_resource>() == nullptr);
  const cudaStream_t s = fake_stream(1), u = fake_stream(2);
  void* p = r.allocate_async(1000, 256, s);
  CHECK(a.owns(p));
  r.record_stream(p, u);
  r.deallocate_async(p, 1000, 256, s);
  CHECK(!a.owns(p));
  plain_resource pr;
  fusex::device_resource_ref r2(pr);
  CHECK(!r2.supports_record_stream());
  CHECK_THROWS_AS(r2.record_stream(nullptr, s), fusex::invalid_argument);
  CHECK(contains(thrown_message<fusex::invalid_argument>([&] { r2.record_stream(nullptr, s); }), "no record_stream"));
  CHECK(r2 != r);
  fusex::device_resource_ref r3 = r;
  CHECK(r3 == r);
}
