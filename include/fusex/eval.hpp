#pragma once
/// \file
/// Evaluation: fusex::eval (device, asynchronous on a stream), fusex::host::eval (the host
/// backend), fusex::tie for several destinations computed by one kernel, and fusex::explain, the
/// plan printer. Every path plans through the same planner (plan/elementwise_plan.hpp); the
/// dispatch behind these entry points is in dispatch/.

#include <fusex/config.hpp>
#include <fusex/dispatch/elementwise.hpp>
#include <fusex/dispatch/explain.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/tensor.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace fusex {

/// Destinations for a multi-output evaluation: `fusex::eval(fusex::tie(a, b), expr_a, expr_b, stream)`
/// computes both in one kernel. Accepts views and tensors, all of one shape.
template <class... D>
auto tie(const D&... d) {
  return outputs<detail::dest_value_t<D>...>{std::make_tuple(detail::as_destination(d)...)};
}

/// Evaluates `expr` into `dst` (a view or tensor) on `stream` as one kernel, asynchronously (no
/// host synchronisation). The expression's shape must broadcast to the destination's. A scalar
/// expression fills the destination. Throws fusex::shape_error or fusex::invalid_argument on bad
/// input, before anything is launched. Empty destinations launch nothing.
template <class D, class E, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
void eval(const D& dst, const E& expr, cudaStream_t stream) {
  detail::eval_device(std::make_tuple(detail::as_destination(dst)), stream, as_expr<detail::dest_value_t<D>>(expr));
}

/// Evaluates one expression per destination of `tie(...)`, all in one kernel:
/// `eval(tie(a, b), expr_a, expr_b, stream)`.
template <class... T, class... Args>
void eval(const outputs<T...>& dsts, const Args&... exprs_then_stream) {
  static_assert(sizeof...(Args) == sizeof...(T) + 1,
                "fusex::eval(tie(d0, d1, ...), e0, e1, ..., stream): one expression per destination, then the stream");
  const auto args = std::forward_as_tuple(exprs_then_stream...);
  const cudaStream_t stream = std::get<sizeof...(T)>(args);
  const auto de = detail::dests_and_exprs(dsts, args, std::index_sequence_for<T...>{});
  std::apply([&](const auto&... e) { detail::eval_device(de.first, stream, e...); }, de.second);
}

/// The plan the evaluation of `expr` into `dst` would run, as text: the index space, the access
/// width, the index width, and the expression tree with each leaf's layout. Launches nothing.
template <class D, class E, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
std::string explain(const D& dst, const E& expr) {
  return detail::explain_impl(std::make_tuple(detail::as_destination(dst)), as_expr<detail::dest_value_t<D>>(expr));
}
/// The plan of a multi-output evaluation, as text.
template <class... T, class... E>
std::string explain(const outputs<T...>& dsts, const E&... exprs) {
  static_assert(sizeof...(E) == sizeof...(T), "fusex::explain(tie(...), e...): one expression per destination");
  return detail::explain_impl(dsts.views, as_expr<T>(exprs)...);
}

/// The host backend: the same expressions, planned by the same planner and computed by the same
/// op functors, on the CPU over host memory. Synchronous.
namespace host {
/// Evaluates `expr` into `dst` (a view of host memory).
template <class D, class E, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
void eval(const D& dst, const E& expr) {
  detail::eval_host(std::make_tuple(detail::as_destination(dst)), as_expr<detail::dest_value_t<D>>(expr));
}
/// Evaluates one expression per destination of `tie(...)`.
template <class... T, class... E>
void eval(const outputs<T...>& dsts, const E&... exprs) {
  static_assert(sizeof...(E) == sizeof...(T), "fusex::host::eval(tie(...), e...): one expression per destination");
  detail::eval_host(dsts.views, as_expr<T>(exprs)...);
}
}  // namespace host

template <class T>
template <class E>
void tensor<T>::assign(const E& expr, cudaStream_t stream) {
  fusex::eval(view(), expr, stream);
}

}  // namespace fusex
