// GPU suite, part 1, one dtype: every floating math op on float32
// against a double-precision reference (elementwise_ops_gpu_cases.hpp). Each dtype of the
// per-dtype test cases has its own translation unit (see test_elementwise_ops_gpu.cu), so that they
// compile in parallel and none takes much more than a minute on one core.
#include "elementwise_ops_gpu_cases.hpp"

using namespace fusex_test;

TEMPLATE_TEST_CASE("gpu: floating math ops match a double reference", "[gpu][elementwise]", float) {
  floating_math_ops<TestType>();
}
