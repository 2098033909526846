#pragma once
/// \file
/// Evaluation of an expression with one matmul node: the plan (which path and why), the device
/// dispatch, the host backend and the plan printer. One planning function, plan_matmul, feeds all
/// three, so the printer shows what the device would run.
///
/// Paths (docs/matmul.md):
/// 1. fusex's GEMM kernel with the epilogue inlined (small M, or forced): one kernel, any epilogue.
/// 2. one cuBLASLt call whose own epilogue computes the expression (bias, relu, gelu_tanh, alpha,
///    beta, a cast to the destination's dtype).
/// 3. a cuBLASLt GEMM into a float32 temporary from the default resource, then the expression
///    with the GEMM replaced by a view of that temporary, evaluated by the elementwise (or
///    reduction) machinery as any other expression: one elementwise kernel.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/dispatch/elementwise.hpp>
#include <fusex/dispatch/explain.hpp>
#include <fusex/matmul/chooser.hpp>
#include <fusex/matmul/cublaslt.hpp>
#include <fusex/matmul/epilogue.hpp>
#include <fusex/matmul/node.hpp>
#include <fusex/matmul/small_m.hpp>
#include <fusex/memory/buffer.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace fusex::detail {

/// The three ways an expression with a matmul is computed (plus nothing at all).
enum class matmul_route { empty, fusex_kernel, cublaslt_fused, gemm_then_elementwise };

/// What plan_matmul decided.
struct matmul_decision {
  matmul_route route = matmul_route::empty;
  const char* why = "";     ///< the reason for the route (static text)
  const char* why_op = "";  ///< the op concerned, when there is one
  lt_epilogue_plan lt;      ///< the cuBLASLt mapping (route cublaslt_fused)
  /// Route gemm_then_elementwise: a part of the epilogue is computed by cuBLASLt into the
  /// destination (`peel`) and the rest by one elementwise kernel in place; otherwise the product
  /// goes to a float32 temporary.
  bool peeled = false;
  lt_epilogue_plan peel;  ///< the cuBLASLt mapping of the peeled part (when peeled)
};

// Operands of the fused paths: the destination, then the epilogue's leaves, strides in the
// space [batch, M, N].
template <class D, class E>
std::array<operand_layout, static_cast<std::size_t>(E::leaf_count) + 1> gemm_space_operands(const view<D>& dst,
                                                                                            const E& e) {
  std::array<operand_layout, static_cast<std::size_t>(E::leaf_count) + 1> ops{};
  ops[0] = describe_operand(dst);
  int k = 1;
  auto add = [&](const leaf_info& li) {
    operand_layout& o = ops[static_cast<std::size_t>(k++)];
    o = operand_from_leaf(li);
  };
  visit_leaves(e, add);
  for (auto& o : ops) {
    std::int64_t s[3] = {0, 0, 0};
    (void)strides_in_output(o.shape, o.strides, dst.shape(), s);
    for (int d = 0; d < max_rank; ++d) o.s[d] = d < 3 ? s[d] : 0;
  }
  return ops;
}

inline std::int64_t span_elements(const operand_layout& o, const shape_t& space3) {
  std::int64_t m = 0;
  for (int d = 0; d < 3; ++d) m += (space3[d] - 1) * o.s[d];
  return m + 1;
}

inline bool byte_ranges_overlap(const void* a, std::int64_t a_bytes, const void* b, std::int64_t b_bytes) {
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  return !(y >= x + a_bytes || x >= y + b_bytes);
}

template <class T>
std::int64_t view_span_bytes(const view<const T>& v) {
  if (v.size() == 0) return 0;
  std::int64_t m = 0;
  for (int d = 0; d < v.rank(); ++d) m += (v.shape()[d] - 1) * v.strides()[d];
  return (m + 1) * static_cast<std::int64_t>(sizeof(T));
}

