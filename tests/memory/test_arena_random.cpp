// Randomized allocate/free sequences checked against a simple model, over a fake device:
//  - no two live blocks overlap, every pointer has the requested alignment;
//  - memory freed on stream A (or used on a record_stream'ed stream U) is handed to another
//    stream only once that stream is ordered after the free (the fake device tracks timelines);
//  - everything returns at the end (release leaves no chunk behind), the arena's own invariants
//    hold throughout, and no CUDA call ever targets a stream being captured.
// One thread: 10^6 operations. Several threads: a smaller run, meant for ThreadSanitizer too.
#include "fake_backend.hpp"
#include "fusex_catch.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace fusex_test;

namespace {

constexpr std::size_t KiB = 1024, MiB = KiB * 1024;

struct live_block {
  void* p;
  std::size_t bytes;
  std::size_t align;
  cudaStream_t stream;
  std::vector<cudaStream_t> uses;
};

// The model: live ranges, and freed ranges with the points reuse must be ordered after.
class model {
 public:
  explicit model(fake_world& w) : w_(w) {}

  // Checks a fresh allocation of [p, p+bytes) on `s`; returns an error description or "".
  std::string on_allocate(void* p, std::size_t bytes, std::size_t align, cudaStream_t s) {
    std::lock_guard<std::mutex> l(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (a % align != 0) return "misaligned pointer";
    const std::uintptr_t e = a + bytes;
    auto it = live_.upper_bound(a);
    if (it != live_.begin() && std::prev(it)->second > a) return "overlaps a live block (below)";
    if (it != live_.end() && it->first < e) return "overlaps a live block (above)";
    live_.emplace(a, e);
    // Freed ranges overlapping the new block: their dependencies must be satisfied.
    auto f = freed_.upper_bound(a);
    if (f != freed_.begin() && std::prev(f)->second.end > a) f = std::prev(f);
    std::string err;
    while (f != freed_.end() && f->first < e) {
      for (const auto& d : f->second.deps) {
        if (!w_.ordered_after(s, d.first, d.second)) err = "reused on a stream not ordered after its free";
      }
      // Keep the parts outside [a, e).
      const std::uintptr_t fs = f->first, fe = f->second.end;
      const auto deps = f->second.deps;
      f = freed_.erase(f);
      if (fs < a) freed_.emplace(fs, range{a, deps});
      if (fe > e) freed_.emplace(e, range{fe, deps});
    }
    return err;
  }

  // Records the free of [p, p+bytes): reuse must follow `deps`.
  void on_free(void* p, std::size_t bytes, std::vector<std::pair<cudaStream_t, std::uint64_t>> deps) {
    std::lock_guard<std::mutex> l(m_);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    live_.erase(a);
    freed_.emplace(a, range{a + bytes, std::move(deps)});
  }

  // Forgets freed ranges outside the fake device's chunks (returned by trim).
  void prune() {
    std::lock_guard<std::mutex> l(m_);
    std::lock_guard<std::mutex> wl(w_.m);
    for (auto it = freed_.begin(); it != freed_.end();) {
      auto c = w_.chunks.upper_bound(it->first);
      const bool inside = c != w_.chunks.begin() && std::prev(c)->first + std::prev(c)->second > it->first;
      it = inside ? std::next(it) : freed_.erase(it);
    }
  }

  std::size_t live_count() {
    std::lock_guard<std::mutex> l(m_);
    return live_.size();
  }

 private:
  struct range {
    std::uintptr_t end;
    std::vector<std::pair<cudaStream_t, std::uint64_t>> deps;
  };
  fake_world& w_;
  std::mutex m_;
  std::map<std::uintptr_t, std::uintptr_t> live_;
  std::map<std::uintptr_t, range> freed_;
};

std::size_t random_size(std::mt19937_64& rng) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  auto in = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
  if (u < 0.60) return in(1, 64 * KiB);
  if (u < 0.90) return in(64 * KiB, 4 * MiB);
  if (u < 0.99) return in(4 * MiB, 64 * MiB);
  return in(64 * MiB, 300 * MiB);
}

std::size_t random_alignment(std::mt19937_64& rng) {
  const int u = std::uniform_int_distribution<int>(0, 99)(rng);
  if (u < 80) return 256;
  if (u < 95) return std::size_t{512} << std::uniform_int_distribution<int>(0, 3)(rng);
  return std::size_t{1} << std::uniform_int_distribution<int>(0, 7)(rng);
}

struct run_counts {
  std::size_t allocations = 0, frees = 0, oom = 0, cross_frees = 0, records = 0;
  std::string first_error;
};

// One worker: `ops` random operations on `streams` with its own live set.
void worker(fake_arena& a, model& m, const std::vector<cudaStream_t>& streams, std::size_t ops, unsigned seed,
            run_counts& out, bool trims) {
  fake_world& w = *a.backend().w;
  std::mt19937_64 rng(seed);
  std::vector<live_block> live;
  auto pick = [&](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };
  auto fail = [&](const std::string& e) {
    if (out.first_error.empty()) out.first_error = e;
  };
  for (std::size_t i = 0; i < ops; ++i) {
    const int u = std::uniform_int_distribution<int>(0, 99)(rng);
    const bool must_free = live.size() > 400;
    if (!must_free && (u < 50 || live.empty())) {
      const std::size_t bytes = random_size(rng), align = random_alignment(rng);
      const cudaStream_t s = streams[pick(streams.size())];
      void* p = nullptr;
      try {
        p = a.allocate_async(bytes, align, s);
      } catch (const fusex::bad_alloc&) {
        ++out.oom;
        continue;
      }
      ++out.allocations;
      const std::string e = m.on_allocate(p, bytes, align, s);
      if (!e.empty()) fail(e);
      w.advance(s);  // a kernel writes it
      live.push_back(live_block{p, bytes, align, s, {}});
    } else if (u < 92 || must_free) {
      const std::size_t k = pick(live.size());
      live_block b = live[k];
      live[k] = live.back();
      live.pop_back();
      cudaStream_t fs = b.stream;
      if (pick(5) == 0) {
        fs = streams[pick(streams.size())];
        if (fs != b.stream) {
          w.user_wait(fs, b.stream);  // the user orders the free after the block's last use
          ++out.cross_frees;
        }
      }
      std::vector<std::pair<cudaStream_t, std::uint64_t>> deps{{fs, w.pos(fs)}};
      for (cudaStream_t us : b.uses) deps.emplace_back(us, w.pos(us));
      m.on_free(b.p, b.bytes, std::move(deps));
      a.deallocate_async(b.p, b.bytes, b.align, fs);
      ++out.frees;
    } else if (u < 96) {
      live_block& b = live[pick(live.size())];
      const cudaStream_t us = streams[pick(streams.size())];
      if (us != b.stream) {
        a.record_stream(b.p, us);
        b.uses.push_back(us);
        w.advance(us);  // a kernel on `us` reads it
        ++out.records;
      }
    } else {
      w.advance(streams[pick(streams.size())], 1 + pick(3));
    }
    if (trims && i % 50000 == 49999) {
      a.trim();
      m.prune();
      const std::string v = a.validate();
      if (!v.empty()) fail("invariant: " + v);
    }
  }
  for (const live_block& b : live) {
    m.on_free(b.p, b.bytes, {{b.stream, w.pos(b.stream)}});
    a.deallocate_async(b.p, b.bytes, b.align, b.stream);
    ++out.frees;
  }
}

}  // namespace

