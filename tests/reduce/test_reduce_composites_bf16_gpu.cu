// GPU suite for reductions: the composites (softmax, log_softmax, layer_norm, rms_norm) with
// epilogues, one kernel each, against the double-precision references and tolerances of
// composite_reference.hpp, for bfloat16 (float32 and float16: test_reduce_composites_gpu.cu and
// test_reduce_composites_half_gpu.cu, one translation unit per dtype so that they compile in
// parallel).
#include "reduce_gpu_support.hpp"

using fusex::bfloat16;
using namespace reduce_gpu_test;

TEMPLATE_TEST_CASE("gpu: softmax, log_softmax, layer_norm, rms_norm with epilogues are one kernel", "[gpu][reduce]",
                   bfloat16) {
  composites_in_every_launch_shape<TestType>();
}
