#pragma once
/// \file
/// Fused matrix products: fusex::matmul and fusex::linear as expression nodes, and fusex::eval /
/// fusex::host::eval / fusex::explain of any elementwise expression around one of them (its
/// epilogue). Not included by <fusex/fusex.hpp>: this header needs cuBLASLt, which the CMake
/// target fusex::matmul links (CUDA::cublasLt); users of the elementwise core do not link cuBLAS.
///
///     #include <fusex/matmul.hpp>
///     fusex::eval(y, fusex::relu(fusex::linear(x, w, b)), stream);   // one cuBLASLt call, or
///                                                                     // one fusex kernel (small M)
///
/// See docs/matmul.md for the paths, the epilogue rules and the chooser.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/eval.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/operators.hpp>
#include <fusex/matmul/chooser.hpp>
#include <fusex/matmul/cublaslt.hpp>
#include <fusex/matmul/epilogue.hpp>
#include <fusex/matmul/eval_matmul.hpp>
#include <fusex/matmul/node.hpp>
#include <fusex/matmul/small_m.hpp>

#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

namespace fusex {

/// The matrix product a x b as an expression: a [M, K] or [B, M, K], b [K, N] or [B, K, N] (a
/// batch of 1, or a 2-D operand, broadcasts over the other's batch). Operands are views or
/// tensors of one dtype: float (TF32 only with options.allow_tf32), fusex::half or
/// fusex::bfloat16, accumulated in float32. Any layout with unit stride along one of the two
/// matrix dimensions is taken without a copy: row-major, column-major, `.t()` and
/// `.transpose(1, 2)` views. Throws fusex::shape_error when inner or batch dimensions differ.
template <class A, class B>
auto matmul(const A& a, const B& b, matmul_options options = {}) {
  const auto av = detail::as_matmul_operand(a);
  const auto bv = detail::as_matmul_operand(b);
  using TA = typename decltype(av)::value_type;
  using TB = typename decltype(bv)::value_type;
  static_assert(std::is_same_v<TA, TB>,
                "fusex::matmul: both operands must have one dtype (there is no mixed-precision GEMM); convert one "
                "with fusex::eval into a tensor of the other's dtype first");
  static_assert(detail::is_matmul_dtype_v<TA>,
                "fusex::matmul: operands must be float, fusex::half or fusex::bfloat16 (products accumulate in "
                "float32)");
  return matmul_node<TA>(av, bv, options);
}

/// PyTorch's linear layer without bias: x w^T, with x [M, K] or [B, M, K] and w [N, K] (as stored
/// by torch.nn.Linear: row-major, each output's weights contiguous).
template <class X, class W, std::enable_if_t<is_operand_v<X> && is_operand_v<W>, int> = 0>
auto linear(const X& x, const W& w, matmul_options options = {}) {
  const auto wv = detail::as_matmul_operand(w);
  if (wv.rank() != 2) {
    throw shape_error("fusex::linear: the weight must be 2-D [N, K]; got " + wv.shape().str());
  }
  const auto xv = detail::as_matmul_operand(x);
  using TX = typename decltype(xv)::value_type;
  using TW = typename decltype(wv)::value_type;
  static_assert(std::is_same_v<TX, TW>,
                "fusex::linear: x and w must have one dtype (there is no mixed-precision GEMM)");
  static_assert(detail::is_matmul_dtype_v<TX>, "fusex::linear: x and w must be float, fusex::half or fusex::bfloat16");
  return matmul_node<TX>(xv, wv.t(), options, "linear");
}

/// PyTorch's linear layer: x w^T + bias, with bias [N] broadcast along the rows. Under
/// fusex::eval the bias (and whatever is applied around it) is the GEMM's epilogue.
template <class X, class W, class Bias,
          std::enable_if_t<is_operand_v<X> && is_operand_v<W> && is_operand_v<Bias>, int> = 0>
auto linear(const X& x, const W& w, const Bias& bias, matmul_options options = {}) {
  auto mm = linear(x, w, options);
  const auto be = as_expr(bias);
  const shape_t bs = be.shape();
  const std::int64_t n = mm.dims.n;
  if (!(bs.rank() == 1 && bs[0] == n)) {
    throw shape_error("fusex::linear: the bias must have shape [N] = [" + std::to_string(n) + "]; got " + bs.str() +
                      " (weight " + detail::as_matmul_operand(w).shape().str() + ")");
  }
  return detail::make_map(ops::add{}, mm, be);
}

/// Evaluates an expression containing one matmul into `dst` on `stream`, asynchronously (no host
/// synchronisation; capturable into a CUDA graph). One kernel or one cuBLASLt call where the
/// epilogue allows (fusex::explain says which and why), otherwise a GEMM into a temporary and one
/// elementwise kernel. Throws fusex::shape_error, fusex::invalid_argument or fusex::cublas_error.
template <class D, class T, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
void eval(const D& dst, const matmul_node<T>& expr, cudaStream_t stream) {
  detail::eval_matmul_device(detail::as_destination(dst), expr, stream);
}
/// Evaluates an elementwise expression around one matmul (its epilogue) into `dst` on `stream`;
/// as eval of a matmul_node.
template <class D, class Op, class... A,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<map_node<Op, A...>> > 0), int> = 0>
void eval(const D& dst, const map_node<Op, A...>& expr, cudaStream_t stream) {
  detail::eval_matmul_device(detail::as_destination(dst), expr, stream);
}
/// Evaluates an elementwise expression around one matmul (its epilogue) into `dst` on `stream`;
/// as eval of a matmul_node.
template <class D, class Op, class C,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<reduce_node<Op, C>> > 0), int> = 0>
void eval(const D& dst, const reduce_node<Op, C>& expr, cudaStream_t stream) {
  detail::eval_matmul_device(detail::as_destination(dst), expr, stream);
}

