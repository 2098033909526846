#pragma once
/// \file
/// Evaluation: fusex::eval (device, asynchronous on a stream), fusex::host::eval (the host
/// backend), fusex::tie for several destinations computed by one kernel, and fusex::explain, the
/// plan printer. Every path plans through the same planner (plan/elementwise_plan.hpp).

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/tensor.hpp>
#include <fusex/core/view.hpp>
#include <fusex/device/elementwise_kernel.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/expr/detail/evaluator.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace fusex {

/// Several destinations of one evaluation (see fusex::tie).
template <class... T>
struct outputs {
  std::tuple<view<T>...> views;
};

namespace detail {
template <class D>
auto as_destination(const D& d) {
  using X = std::decay_t<D>;
  if constexpr (is_view<X>::value) {
    static_assert(!std::is_const_v<typename X::element_type>,
                  "fusex::eval: a destination must be a view of non-const elements");
    return d;
  } else if constexpr (is_tensor<X>::value) {
    return d.view();
  } else {
    static_assert(is_view<X>::value || is_tensor<X>::value,
                  "fusex::eval: a destination must be a fusex::view or fusex::tensor");
    return view<float>();
  }
}

template <class... T>
struct dest_size {
  static constexpr int value = [] {
    int m = 0;
    ((m = static_cast<int>(sizeof(T)) > m ? static_cast<int>(sizeof(T)) : m), ...);
    return m;
  }();
};

// Vector width: 16 bytes of the widest element any destination or leaf has.
template <class DstTuple, class... E>
struct vector_width_of;
template <class... T, class... E>
struct vector_width_of<std::tuple<view<T>...>, E...> {
  static constexpr int widest = [] {
    int m = dest_size<T...>::value;
    ((m = max_leaf_size<E>::value > m ? max_leaf_size<E>::value : m), ...);
    return m;
  }();
  static constexpr int value = widest >= 16 ? 1 : 16 / widest;
};

/// Everything an evaluation needs before it runs: the operands and the planner's decisions.
template <int NOut, int NLeaves>
struct prepared_evaluation {
  std::array<operand_layout, NOut + NLeaves> ops;
  elementwise_layout layout;
};

template <class... T, class... E>
auto prepare(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  static_assert(sizeof...(T) == sizeof...(E), "fusex::eval: one expression per destination");
  static_assert((is_expr_v<E> && ...), "fusex::eval: internal: expressions expected");
  constexpr int n_out = static_cast<int>(sizeof...(T));
  prepared_evaluation<n_out, (0 + ... + E::leaf_count)> pe;
  int k = 0;
  std::apply([&](const auto&... d) { ((pe.ops[k++] = describe_operand(d)), ...); }, dsts);
  const shape_t& dshape = std::get<0>(dsts).shape();
  auto add_expr = [&](const auto& e) {
    const shape_t es = e.shape();
    if (!broadcasts_to(es, dshape)) {
      throw shape_error("fusex: cannot evaluate an expression of shape " + es.str() + " into a destination of shape " +
                        dshape.str());
    }
    auto add_leaf = [&](const leaf_info& li) { pe.ops[k++] = operand_from_leaf(li); };
    e.visit_leaves(add_leaf);
  };
  (add_expr(exprs), ...);
  plan_elementwise(pe.ops.data(), n_out, k, vector_width_of<std::tuple<view<T>...>, E...>::value, pe.layout);
  return pe;
}

template <class Index, class PE, class... T, class... E, std::size_t... I>
auto make_assignments(const PE& pe, const std::tuple<view<T>...>& dsts, std::index_sequence<I...>, const E&... exprs) {
  leaf_strides_source<Index> src{pe.ops.data() + sizeof...(T), 0};
  using result = fusex::detail::tuple<assignment<out_eval<T, Index>, evaluator_t<E, Index>>...>;
  // Braced initialisation runs left to right: expressions take their leaves in order.
  return result{assignment<out_eval<T, Index>, evaluator_t<E, Index>>{
      make_out_evaluator<Index>(std::get<I>(dsts), pe.ops[I]), make_evaluator(exprs, src)}...};
}

}  // namespace detail
}  // namespace fusex

