// Mistakes that are visible at compile time must stop compilation with a readable message.
// tests/core/CMakeLists.txt compiles this file once per case (-DFXT_CASE=n, syntax check only) and
// requires the compiler's output to contain the expected static_assert message; case 0 must compile.
#include <fusex/fusex.hpp>

#include <cstdint>

void fxt_case() {
  fusex::view<float> x;
  fusex::view<float> y;
  fusex::view<std::int32_t> i;
  (void)x;
  (void)y;
  (void)i;
#if FXT_CASE == 0  // control: valid code
  fusex::host::eval(y, (i & i) + (i << 1) + fusex::map([](float v) { return v; }, x));
#elif FXT_CASE == 1   // bitwise op on floating operands
  auto e = x & y;
  (void)e;
#elif FXT_CASE == 2   // shift of floating operands
  auto e = x << 1;
  (void)e;
#elif FXT_CASE == 3   // ~ of a floating operand
  auto e = ~x;
  (void)e;
#elif FXT_CASE == 4   // a const destination
  fusex::host::eval(fusex::view<const float>(), x + 1);
#elif FXT_CASE == 5   // an element type fusex does not support
  fusex::view<short> s;
  (void)s;
#elif FXT_CASE == 6   // cast to an unsupported type
  auto e = fusex::cast<unsigned>(x);
  (void)e;
#elif FXT_CASE == 7   // a map functor returning an unsupported type
  auto e = fusex::map([](float v) { return static_cast<unsigned>(v); }, x);
  (void)e;
#elif FXT_CASE == 8   // tie with fewer expressions than destinations
  fusex::host::eval(fusex::tie(x, y), x + 1);
#elif FXT_CASE == 9   // the device evaluation in a translation unit not compiled by nvcc
  fusex::eval(y, x + 1, cudaStream_t{});
#elif FXT_CASE == 10  // max with a C++ number: a reduction over axis -1 was probably meant
  auto e = fusex::max(x, -1);
  (void)e;
#elif FXT_CASE == 11  // min with a C++ number
  auto e = fusex::min(x, 0.5f);
  (void)e;
#else
#error "unknown FXT_CASE"
#endif
}
