// GPU suite, part 1, one dtype group: every floating math op on half and bfloat16 against a double-
// precision reference (elementwise_ops_gpu_cases.hpp). Each dtype group of the per-dtype test cases
// has its own translation unit (see test_elementwise_ops_gpu.cu), so that the groups compile in
// parallel.
#include "elementwise_ops_gpu_cases.hpp"

using fusex::bfloat16;
using fusex::half;
using namespace fusex_test;

TEMPLATE_TEST_CASE("gpu: floating math ops match a double reference", "[gpu][elementwise]", half, bfloat16) {
  floating_math_ops<TestType>();
}
