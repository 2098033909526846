#pragma once
// Shared checks for the elementwise GPU tests: evaluate an expression of random non-zero inputs on
// the device into a poisoned output and compare with a double-precision reference.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace fusex_test {

// Evaluates make_expr(view of x) into y on the device and compares with ref(double) elementwise.
template <class T, class MakeExpr, class Ref>
void check_unary(const char* name, MakeExpr make_expr, Ref ref, double lo, double hi, std::size_t n = 4099,
                 double tol_scale = 1) {
  using R = typename decltype(make_expr(fusex::make_view(static_cast<T*>(nullptr), {0})))::value_type;
  INFO("op " << name << ", input " << fusex::dtype_name<T>() << ", result " << fusex::dtype_name<R>());
  const auto hx = random_values<T>(n, lo, hi, 1234u + static_cast<unsigned>(n));
  device_array<T> x(n);
  device_array<R> y(n);
  x.upload(hx);
  y.poison();
  stream_guard sg;
  fusex::eval(fusex::make_view(y.data(), {static_cast<std::int64_t>(n)}),
              make_expr(fusex::make_view(x.data(), {static_cast<std::int64_t>(n)})), sg.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  std::vector<double> expect(n);
  for (std::size_t i = 0; i < n; ++i) expect[i] = round_to<R>(ref(to_double(hx[i])));
  const double tol = fusex::is_floating_v<R> ? tolerance<R>() * tol_scale : 0;
  const std::string err = compare(y.download(), expect, tol);
  INFO(err);
  CHECK(err.empty());
}

template <class T, class MakeExpr, class Ref>
void check_binary(const char* name, MakeExpr make_expr, Ref ref, double lo, double hi, std::size_t n = 2053) {
  using R = typename decltype(make_expr(fusex::make_view(static_cast<T*>(nullptr), {0}),
                                        fusex::make_view(static_cast<T*>(nullptr), {0})))::value_type;
  INFO("op " << name << ", inputs " << fusex::dtype_name<T>() << ", result " << fusex::dtype_name<R>());
  const auto ha = random_values<T>(n, lo, hi, 77u);
  const auto hb = random_values<T>(n, lo, hi, 78u);
  device_array<T> a(n), b(n);
  device_array<R> y(n);
  a.upload(ha);
  b.upload(hb);
  y.poison();
  stream_guard sg;
  const auto sh = fusex::shape_t{static_cast<std::int64_t>(n)};
  fusex::eval(fusex::make_view(y.data(), sh), make_expr(fusex::make_view(a.data(), sh), fusex::make_view(b.data(), sh)), sg.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  std::vector<double> expect(n);
  for (std::size_t i = 0; i < n; ++i) expect[i] = round_to<R>(ref(to_double(ha[i]), to_double(hb[i])));
  const double tol = fusex::is_floating_v<R> ? tolerance<R>() : 0;
  const std::string err = compare(y.download(), expect, tol);
  INFO(err);
  CHECK(err.empty());
}

// Integer reference arithmetic in T's wrap-around semantics.
template <class T>
double wrap(long long v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return static_cast<double>(static_cast<T>(v));
}

}  // namespace fusex_test