#include <fusex/detail/eval_reduce.hpp>

namespace fusex {
namespace detail {

#if defined(__CUDACC__)
template <class Index, int V, class PE, class... T, class... E>
void launch_elementwise(const PE& planned, const std::tuple<view<T>...>& dsts, cudaStream_t stream, const E&... exprs) {
  PE pe = planned;
  if (sizeof(Index) == 4 && pe.layout.rank == 1) {
    // Pad to [1, n]: the kernel's two-dimension path has no per-dimension tests.
    pe.layout.rank = 2;
    pe.layout.extent[1] = pe.layout.extent[0];
    pe.layout.extent[0] = 1;
    for (auto& o : pe.ops) {
      o.s[1] = o.s[0];
      o.s[0] = 0;
    }
  }
  const elementwise_layout& L = pe.layout;
  const auto params = make_elementwise_params<Index>(L);
  const auto as = make_assignments<Index>(pe, dsts, std::index_sequence_for<T...>{}, exprs...);
  const device_properties& dev = current_device_info();
  int block = elementwise_block;
  auto blocks_of = [&](int b) {
    const std::int64_t per_block = std::int64_t{b} * elementwise_unroll;
    return (L.work + per_block - 1) / per_block;
  };
  if (elementwise_tuning_state().spread_small) {
    while (block > 32 && blocks_of(block) < dev.sm_count) block /= 2;
  }
  std::int64_t blocks = blocks_of(block);
  const int waves = elementwise_tuning_state().waves;
  const std::int64_t cap =
      waves > 0 ? std::int64_t{dev.sm_count} * (dev.max_threads_per_sm / block) * waves : std::int64_t{0x7fffffff};
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  launch_kernel("elementwise_kernel", &elementwise_kernel<Index, V, std::decay_t<decltype(as)>>,
                dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(block)), 0, stream, dev, params, as);
}
#endif

template <class... T, class... E>
void eval_device(const std::tuple<view<T>...>& dsts, cudaStream_t stream, const E&... exprs);

#if defined(__CUDACC__)
// An evaluation with reductions: the row kernel when rule 1 applies, else materialise.
template <class... T, class... E>
void eval_device_reduce(const std::tuple<view<T>...>& dsts, cudaStream_t stream, const E&... exprs) {
  if constexpr (sizeof...(T) == 1) {
    const auto& dst = std::get<0>(dsts);
    const auto& e = std::get<0>(std::forward_as_tuple(exprs...));
    const shape_t es = e.shape();
    if (!broadcasts_to(es, dst.shape())) {
      throw shape_error("fusex: cannot evaluate an expression of shape " + es.str() + " into a destination of shape " +
                        dst.shape().str());
    }
    if (dst.size() == 0) return;
    std::vector<reduction_info> reds;
    collect_reductions(e, reds);
    auto ro = gather_row_operands(dst, e);
    constexpr int V = vector_width_of<std::tuple<view<T>...>, E...>::value;
    const row_layout L = plan_rows(ro.ops.data(), ro.inside.data(), static_cast<int>(ro.ops.size()), reds, V);
    if (L.ok) {
      check_row_overlap(ro.ops, L);
      if (!L.index64) {
        launch_rows<std::uint32_t, V>(ro.ops, L, dst, e, stream);
        return;
      }
      // 2^31 elements or more: pieces of whole rows with 32-bit indices (no 64-bit kernel).
      for (std::int64_t r0 = 0; r0 < L.rows; r0 += L.rows_per_piece) {
        row_layout piece = L;
        piece.rows = L.rows - r0 < L.rows_per_piece ? L.rows - r0 : L.rows_per_piece;
        piece.index64 = false;
        auto ops = ro.ops;
        for (auto& o : ops) o.data = static_cast<const char*>(o.data) + r0 * o.s[0] * o.elem_size;
        launch_rows<std::uint32_t, V>(ops, piece, dst, e, stream);
      }
      return;
    }
  }
  {
    // The reductions launch before the final kernel is planned: check that kernel's shapes and
    // overlaps first, so that bad input throws before anything is launched (or captured).
    validating_reducer vr;
    const auto stand_ins = std::make_tuple(materialize(exprs, vr)...);
    std::apply([&](const auto&... me) { (void)prepare(dsts, me...); }, stand_ins);
  }
  device_reducer dr{stream, {}};
  const auto m = std::make_tuple(materialize(exprs, dr)...);
  std::apply([&](const auto&... me) { eval_device(dsts, stream, me...); }, m);
}
#endif

template <class... T, class... E>
void eval_device(const std::tuple<view<T>...>& dsts, cudaStream_t stream, const E&... exprs) {
#if defined(__CUDACC__)
  if constexpr ((0 + ... + E::reduce_count) > 0) {
    eval_device_reduce(dsts, stream, exprs...);
    return;
  } else {
    const auto pe = prepare(dsts, exprs...);
    if (pe.layout.numel == 0) return;
    constexpr int V = vector_width_of<std::tuple<view<T>...>, E...>::value;
    if (pe.layout.index64) {
      // 2^31 elements or more: 32-bit pieces (no 64-bit kernel is instantiated).
      auto piece = pe;
      for (const index32_piece& p : split_index32(pe.layout, pe.ops.data(), static_cast<int>(pe.ops.size()))) {
        piece.layout = p.layout;
        for (std::size_t i = 0; i < piece.ops.size(); ++i) piece.ops[i].data = p.data[i];
        launch_elementwise<std::uint32_t, V>(piece, dsts, stream, exprs...);
      }
    } else {
      launch_elementwise<std::uint32_t, V>(pe, dsts, stream, exprs...);
    }
  }
#else
  static_assert(sizeof...(T) == 0 && sizeof...(T) != 0,
                "fusex::eval runs on the GPU and needs this translation unit compiled by nvcc; "
                "use fusex::host::eval to evaluate on the CPU");
  (void)dsts;
  (void)stream;
  ((void)exprs, ...);
#endif
}

template <class... T, class... E>
void eval_host(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  if constexpr ((0 + ... + E::reduce_count) > 0) {
    host_reducer hr;
    const auto m = std::make_tuple(materialize(exprs, hr)...);
    std::apply([&](const auto&... me) { eval_host(dsts, me...); }, m);
    return;
  } else {
    const auto pe = prepare(dsts, exprs...);
    if (pe.layout.numel == 0) return;
    elementwise_layout L = pe.layout;
    L.vector_width = 1;  // the planner may have vectorised; the host loop goes element by element
    L.work = L.numel;
    L.tail_start = L.numel;
    const auto params = make_elementwise_params<std::uint64_t>(L);
    const auto as = make_assignments<std::uint64_t>(pe, dsts, std::index_sequence_for<T...>{}, exprs...);
    using seq = std::make_index_sequence<sizeof...(T)>;
    for (std::uint64_t w = 0; w < params.work; ++w)
      process_items<1, 1, max_rank>(as, params, w, std::uint64_t{1}, params.work, seq{});
  }
}

// --- the plan printer ----------------------------------------------------------------------------
inline void indent(std::string& out, int depth) { out.append(static_cast<std::size_t>(depth) * 2, ' '); }

template <class T>
void describe_node(const leaf_node<T>&, std::string& out, int depth, const operand_layout*& leaf,
                   const elementwise_layout& L) {
  const operand_layout& o = *leaf++;
  indent(out, depth);
  out += "view " + operand_text(o);
  if (o.shape != L.shape) out += " (broadcast)";
  out += '\n';
}
template <class T>
void describe_node(const scalar_node<T>& n, std::string& out, int depth, const operand_layout*&,
                   const elementwise_layout&) {
  indent(out, depth);
  out += std::string("scalar ") + dtype_name<T>() + " " + std::to_string(static_cast<double>(n.value)) + '\n';
}
template <class Op, class C>
void describe_node(const reduce_node<Op, C>& n, std::string& out, int depth, const operand_layout*& leaf,
                   const elementwise_layout& L) {
  indent(out, depth);
  out += std::string(Op::name) + " over axes [";
  bool first = true;
  for (int d = 0; d < max_rank; ++d)
    if (n.mask & (1u << d)) {
      out += (first ? "" : ", ") + std::to_string(d);
      first = false;
    }
  out += std::string("]") + (n.keep ? " keepdim" : "") + " -> " +
         dtype_name<typename reduce_node<Op, C>::value_type>() + '\n';
  describe_node(n.child, out, depth + 1, leaf, L);
}
template <class Op, class... A, std::size_t... I>
void describe_children(const map_node<Op, A...>& n, std::string& out, int depth, const operand_layout*& leaf,
                       const elementwise_layout& L, std::index_sequence<I...>);
template <class Op, class... A>
void describe_node(const map_node<Op, A...>& n, std::string& out, int depth, const operand_layout*& leaf,
                   const elementwise_layout& L) {
  indent(out, depth);
  out += std::string(Op::name) + " -> " + dtype_name<typename map_node<Op, A...>::value_type>() + '\n';
  describe_children(n, out, depth + 1, leaf, L, std::index_sequence_for<A...>{});
}
template <class Op, class... A, std::size_t... I>
void describe_children(const map_node<Op, A...>& n, std::string& out, int depth, const operand_layout*& leaf,
                       const elementwise_layout& L, std::index_sequence<I...>) {
  (describe_node(fusex::detail::get<I>(n.args), out, depth, leaf, L), ...);
}

template <class... T, class... E>
std::string explain_reduce(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  std::string out;
  std::vector<reduction_info> reds;
  (collect_reductions(exprs, reds), ...);
  std::string why = "several destinations";
  if constexpr (sizeof...(T) == 1) {
    const auto& dst = std::get<0>(dsts);
    const auto& e = std::get<0>(std::forward_as_tuple(exprs...));
    auto ro = gather_row_operands(dst, e);
    constexpr int V = vector_width_of<std::tuple<view<T>...>, E...>::value;
    const row_layout R = plan_rows(ro.ops.data(), ro.inside.data(), static_cast<int>(ro.ops.size()), reds, V);
    if (R.ok) {
      const std::string pieces = R.index64 ? std::to_string((R.rows + R.rows_per_piece - 1) / R.rows_per_piece) : "1";
      out += "fusex plan: " + (R.index64 ? pieces + " launches of 1 kernel" : std::string("1 kernel")) +
             " (row reduction with epilogue, rule 1): " + std::to_string(R.rows) + " rows x " + std::to_string(R.cols) +
             " columns, " + std::to_string(R.tpr) + (R.tpr == 1 ? " thread per row, " : " threads per row, ") +
             std::to_string(reduction_depth<evaluator_t<std::decay_t<decltype(e)>, std::int64_t>>::value) +
             " pass(es) over each row (" + std::to_string(reds.size()) +
             " reduction(s); those of one nesting level share a pass) then the " +
             (R.full_dest ? "epilogue over the row" : "one value per row") + ", " +
             (R.vector_width > 1 ? "vector width " + std::to_string(R.vector_width) : std::string("scalar accesses")) +
             (R.cached ? ", row kept in registers (read once; " + std::to_string(R.cached_leaves) + " of " +
                             std::to_string(ro.ops.size() - 1) + " leaves answered from registers" +
                             (R.prefetched_leaves > 0
                                  ? ", " + std::to_string(R.prefetched_leaves) + " prefetched into L1 at the load"
                                  : std::string()) +
                             (row_static_path(
                                  R, ro.ops.data(), static_cast<int>(ro.ops.size()),
                                  predicted_cache_modes<evaluator_t<std::decay_t<decltype(e)>, std::int64_t>>::value)
                                  ? "; static path: roles and strides known at compile time"
                                  : "; roles tested at run time") +
                             ")"
                       : (R.reread_why != nullptr ? ", row re-read per pass (" + std::string(R.reread_why) + ")"
                                                  : std::string())) +
             ", 32-bit indices" +
             (R.index64 ? " (2^31 elements or more: launched in " + pieces + " pieces of at most " +
                              std::to_string(R.rows_per_piece) + " rows)\n"
                        : std::string("\n"));
      elementwise_layout L;
      L.shape = R.full;
      const operand_layout* leaf = ro.ops.data() + 1;
      out += "  destination: " + operand_text(ro.ops[0]) + " <-\n";
      describe_node(e, out, 2, leaf, L);
      return out;
    }
    why = R.why_not;
  }
  out += "fusex plan: " + std::to_string(reds.size()) +
         " reduction(s) computed first by the generic reduction kernel (plus a finishing kernel when a "
         "reduction is split across blocks) into temporaries from the default resource, then 1 elementwise "
         "kernel (rule 2: " +
         why + ")\n";
  for (const auto& r : reds)
    out += "  " + std::string(r.name) + " of an operand of shape " + r.child_shape.str() + "\n";
  return out;
}

template <class... T, class... E>
std::string explain_impl(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  if constexpr ((0 + ... + E::reduce_count) > 0) return explain_reduce(dsts, exprs...);
  const auto pe = prepare(dsts, exprs...);
  const elementwise_layout& L = pe.layout;
  std::string out;
  if (L.numel == 0) {
    return "fusex plan: empty destination " + L.shape.str() + ": no kernel\n";
  }
  const std::size_t pieces = L.index64 ? split_index32(L, pe.ops.data(), static_cast<int>(pe.ops.size())).size() : 1;
  out += "fusex plan: " + std::to_string(pieces) + (pieces == 1 ? " kernel" : " kernels") + " (elementwise), " +
         std::to_string(sizeof...(T)) + " destination(s) of shape " + L.shape.str() + "\n";
  out += "  index space [";
  for (int d = 0; d < L.rank; ++d) out += (d ? ", " : "") + std::to_string(L.extent[d]);
  out += "], ";
  if (L.vector_width > 1) {
    out += "vector width " + std::to_string(L.vector_width) + " (16-byte accesses)";
  } else {
    out += "scalar accesses";
  }
  out += L.index64 ? ", 32-bit indices in " + std::to_string(pieces) + " pieces (2^31 elements or offsets or more)\n"
                   : ", 32-bit indices\n";
  const operand_layout* leaf = pe.ops.data() + sizeof...(T);
  int i = 0;
  auto one = [&](const auto& e) {
    out += "  destination " + std::to_string(i) + ": " + operand_text(pe.ops[static_cast<std::size_t>(i)]) + " <-\n";
    describe_node(e, out, 2, leaf, L);
    ++i;
  };
  (one(exprs), ...);
  return out;
}

template <class D>
struct is_outputs : std::false_type {};
template <class... T>
struct is_outputs<outputs<T...>> : std::true_type {};

template <class Dst>
using dest_value_t = typename decltype(as_destination(std::declval<const Dst&>()))::value_type;

template <class... T, class Args, std::size_t... I>
auto dests_and_exprs(const outputs<T...>& o, const Args& args, std::index_sequence<I...>) {
  return std::make_pair(o.views, std::make_tuple(as_expr<T>(std::get<I>(args))...));
}
}  // namespace detail

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
