// GPU suite for reductions: the composites (softmax, log_softmax, layer_norm, rms_norm) with
// epilogues, one kernel each, for float16, against the double-precision references and tolerances
// of composite_reference.hpp. Its own translation unit: it compiles beside the float32 and
// bfloat16 one (test_reduce_composites_gpu.cu) instead of after it.
#include "reduce_gpu_support.hpp"

using fusex::half;
using namespace reduce_gpu_test;

TEMPLATE_TEST_CASE("gpu: softmax, log_softmax, layer_norm, rms_norm with epilogues are one kernel", "[gpu][reduce]",
                   half) {
  composites_in_every_launch_shape<TestType>();
}
