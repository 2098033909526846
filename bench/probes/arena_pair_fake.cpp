// Probe: the arena's allocate + free pair over the host tests' fake backend (no CUDA calls, so the
// bookkeeping alone), one thread, 2 x 10^6 pairs per run, 15 runs sorted, at the sizes of
// bench_memory_alloc's BM_pair (0 = its cycle of 64 sizes from 256 B to 64 MiB). Plain C++:
//   g++ -std=c++17 -O3 -DNDEBUG -Iinclude -Itests/memory -I/usr/local/cuda/include
//       bench/probes/arena_pair_fake.cpp -o arena_pair_fake -lpthread
#include "fake_backend.hpp"
#include <chrono>
#include <cmath>
#include <random>
#include <cstdio>
#include <algorithm>
using namespace fusex_test;
int main() {
  const std::size_t n = 2000000;
  std::vector<std::size_t> mixed;
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> lg(8.0, std::log2(double(64 << 20)));
  for (int i = 0; i < 64; ++i) mixed.push_back(static_cast<std::size_t>(std::exp2(lg(rng))));
  for (std::size_t bytes : {std::size_t{1024}, std::size_t{1} << 20, std::size_t{64} << 20, std::size_t{0}}) {
    fusex::arena_options o;
    o.free_events = fusex::free_event::lazy;
    o.thorough_checks = false;
    o.capture = fusex::capture_check::announced;
    fake_backend be;
    fake_arena a(be, o);
    cudaStream_t s = fake_stream(1);
    for (std::size_t b : mixed) a.deallocate_async(a.allocate_async(bytes ? bytes : b, 256, s), bytes ? bytes : b, 256, s);
    std::vector<double> t;
    for (int r = 0; r < 15; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t b = bytes ? bytes : mixed[i & 63];
        void* p = a.allocate_async(b, 256, s);
        asm volatile("" : : "r"(p) : "memory");
        a.deallocate_async(p, b, 256, s);
      }
      t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n);
    }
    std::sort(t.begin(), t.end());
    std::printf("pair %9zu:", bytes);
    for (double x : t) std::printf(" %.1f", x);
    auto st = a.stats();
    std::printf("  | hits %zu/%zu\n", (size_t)st.cache_hits, (size_t)st.allocations);
  }
}
