// GPU suite for reductions: the composites (softmax, log_softmax, layer_norm, rms_norm) with
// epilogues, one kernel each, against a double-precision reference (reduce_gpu_support.hpp).
#include "reduce_gpu_support.hpp"

using fusex::bfloat16;
using namespace reduce_gpu_test;

TEMPLATE_TEST_CASE("gpu: softmax, log_softmax, layer_norm, rms_norm with epilogues are one kernel", "[gpu][reduce]", float,
                   bfloat16) {
  SECTION("several rows per block") {
    const row_spread spread(false);
    composites<TestType>();
  }
  SECTION("few rows spread one per block") {
    const row_spread spread(true);
    composites<TestType>();
  }
  SECTION("four vectors per thread (the larger plans' group size)") {
    const row_vectors four(4);
    composites<TestType>();
  }
}
