// The transformer-like trace of bench/memory (10^5 allocations) replayed on the arena over a fake
// device: peak reserved stays within 1.25 x peak live (the benchmark measures the same on an H200),
// and every chunk returns at the end.
#include "fake_backend.hpp"
#include "fusex_catch.hpp"
#include "transformer_trace.hpp"

#include <vector>

using namespace fusex_test;

TEST_CASE("arena: transformer trace, peak reserved <= 1.25 x peak live", "[memory][host][trace]") {
  const fusex_trace::trace t = fusex_trace::transformer_trace(100000, 1);
  REQUIRE(t.allocations >= 100000);
  for (unsigned streams : {1u, 2u}) {
    fusex::arena_options o;  // the defaults of the device arena
    o.capture = fusex::capture_check::announced;
    o.thorough_checks = false;
    fake_arena a(fake_backend{}, o);
    auto w = a.backend().w;
    std::vector<void*> ptr(t.max_id);
    std::vector<cudaStream_t> on(t.max_id);
    std::size_t i = 0;
    for (const auto& op : t.ops) {
      if (op.allocate) {
        // With two streams, alternate layers' tensors between a compute and a side stream.
        on[op.id] = fake_stream(1 + static_cast<int>((i++ / 40) % streams));
        ptr[op.id] = a.allocate_async(op.bytes, 256, on[op.id]);
      } else {
        a.deallocate_async(ptr[op.id], op.bytes, 256, on[op.id]);
      }
    }
    const auto st = a.stats();
    const double ratio = static_cast<double>(st.peak_bytes_reserved) / static_cast<double>(t.peak_live_bytes);
    WARN(streams << " stream(s): peak live " << (t.peak_live_bytes >> 20) << " MiB, peak reserved "
                 << (st.peak_bytes_reserved >> 20) << " MiB, ratio " << ratio << ", " << st.chunks << " chunks, reuse "
                 << st.reuse_rate());
    CHECK(ratio <= 1.25);
    CHECK(st.bytes_in_use == 0);
    CHECK(st.reuse_rate() > 0.99);
    CHECK(a.validate().empty());
    a.release();
    CHECK(w->chunks.empty());
  }
}
