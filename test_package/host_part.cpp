// The same headers through the host C++ compiler: checks the include paths the Conan package gives
// a plain C++ translation unit (CUDA runtime headers and, with CUDA 13, CCCL).
#if __has_include(<fusex/fusex.hpp>)
#include <fusex/fusex.hpp>
#else
#include <fusex/core/view.hpp>
#endif

long long fusex_test_package_host_part() {
  float host[12] = {};
  fusex::view<float> v(host, {3, 4});
  return static_cast<long long>(v.size());
}