/// Throws fusex::invalid_argument when an operand's strides are not a cuBLASLt matrix layout (unit
/// stride along one of its two dimensions, the other stride at least the first's extent). Checked
/// on every path, the host backend's too, so one input behaves alike everywhere.
template <class T>
void check_matmul_strides(const matmul_node<T>& mm) {
  auto check = [](const char* name, const view<const T>& v) {
    const matrix_layout L = matrix_of(v);
    lt_operand op;
    if (!lt_operand_of(L.rows, L.cols, L.row_stride, L.col_stride, op)) {
      throw invalid_argument(std::string("fusex::matmul: operand ") + name + " (" +
                             operand_desc(dtype_name<T>(), v.shape(), v.strides()) +
                             ") is not a matrix layout cuBLASLt takes: one of its last two dimensions needs "
                             "stride 1 and the other a stride of at least the first's extent; copy it into a "
                             "contiguous tensor first");
    }
  };
  check("a", mm.a);
  check("b", mm.b);
}

/// The view of the destination that replaces the peeled part of the epilogue.
template <class D>
leaf_node<D> destination_leaf(const view<D>& dst) {
  return leaf_node<D>{{}, view<const D>(dst.data(), dst.shape(), dst.strides())};
}

/// Route 3 with a part of the epilogue peeled off (see has_peel): sets d.peeled when cuBLASLt can
/// compute that part straight into the destination and the rest of the expression reads no other
/// memory of the destination (which the GEMM overwrites first).
template <class D, class E>
void plan_peel(const view<D>& dst, const E& e, const gemm_output& o, matmul_decision& d) {
  if constexpr (has_peel<E>::value && is_matmul_dtype_v<D>) {
    using M = matmul_type_t<E>;
    const M& mm = find_matmul(e);
    if (mm.options.float32_intermediate && !std::is_same_v<D, float>) return;
    lt_epilogue_plan p;
    visit_peel(e, [&](const auto& part) { p = classify_epilogue(describe_epilogue(part), o); });
    if (!p.ok) return;
    // The rest's leaves: the destination's view (the peeled part) overlaps it, nothing else may.
    const auto rest = peel_rest(e, destination_leaf(dst));
    const auto ops = gemm_space_operands(dst, rest);
    const gemm_dims& g = mm.dims;
    const shape_t gs = mm.shape();
    const shape_t space = g.batched ? gs : shape_t{1, gs[0], gs[1]};
    const std::int64_t dspan = span_elements(ops[0], space) * ops[0].elem_size;
    int overlapping = 0;
    for (std::size_t i = 1; i < ops.size(); ++i)
      if (!ops[i].computed &&
          byte_ranges_overlap(ops[0].data, dspan, ops[i].data, span_elements(ops[i], space) * ops[i].elem_size))
        ++overlapping;
    if (overlapping != 1) return;
    d.peeled = true;
    d.peel = p;
  } else {
    (void)dst;
    (void)e;
    (void)o;
    (void)d;
  }
}