/// The plan of evaluating a matmul expression into `dst`: the path (fusex kernel, one cuBLASLt
/// call with its epilogue, or GEMM + elementwise kernel) and why, and the expression tree.
template <class D, class T, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
std::string explain(const D& dst, const matmul_node<T>& expr) {
  return detail::explain_matmul(detail::as_destination(dst), expr);
}
/// The plan of evaluating an expression around one matmul into `dst`; as explain of a matmul_node.
template <class D, class Op, class... A,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<map_node<Op, A...>> > 0), int> = 0>
std::string explain(const D& dst, const map_node<Op, A...>& expr) {
  return detail::explain_matmul(detail::as_destination(dst), expr);
}
/// The plan of evaluating an expression around one matmul into `dst`; as explain of a matmul_node.
template <class D, class Op, class C,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<reduce_node<Op, C>> > 0), int> = 0>
std::string explain(const D& dst, const reduce_node<Op, C>& expr) {
  return detail::explain_matmul(detail::as_destination(dst), expr);
}

namespace host {
/// The host backend for matmul expressions: the product by a plain loop (double accumulation,
/// rounded to float32 as the device's temporary is), then the epilogue by the host elementwise
/// loop. Views of host memory; synchronous.
template <class D, class T, std::enable_if_t<!detail::is_outputs<D>::value, int> = 0>
void eval(const D& dst, const matmul_node<T>& expr) {
  detail::eval_matmul_host(detail::as_destination(dst), expr);
}
/// \copydoc eval(const D&, const matmul_node<T>&)
template <class D, class Op, class... A,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<map_node<Op, A...>> > 0), int> = 0>
void eval(const D& dst, const map_node<Op, A...>& expr) {
  detail::eval_matmul_host(detail::as_destination(dst), expr);
}
/// \copydoc eval(const D&, const matmul_node<T>&)
template <class D, class Op, class C,
          std::enable_if_t<!detail::is_outputs<D>::value && (detail::matmul_count_v<reduce_node<Op, C>> > 0), int> = 0>
void eval(const D& dst, const reduce_node<Op, C>& expr) {
  detail::eval_matmul_host(detail::as_destination(dst), expr);
}
}  // namespace host

}  // namespace fusex