TEST_CASE("arena: 10^6 random operations agree with the model", "[memory][host][random]") {
  fusex::arena_options o = small_options();
  o.thorough_checks = false;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  w->limit = std::size_t{3} << 30;  // out of memory now and then
  model m(*w);
  const std::vector<cudaStream_t> streams{fake_stream(1), fake_stream(2), fake_stream(3), fake_stream(4)};
  run_counts c;
  worker(a, m, streams, 1000000, 12345, c, true);
  INFO(c.first_error);
  CHECK(c.first_error.empty());
  CHECK(c.allocations > 300000);
  CHECK(c.cross_frees > 1000);
  CHECK(c.records > 1000);
  CHECK(a.validate().empty());
  const auto st = a.stats();
  CHECK(st.bytes_in_use == 0);
  CHECK(st.allocations_in_use == 0);
  CHECK(st.stream_handoffs > 0);
  CHECK(st.cache_hits > 0);
  a.release();
  CHECK(w->chunks.empty());
  CHECK(w->reserved == 0);
  CHECK(w->capture_violations == 0);
  WARN("random run: " << c.allocations << " allocations, " << c.oom << " out of memory, " << st.stream_handoffs
                      << " hand-offs, " << st.event_records << " event records, " << st.event_waits << " waits, "
                      << st.cache_hits << " cache hits, peak reserved " << (st.peak_bytes_reserved >> 20) << " MiB");
}

TEST_CASE("arena: threads sharing streams agree with the model", "[memory][host][random][threads]") {
  fusex::arena_options o = small_options();
  o.thorough_checks = false;
  o.stats_batch_bytes = std::size_t{1} << 20;
  fake_arena a(fake_backend{}, o);
  auto w = a.backend().w;
  model m(*w);
  const std::vector<cudaStream_t> streams{fake_stream(1), fake_stream(2), fake_stream(3),
                                          fake_stream(4), fake_stream(5), fake_stream(6)};
  constexpr int threads = 4;
  std::vector<run_counts> counts(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { worker(a, m, streams, 40000, 1000 + static_cast<unsigned>(t), counts[t], false); });
  }
  // Meanwhile, another thread trims and reads statistics.
  std::thread trimmer([&] {
    for (int i = 0; i < 50; ++i) {
      a.trim();
      (void)a.stats();
      std::this_thread::yield();
    }
  });
  for (auto& th : pool) th.join();
  trimmer.join();
  for (const auto& c : counts) {
    INFO(c.first_error);
    CHECK(c.first_error.empty());
  }
  CHECK(a.validate().empty());
  const auto st = a.stats();
  CHECK(st.bytes_in_use == 0);
  CHECK(st.allocations_in_use == 0);
  a.release();
  CHECK(w->chunks.empty());
  CHECK(w->capture_violations == 0);
}