/// The plan: which route computes `dst = e` and why. Throws fusex::shape_error when the
/// expression does not broadcast to the destination and fusex::invalid_argument for operand
/// strides cuBLASLt cannot take.
template <class D, class E>
matmul_decision plan_matmul(const view<D>& dst, const E& e) {
  static_assert(one_matmul_v<E>,
                "fusex: an expression may contain one matmul product (used any number of times, one type); "
                "evaluate the others into tensors first");
  using M = matmul_type_t<E>;
  using T = typename M::value_type;
  const M& mm = find_matmul(e);
  const shape_t es = e.shape();
  if (!broadcasts_to(es, dst.shape())) {
    throw shape_error("fusex: cannot evaluate an expression of shape " + es.str() + " into a destination of shape " +
                      dst.shape().str());
  }
  check_matmul_strides(mm);
  matmul_decision d;
  if (dst.size() == 0) {
    d.why = "empty destination";
    return d;
  }
  const gemm_dims& g = mm.dims;
  const shape_t gs = mm.shape();
  const bool same_shape = gs == dst.shape();
  bool fused_ok = true;  // the fused routes (1 and 2) can write this destination directly
  const char* fused_why = "";
  if (E::reduce_count > 0) {
    fused_ok = false;
    fused_why = "the expression has a reduction (the GEMM is materialised, then the reduction plan runs)";
  } else if (!same_shape) {
    fused_ok = false;
    fused_why = "the destination is larger than the GEMM's result (the result is broadcast)";
  } else {
    const std::int64_t dbytes = [&] {
      std::int64_t m = 0;
      for (int i = 0; i < dst.rank(); ++i) m += (dst.shape()[i] - 1) * dst.strides()[i];
      return (m + 1) * static_cast<std::int64_t>(sizeof(D));
    }();
    if (byte_ranges_overlap(dst.data(), dbytes, mm.a.data(), view_span_bytes(mm.a)) ||
        byte_ranges_overlap(dst.data(), dbytes, mm.b.data(), view_span_bytes(mm.b))) {
      fused_ok = false;
      fused_why = "the destination overlaps an operand of the GEMM (the GEMM goes to a temporary first)";
    }
  }

  // Route 1: the fusex kernel.
  if (fused_ok) {
    bool fits = g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX;
    // Leaves may alias the destination only element for element (each output is read, then
    // written, by one thread); anything else goes to the routes the planner checks.
    if (fits && E::leaf_count > 0) {
      const auto ops = gemm_space_operands(dst, e);
      const shape_t space = g.batched ? gs : shape_t{1, gs[0], gs[1]};
      const std::int64_t dspan = span_elements(ops[0], space) * ops[0].elem_size;
      for (std::size_t i = 1; i < ops.size() && fits; ++i) {
        if (ops[i].computed) continue;  // no memory
        const std::int64_t lspan = span_elements(ops[i], space) * ops[i].elem_size;
        if (!byte_ranges_overlap(ops[0].data, dspan, ops[i].data, lspan)) continue;
        fits = ops[i].data == ops[0].data && ops[i].elem_size == ops[0].elem_size && ops[i].s[0] == ops[0].s[0] &&
               ops[i].s[1] == ops[0].s[1] && ops[i].s[2] == ops[0].s[2];
      }
    }
    const matmul_path forced = mm.options.path;
    const char* why = "";
    if (fits && forced == matmul_path::fusex) {
      d.route = matmul_route::fusex_kernel;
      d.why = "matmul_options::path is matmul_path::fusex";
      return d;
    }
    if (fits && forced == matmul_path::automatic && choose_fusex_kernel(dtype_of<T>(), g, matmul_chooser(), why)) {
      d.route = matmul_route::fusex_kernel;
      d.why = why;
      return d;
    }
  }

  // Route 2: cuBLASLt's own epilogue.
  if (g.k == 0) {
    d.route = matmul_route::gemm_then_elementwise;
    d.why = "K = 0: the product is zeros (a memset of the temporary), the epilogue is applied to them";
    return d;
  }
  if (!fused_ok) {
    d.route = matmul_route::gemm_then_elementwise;
    d.why = fused_why;
    return d;
  }
  gemm_output o;
  o.dims = g;
  o.in_dtype = dtype_of<T>();
  o.out_dtype = dtype_of<D>();
  o.out_data = dst.data();
  o.out_elem_size = static_cast<int>(sizeof(D));
  o.out_shape = dst.shape();
  o.out_strides = dst.strides();
  d.lt = classify_epilogue(describe_epilogue(e), o);
  if (d.lt.ok) {
    d.route = matmul_route::cublaslt_fused;
    d.why = "the epilogue maps onto cuBLASLt's (bias, relu, gelu_tanh, alpha, beta, output dtype)";
  } else {
    d.route = matmul_route::gemm_then_elementwise;
    d.why = d.lt.why;
    d.why_op = d.lt.why_op;
    plan_peel(dst, e, o, d);
  }
  return d;
}

