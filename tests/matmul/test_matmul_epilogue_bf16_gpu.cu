// GPU tests of fusex matmul: every epilogue form on every path (one cuBLASLt call, GEMM +
// elementwise kernel, the fusex kernel) with bfloat16 operands, against a double-precision host
// reference with poisoned outputs (matmul_gpu_support.hpp). One translation unit per dtype: each
// instantiates every epilogue kernel, so they compile in parallel.
#include "matmul_gpu_support.hpp"

using namespace matmul_test;
using fusex::bfloat16;

TEST_CASE("matmul gpu: every epilogue form, bfloat16", "[matmul][gpu]") { epilogue_forms<bfloat16>(96, 80, 72); }
