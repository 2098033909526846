// GPU suite, part 1: every op and dtype on the device against a double-precision reference
// computed on the host, on random non-zero inputs with poisoned outputs. The per-dtype test cases
// (elementwise_ops_gpu_cases.hpp) are spread over several translation units by dtype, compiled in
// parallel: here arithmetic/logic on float and double, bool operands and mixed-dtype promotion;
// test_elementwise_ops_arith_{f16,bf16,i8,u8,i32,i64}_gpu.cu and
// test_elementwise_ops_math_{f32,f64,f16,bf16}_gpu.cu the other dtypes and the math ops.
#include "elementwise_ops_gpu_cases.hpp"

using fusex::bfloat16;
using fusex::half;
using namespace fusex_test;

TEMPLATE_TEST_CASE("gpu: arithmetic, comparison and logic ops on every dtype", "[gpu][elementwise]", float, double) {
  arithmetic_logic_ops<TestType>();
}

TEST_CASE("gpu: bool operands", "[gpu][elementwise]") {
  check_binary<bool>(
      "logical_and", [](auto a, auto b) { return a && b; }, [](double a, double b) { return double(a && b); }, 0, 1);
  check_binary<bool>(
      "xor", [](auto a, auto b) { return a ^ b; }, [](double a, double b) { return double((a != 0) != (b != 0)); }, 0,
      1);
  check_binary<bool>(
      "where", [](auto a, auto b) { return fusex::where(a, b, !b); },
      [](double a, double b) { return double(a ? b : !b); }, 0, 1);
  check_unary<bool>(
      "bool + int -> int64", [](auto a) { return a + 3; }, [](double a) { return a + 3; }, 0, 1);
}

TEST_CASE("gpu: mixed dtypes promote as documented", "[gpu][elementwise]") {
  check_unary<std::int32_t>(
      "int32 * 0.5 -> float32", [](auto a) { return a * 0.5; }, [](double a) { return a * 0.5; }, -100, 100);
  check_unary<half>(
      "half + bf16 -> float32", [](auto a) { return a + fusex::cast<bfloat16>(a); },
      [](double a) { return a + round_to<bfloat16>(a); }, -4, 4);
  check_unary<std::uint8_t>(
      "uint8 + int8 -> int32", [](auto a) { return a + fusex::cast<std::int8_t>(a); },
      [](double a) { return a + double(static_cast<std::int8_t>(a)); }, 1, 255);
  check_unary<std::int8_t>(
      "exp(int8) -> float32", [](auto a) { return fusex::exp(a * 0.1); }, [](double a) { return std::exp(a * 0.1f); },
      -50, 50);
}