// The GEMM operands in cuBLASLt's orientation: for n_rows it computes D^T = B^T A^T.
template <class T>
void lt_operands(const matmul_node<T>& mm, bool n_rows, lt_gemm& g) {
  const matrix_layout la = matrix_of(mm.a), lb = matrix_of(mm.b);
  const gemm_dims& d = mm.dims;
  bool ok;
  if (n_rows) {
    ok = lt_operand_of(d.n, d.k, lb.col_stride, lb.row_stride, g.a) &&
         lt_operand_of(d.k, d.m, la.col_stride, la.row_stride, g.b);
    g.a_ptr = mm.b.data();
    g.b_ptr = mm.a.data();
    g.a.m.batch_stride = lb.batch > 1 ? lb.batch_stride : 0;
    g.b.m.batch_stride = la.batch > 1 ? la.batch_stride : 0;
  } else {
    ok = lt_operand_of(d.m, d.k, la.row_stride, la.col_stride, g.a) &&
         lt_operand_of(d.k, d.n, lb.row_stride, lb.col_stride, g.b);
    g.a_ptr = mm.a.data();
    g.b_ptr = mm.b.data();
    g.a.m.batch_stride = la.batch > 1 ? la.batch_stride : 0;
    g.b.m.batch_stride = lb.batch > 1 ? lb.batch_stride : 0;
  }
  if (!ok) throw error("fusex: internal: matmul operand layout");  // check_matmul_strides ran first
  g.ab_type = cuda_data_type<T>();
  g.compute = std::is_same_v<T, float> && mm.options.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  g.k = d.k;
  g.batch = d.batch > 1 ? d.batch : 1;
}

// A plain GEMM into a contiguous float32 [batch?, M, N].
template <class T>
void gemm_into_temporary(const matmul_node<T>& mm, float* out, cudaStream_t stream) {
  const gemm_dims& d = mm.dims;
  if (d.k == 0) {
    FUSEX_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(d.batch * d.m * d.n) * sizeof(float), stream));
    return;
  }
  lt_gemm g;
  lt_operands(mm, true, g);
  g.cd_type = CUDA_R_32F;
  g.d.rows = d.n;
  g.d.cols = d.m;
  g.d.ld = d.n > 1 ? d.n : 1;
  g.d.batch_stride = d.m * d.n;
  g.c = g.d;
  g.c_ptr = out;
  g.d_ptr = out;
  if (!lt_matmul(g, stream)) {
    throw cublas_error(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (plain GEMM into float32)",
                       __FILE__, __LINE__);
  }
}

/// One cuBLASLt call computing D = act(alpha A B + beta C + bias) into `dst` as `p` maps it.
/// False when cuBLASLt has no algorithm for it (nothing enqueued).
template <class T, class D>
bool lt_fused_call(const matmul_node<T>& mm, const lt_epilogue_plan& p, const view<D>& dst, cudaStream_t stream) {
  lt_gemm g;
  lt_operands(mm, p.n_rows, g);
  g.cd_type = cuda_data_type<D>();
  g.epilogue = lt_epilogue_of(p.act, p.has_bias);
  g.c = p.c;
  g.d = p.d;
  g.d_ptr = dst.data();
  g.c_ptr = p.has_residual ? p.residual.data : dst.data();
  g.bias_ptr = p.has_bias ? p.bias.data : nullptr;
  g.alpha = static_cast<float>(p.alpha);
  g.beta = static_cast<float>(p.beta);
  return lt_matmul(g, stream);
}

