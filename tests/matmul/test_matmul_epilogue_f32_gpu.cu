// GPU tests of fusex matmul: every epilogue form on every path (one cuBLASLt call, GEMM +
// elementwise kernel, the fusex kernel) with float32 operands, against a double-precision host
// reference with poisoned outputs (matmul_gpu_support.hpp). One translation unit per dtype: each
// instantiates every epilogue kernel, so they compile in parallel.
#include "matmul_gpu_support.hpp"

using namespace matmul_test;
TEST_CASE("matmul gpu: every epilogue form, float32", "[matmul][gpu]") { epilogue_forms<float>(96, 80, 72); }
