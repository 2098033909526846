// GPU suite, part 1, one dtype group: every floating math op on float and double against a double-
// precision reference (elementwise_ops_gpu_cases.hpp). Each dtype group of the per-dtype test cases
// has its own translation unit (see test_elementwise_ops_gpu.cu), so that the groups compile in
// parallel.
#include "elementwise_ops_gpu_cases.hpp"

using namespace fusex_test;

TEMPLATE_TEST_CASE("gpu: floating math ops match a double reference", "[gpu][elementwise]", float, double) {
  floating_math_ops<TestType>();
}