#if defined(__CUDACC__)
template <class D, class E>
void eval_matmul_device_impl(const view<D>& dst, const E& e, cudaStream_t stream) {
  const matmul_decision d = plan_matmul(dst, e);
  const auto& mm = find_matmul(e);
  using T = typename std::decay_t<decltype(mm)>::value_type;
  if (d.route == matmul_route::empty) return;
  if constexpr (E::reduce_count == 0) {
    if (d.route == matmul_route::fusex_kernel) {
      launch_small_m(dst, e, mm, gemm_space_operands(dst, e), stream);
      return;
    }
  }
  if constexpr (is_matmul_dtype_v<D>) {
    if (d.route == matmul_route::cublaslt_fused) {
      if (lt_fused_call(mm, d.lt, dst, stream)) return;
      // No cuBLASLt algorithm for this epilogue: the general route below.
    }
    if constexpr (has_peel<E>::value) {
      if (d.route == matmul_route::gemm_then_elementwise && d.peeled && lt_fused_call(mm, d.peel, dst, stream)) {
        // The rest of the epilogue, in place over what cuBLASLt wrote (one elementwise kernel).
        eval_device(std::make_tuple(dst), stream, peel_rest(e, destination_leaf(dst)));
        return;
      }
    }
  }
  const shape_t gs = mm.shape();
  buffer<float> tmp(static_cast<std::size_t>(numel(gs)), stream);
  gemm_into_temporary(mm, tmp.data(), stream);
  const auto me = replace_matmul(e, leaf_node<float>{{}, view<const float>(tmp.data(), gs)});
  eval_device(std::make_tuple(dst), stream, me);
}
#endif

/// fusex::eval of an expression with a matmul (device, asynchronous on `stream`).
template <class D, class E>
void eval_matmul_device(const view<D>& dst, const E& e, cudaStream_t stream) {
#if defined(__CUDACC__)
  eval_matmul_device_impl(dst, e, stream);
#else
  static_assert(sizeof(D) == 0 && sizeof(D) != 0,
                "fusex::eval of a matmul expression runs on the GPU and needs this translation unit compiled by "
                "nvcc; use fusex::host::eval to evaluate on the CPU");
  (void)dst;
  (void)e;
  (void)stream;
#endif
}

/// The host backend: the product with a plain loop (double accumulation, stored as float32 like the
/// device's temporary), then the expression with the product as a leaf.
template <class D, class E>
void eval_matmul_host(const view<D>& dst, const E& e) {
  static_assert(one_matmul_v<E>,
                "fusex: an expression may contain one matmul product (used any number of times, one type); "
                "evaluate the others into tensors first");
  const auto& mm = find_matmul(e);
  const shape_t es = e.shape();
  if (!broadcasts_to(es, dst.shape())) {
    throw shape_error("fusex: cannot evaluate an expression of shape " + es.str() + " into a destination of shape " +
                      dst.shape().str());
  }
  check_matmul_strides(mm);
  if (dst.size() == 0) return;
  const gemm_dims& g = mm.dims;
  const matrix_layout la = matrix_of(mm.a), lb = matrix_of(mm.b);
  std::vector<float> tmp(static_cast<std::size_t>(g.batch * g.m * g.n) + 1);
  for (std::int64_t bz = 0; bz < g.batch; ++bz) {
    const auto* A = mm.a.data() + (la.batch > 1 ? bz * la.batch_stride : 0);
    const auto* B = mm.b.data() + (lb.batch > 1 ? bz * lb.batch_stride : 0);
    for (std::int64_t i = 0; i < g.m; ++i)
      for (std::int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < g.k; ++k)
          acc += convert<double>(A[i * la.row_stride + k * la.col_stride]) *
                 convert<double>(B[k * lb.row_stride + j * lb.col_stride]);
        tmp[static_cast<std::size_t>((bz * g.m + i) * g.n + j)] = static_cast<float>(acc);
      }
  }
  const auto me = replace_matmul(e, leaf_node<float>{{}, view<const float>(tmp.data(), mm.shape())});
  eval_host(std::make_tuple(dst), me);
}

// --- the plan printer ----------------------------------------------------------------------------

// The matmul node in explain's tree (dispatch/explain.hpp: tree_printer).
template <class T>
std::string describe_terminal(const matmul_node<T>& n, const tree_printer&) {
  return "matmul " + operand_desc(dtype_name<T>(), n.a.shape(), n.a.strides()) + " x " +
         operand_desc(dtype_name<T>(), n.b.shape(), n.b.strides()) + " -> " + n.shape().str() +
         (n.options.allow_tf32 && std::is_same_v<T, float> ? " (TF32 allowed)" : "");
}

