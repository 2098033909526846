// Allocator + graph stress (label `stress`, run by tools/ci/gpu_gates.sh, not by the normal test run):
// 8 host threads x 4 shared streams for FUSEX_STRESS_SECONDS (default 60) of random
//   allocate (fusex::arena, random sizes, random stream),
//   compute (fusex::eval copies a live block into a new one through the fused kernel),
//   capture + replay (fusex::graph_capture records a fill and an eval into two live blocks; the
//   graph is replayed several times),
//   free (after a checksum kernel, on the block's stream or on another one ordered after it).
// Every block carries a seed; its contents are checked against pattern(seed, i) before it is freed
// and at the end. Asserts: zero corrupted words, no exception, and the arena's statistics back to
// zero at the end (no live allocation, no live private pool: nothing leaked).
#include "fusex_catch.hpp"
#include "gpu_memory_util.cuh"

#include <fusex/fusex.hpp>
#include <fusex/graph/graph.hpp>
#include <fusex/memory/memory.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace fusex_memtest;

namespace {
struct block {
  void* p;
  std::size_t bytes;
  unsigned seed;
  cudaStream_t stream;
};
fusex::view<std::int32_t> as_view(const block& b) {
  return fusex::view<std::int32_t>(static_cast<std::int32_t*>(b.p), {static_cast<std::int64_t>(b.bytes / 4)});
}
}  // namespace

TEST_CASE("stress (GPU): arena + eval + graph capture/replay, 8 threads x 4 streams", "[stress][gpu]") {
  const char* env = std::getenv("FUSEX_STRESS_SECONDS");
  const double seconds = env ? std::atof(env) : 60.0;
  constexpr int threads = 8, streams_n = 4;
  std::vector<cudaStream_t> streams(streams_n);
  for (auto& s : streams) FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  device_counter bad;
  std::atomic<unsigned> next_seed{1000};
  std::atomic<long long> ops{0}, replays{0}, evals{0};
  std::vector<std::string> errors(threads);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  fusex::arena a;
  const fusex::device_resource_ref previous = fusex::set_default_resource(a);  // captures pool from `a`
  {
    auto body = [&](int t) {
      std::vector<block> live;
      try {
        std::mt19937_64 rng(static_cast<unsigned>(t) * 104729u + 7);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        auto size = [&] {
          const int u = pick(100);
          const std::size_t hi = u < 80 ? (64u << 10) : (u < 98 ? (2u << 20) : (32u << 20));
          return std::uniform_int_distribution<std::size_t>(1, hi / 4)(rng) * 4;
        };
        auto alloc = [&](cudaStream_t s) {
          block b{nullptr, size(), next_seed++, s};
          b.p = a.allocate_async(b.bytes, s);
          fill(b.p, b.bytes, b.seed, s);
          live.push_back(b);
        };
        auto release = [&](std::size_t i) {
          block b = live[i];
          live[i] = live.back();
          live.pop_back();
          check(b.p, b.bytes, b.seed, b.stream, bad.device());
          cudaStream_t s = b.stream;
          if (pick(4) == 0) {  // free on another stream, ordered after the block's last use
            s = streams[static_cast<std::size_t>(pick(streams_n))];
            if (s != b.stream) order(s, b.stream);
          }
          a.deallocate_async(b.p, b.bytes, s);
        };
        while (std::chrono::steady_clock::now() < deadline) {
          const cudaStream_t s = streams[static_cast<std::size_t>(pick(streams_n))];
          const int u = pick(100);
          if (live.size() < 4 || (u < 40 && live.size() < 48)) {
            alloc(s);
          } else if (u < 75) {
            release(static_cast<std::size_t>(pick(static_cast<int>(live.size()))));
          } else if (u < 92) {  // compute: a new block = a live one + 0, through the fused kernel
            const block& src = live[static_cast<std::size_t>(pick(static_cast<int>(live.size())))];
            block dst{a.allocate_async(src.bytes, src.stream), src.bytes, src.seed, src.stream};
            fusex::eval(as_view(dst), as_view(src) + 0, src.stream);
            live.push_back(dst);
            ++evals;
          } else {  // capture a fill + eval into two live blocks of one stream, replay it
            const std::size_t i = static_cast<std::size_t>(pick(static_cast<int>(live.size())));
            std::size_t j = static_cast<std::size_t>(pick(static_cast<int>(live.size())));
            if (i == j || live[i].bytes != live[j].bytes) {
              // make a partner of the same size on the same stream
              block b{a.allocate_async(live[i].bytes, live[i].stream), live[i].bytes, 0, live[i].stream};
              fill(b.p, b.bytes, 0, b.stream);
              live.push_back(b);
              j = live.size() - 1;
            }
            block& x = live[i];
            block& y = live[j];
            if (y.stream != x.stream) order(x.stream, y.stream);
            y.stream = x.stream;
            cudaStream_t cs;  // a private stream for the capture, ordered with the blocks' stream
            FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
            order(cs, x.stream);
            const unsigned seed = next_seed++;
            {
              fusex::graph_exec g = [&] {
                fusex::graph_capture cap(cs);
                fill(x.p, x.bytes, seed, cs);
                fusex::eval(as_view(y), as_view(x) + 0, cs);
                return cap.finish();
              }();
              const int n = 1 + pick(4);
              for (int k = 0; k < n; ++k) g.launch(cs);
              replays += n;
              x.seed = y.seed = seed;
              order(x.stream, cs);
            }  // the graph (and its private pool, released on cs) goes before its stream
            FUSEX_CUDA_CHECK(cudaStreamSynchronize(cs));
            a.forget_stream(cs);  // the arena's contract before cudaStreamDestroy
            FUSEX_CUDA_CHECK(cudaStreamDestroy(cs));
          }
          ++ops;
        }
        while (!live.empty()) release(live.size() - 1);
      } catch (const fusex::error& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = "unknown exception";
      }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto& th : pool) th.join();
  }
  for (auto s : streams) FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  FUSEX_CUDA_CHECK(cudaDeviceSynchronize());
  fusex::set_default_resource(previous);
  for (int t = 0; t < threads; ++t) {
    INFO("thread " << t);
    CHECK(errors[static_cast<std::size_t>(t)] == "");
  }
  const fusex::arena_stats st = a.stats();
  std::printf(
      "stress: %.0f s, %lld operations, %lld evals, %lld graph replays, %llu allocations, %llu upstream chunks, "
      "peak %zu bytes in use, corrupted words %llu; at the end: %zu bytes / %zu allocations in use, %zu private "
      "pools\n",
      seconds, ops.load(), evals.load(), replays.load(), static_cast<unsigned long long>(st.allocations),
      static_cast<unsigned long long>(st.upstream_allocations), st.peak_bytes_in_use, bad.value(), st.bytes_in_use,
      st.allocations_in_use, st.private_pools);
  CHECK(bad.value() == 0);
  CHECK(st.bytes_in_use == 0);
  CHECK(st.allocations_in_use == 0);
  CHECK(st.private_pools == 0);
  CHECK(st.allocations == st.deallocations);
  for (auto s : streams) FUSEX_CUDA_CHECK(cudaStreamDestroy(s));
}
