// 8 host threads x 4 shared streams hammer one arena: random sizes, frees on the allocating
// stream or on another one (ordered by the test, as a user would), record_stream with slow readers
// on other streams. Every block is filled with a pattern when allocated and checked by a kernel
// before it is freed (and by readers on other streams): any memory handed out while a previous
// user still reads or writes it shows up as a checksum mismatch.
#include "fusex_catch.hpp"
#include "gpu_memory_util.cuh"

#include <fusex/memory/memory.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace fusex_memtest;

namespace {

struct live {
  void* p;
  std::size_t bytes;
  unsigned seed;
  cudaStream_t stream;
};

std::size_t random_bytes(std::mt19937_64& rng) {
  const int u = std::uniform_int_distribution<int>(0, 99)(rng);
  std::size_t hi = 64 * 1024;
  if (u >= 70) hi = 2u << 20;
  if (u >= 97) hi = 48u << 20;
  return std::uniform_int_distribution<std::size_t>(1, hi / 4)(rng) * 4;
}

}  // namespace

TEST_CASE("arena (GPU): 8 threads x 4 streams, checksum on every block", "[memory][gpu][stress]") {
  constexpr int threads = 8, streams_n = 4;
  // FUSEX_ARENA_STRESS_ITERATIONS shortens the run for tools that serialise every kernel
  // (tools/ci/gpu_gates.sh sets it under racecheck); the code paths are the same.
  int iterations = 4000;
  if (const char* env = std::getenv("FUSEX_ARENA_STRESS_ITERATIONS")) iterations = std::max(100, std::atoi(env));
  std::vector<cudaStream_t> streams(streams_n);
  for (auto& s : streams) FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  device_counter bad;
  std::atomic<unsigned> next_seed{100};
  std::atomic<int> errors{0};
  std::vector<std::string> messages(threads);
  {
    fusex::arena a;
    auto body = [&](int t) {
      try {
        std::mt19937_64 rng(static_cast<unsigned>(t) * 7919u + 1);
        auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
        std::vector<live> mine;
        cudaEvent_t ev = nullptr;
        FUSEX_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
        auto order_after = [&](cudaStream_t after, cudaStream_t before) {
          FUSEX_CUDA_CHECK(cudaEventRecord(ev, before));
          FUSEX_CUDA_CHECK(cudaStreamWaitEvent(after, ev, 0));
        };
        for (int i = 0; i < iterations; ++i) {
          const int u = pick(100);
          if ((u < 50 && mine.size() < 48) || mine.empty()) {
            const std::size_t bytes = random_bytes(rng);
            const cudaStream_t s = streams[static_cast<std::size_t>(pick(streams_n))];
            void* p = a.allocate_async(bytes, 256, s);
            const unsigned seed = next_seed.fetch_add(1);
            fill(p, bytes, seed, s);
            mine.push_back(live{p, bytes, seed, s});
          } else if (u < 90) {
            const std::size_t k = static_cast<std::size_t>(pick(static_cast<int>(mine.size())));
            const live b = mine[k];
            mine[k] = mine.back();
            mine.pop_back();
            cudaStream_t f = b.stream;
            if (pick(4) == 0) {
              f = streams[static_cast<std::size_t>(pick(streams_n))];
              order_after(f, b.stream);  // the user orders the free after the block's last use
            }
            check(b.p, b.bytes, b.seed, f, bad.device());
            a.deallocate_async(b.p, b.bytes, 256, f);
          } else {
            // A slow reader on another stream, declared with record_stream; the block stays live.
            live& b = mine[static_cast<std::size_t>(pick(static_cast<int>(mine.size())))];
            const cudaStream_t r = streams[static_cast<std::size_t>(pick(streams_n))];
            if (r == b.stream) continue;
            order_after(r, b.stream);
            check(b.p, b.bytes, b.seed, r, bad.device(), 20000);  // 20 us late
            a.record_stream(b.p, r);
          }
        }
        for (const live& b : mine) {
          check(b.p, b.bytes, b.seed, b.stream, bad.device());
          a.deallocate_async(b.p, b.bytes, 256, b.stream);
        }
        FUSEX_CUDA_CHECK(cudaEventDestroy(ev));
      } catch (const fusex::error& e) {
        messages[static_cast<std::size_t>(t)] = e.what();
        ++errors;
      } catch (const std::exception& e) {
        messages[static_cast<std::size_t>(t)] = e.what();
        ++errors;
      }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
    for (auto& th : pool) th.join();
    FUSEX_CUDA_CHECK(cudaDeviceSynchronize());
    for (const auto& m : messages) {
      INFO(m);
      CHECK(m.empty());
    }
    CHECK(errors.load() == 0);
    CHECK(bad.value() == 0);
    const auto st = a.stats();
    CHECK(st.bytes_in_use == 0);
    CHECK(st.allocations_in_use == 0);
    CHECK(st.allocations >= threads * iterations / 3);
    CHECK(st.stream_handoffs > 0);
    CHECK(a.validate().empty());
    WARN("stress: " << st.allocations << " allocations, " << st.cache_hits << " cache hits, " << st.stream_handoffs
                    << " hand-offs, " << st.event_records << " records, " << st.event_waits << " waits, peak reserved "
                    << (st.peak_bytes_reserved >> 20) << " MiB");
  }  // the arena goes before the streams it used
  for (auto& s : streams) FUSEX_CUDA_CHECK(cudaStreamDestroy(s));
}