inline std::string fmt_double(double x) {
  std::string s = std::to_string(x);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

/// fusex::explain for an expression with a matmul.
template <class D, class E>
std::string explain_matmul(const view<D>& dst, const E& e) {
  const matmul_decision d = plan_matmul(dst, e);
  const auto& mm = find_matmul(e);
  using T = typename std::decay_t<decltype(mm)>::value_type;
  const gemm_dims& g = mm.dims;
  std::string out = "fusex plan: matmul " + std::string(dtype_name<T>()) + " M=" + std::to_string(g.m) +
                    " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k) +
                    (g.batched ? " batch=" + std::to_string(g.batch) : std::string()) + ", float32 accumulation" +
                    (std::is_same_v<T, float> && mm.options.allow_tf32 ? " (TF32 allowed)" : "") + "\n";
  out += "  destination: " + operand_desc(dtype_name<D>(), dst.shape(), dst.strides()) + "\n";
  std::string why = d.why;
  if (d.why_op[0] != '\0') why += std::string(" [") + d.why_op + "]";
  switch (d.route) {
    case matmul_route::empty: out += "  path: none (empty destination): no kernel\n"; break;
    case matmul_route::fusex_kernel: {
      const matrix_layout lb = matrix_of(mm.b);
      const bool along_n = small_m_threads_along_n(lb.row_stride, lb.col_stride, g.n, g.k);
      out += "  path: fusex GEMM kernel with the epilogue inlined, 1 kernel (" +
             (along_n ? "threads along N, " + std::to_string(small_m_n_major_rows) + " rows per thread"
                      : "M-tile " + std::to_string(small_m_tile(g.m)) + ", warps split K") +
             ", programmatic dependent launch on sm_90): " + why + "\n";
      break;
    }
    case matmul_route::cublaslt_fused: {
      const lt_epilogue_plan& p = d.lt;
      out += std::string("  path: cuBLASLt, 1 call with its epilogue ") +
             lt_epilogue_name(lt_epilogue_of(p.act, p.has_bias)) + ": " + why + "\n";
      out += "    alpha " + fmt_double(p.alpha) + ", beta " + fmt_double(p.beta);
      if (p.has_bias) out += std::string(", bias along ") + (p.bias_along_n ? "N (columns)" : "M (rows)");
      if (p.has_residual) out += ", residual C " + operand_desc(dtype_name(p.residual.dtype), p.residual.shape, p.residual.strides);
      out += std::string(", computed as ") +
             (p.n_rows ? "D^T = B^T A^T (row-major destination)" : "D = A B (column-major destination)") +
             "\n    (if cuBLASLt has no algorithm for this epilogue, the GEMM + elementwise path runs instead)\n";
      break;
    }
    case matmul_route::gemm_then_elementwise:
      if (d.peeled) {
        const lt_epilogue_plan& p = d.peel;
        out += std::string("  path: cuBLASLt, 1 call with its epilogue ") +
               lt_epilogue_name(lt_epilogue_of(p.act, p.has_bias)) +
               " for part of the expression, into the destination (" + dtype_name<D>() +
               "), then 1 elementwise kernel in place over the destination for the rest: the whole "
               "epilogue does not map onto cuBLASLt's because of " +
               why + "\n";
        if (!std::is_same_v<D, float>) {
          out += std::string("    the part's result is rounded to ") + dtype_name<D>() +
                 " before the rest (matmul_options::float32_intermediate keeps it in float32)\n";
        }
        out +=
            "    (if cuBLASLt has no algorithm for that epilogue, the product goes to a float32 temporary instead)\n";
        break;
      }
      out += "  path: cuBLASLt GEMM into a float32 temporary " + mm.shape().str() +
             " from the default resource, then 1 elementwise kernel" +
             (E::reduce_count > 0 ? std::string(" (after the reductions' kernels)") : std::string()) +
             " over it: the epilogue does not map onto cuBLASLt's because of " + why + "\n";
      break;
  }
  out += "  expression:\n";
  describe_tree(e, out, 2);
  return out;
}

}  // namespace fusex::detail
