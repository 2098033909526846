// The staging pipeline of examples/staging_pipeline (staging_pipeline.cuh: a ring of 3 pinned +
// device slots, each batch staged into pinned memory in chunks whose H2D copies are enqueued as
// they are staged, reduced on a compute stream) computes the right result for every batch, in every
// mode, including with slow kernels that would expose a copy overwriting a device slot still being
// read, or the host refilling a pinned slot still being copied. The batches here are 4 MiB, one
// default-sized (4 MiB) chunk each.
#include "fusex_catch.hpp"
#include "staging_pipeline.cuh"

#include <cmath>

TEST_CASE("staging pipeline: every batch matches the reference", "[memory][gpu][staging]") {
  staging::config c;
  c.batch_elems = std::size_t{1} << 20;  // 4 MiB
  c.batches = 10;
  c.dataset_batches = 3;
  const std::vector<float> dataset = staging::make_dataset(c);
  for (int work : {16, 3000}) {
    INFO("work " << work);
    const std::vector<double> ref = staging::device_reference(c, dataset, work);
    if (work == 16) {
      for (int b = 0; b < c.dataset_batches; ++b) {
        const double h = staging::host_reference(dataset, c, b, work);
        CHECK(std::abs(h - ref[static_cast<std::size_t>(b)]) <= 1e-9 * std::abs(h));
      }
    }
    // Distinct batches give distinct sums: a batch computed on the wrong data is noticed.
    CHECK(ref[0] != ref[1]);
    CHECK(ref[1] != ref[2]);
    for (staging::mode m : {staging::mode::overlapped, staging::mode::single_stream, staging::mode::compute_only}) {
      const staging::run_result r = staging::run(c, m, dataset, work);
      REQUIRE(r.sums.size() == static_cast<std::size_t>(c.batches));
      CHECK(staging::mismatches(r, ref) == 0);
    }
    const staging::run_result copy = staging::run(c, staging::mode::copy_only, dataset, work);
    CHECK(copy.sums.empty());
    CHECK(copy.seconds > 0);
  }
}
