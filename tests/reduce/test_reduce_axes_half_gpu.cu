// GPU suite for reductions: every reduction over several axis sets (row kernel, generic thread and
// block kernels) on half inputs against a double-precision reference (reduce_gpu_support.hpp).
// One translation unit per dtype, compiled in parallel: each instantiates every reduction kernel.
#include "reduce_gpu_support.hpp"

using fusex::half;
using namespace reduce_gpu_test;

TEMPLATE_TEST_CASE("gpu: reductions over every axis set match a double reference", "[gpu][reduce]", half) {
  every_axis_set<TestType>();
}
