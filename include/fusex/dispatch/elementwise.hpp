#pragma once
/// \file
/// Elementwise dispatch: the host side of fusex::eval and fusex::host::eval. Plans the operands
/// (plan/elementwise_plan.hpp), picks the index width and access width, builds the evaluators and
/// launches the elementwise kernel (device/elementwise_kernel.hpp); expressions with reductions go
/// through dispatch/reduce.hpp. The public entry points are in <fusex/eval.hpp>.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/device/elementwise_kernel.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/device/evaluator.hpp>
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
    visit_leaves(e, add_leaf);
  };
  (add_expr(exprs), ...);
  plan_elementwise(pe.ops.data(), n_out, k, vector_width_of<std::tuple<view<T>...>, E...>::value, pe.layout);
  return pe;
}

/// The evaluators of an elementwise kernel's expressions, in order; `lazy` tells whether their shared
/// values may take the lazy form (leaf_strides_source::shares_lazy).
template <class Index, class PE, class... E>
auto make_evaluators(const PE& pe, std::size_t n_out, bool& lazy, const E&... exprs) {
  leaf_strides_source<Index> src{pe.ops.data() + n_out, 0};
  // Braced initialisation runs left to right: expressions take their leaves in order.
  fusex::detail::tuple<evaluator_t<E, Index>...> r{build_evaluator(exprs, src)...};
  lazy = src.shares_lazy;
  return r;
}

/// The kernel's assignments, repeated leaves in leaf form `Form` (share_leaves).
template <int Form, class Index, class PE, class... T, class Evs, std::size_t... I>
auto make_assignments(const PE& pe, const std::tuple<view<T>...>& dsts, const Evs& evs, std::index_sequence<I...>) {
  using result =
      fusex::detail::tuple<assignment<out_eval<T, Index>, decltype(share_leaves<Form>(fusex::detail::get<I>(evs)))>...>;
  return result{assignment<out_eval<T, Index>, decltype(share_leaves<Form>(fusex::detail::get<I>(evs)))>{
      make_out_evaluator<Index>(std::get<I>(dsts), pe.ops[I]), share_leaves<Form>(fusex::detail::get<I>(evs))}...};
}
/// Whether a kernel's assignments have shared values (lazy kernels exist for them: one, or two where
/// repeated leaves are wrapped).
template <class Assignments>
struct assignments_share;
template <class... A>
struct assignments_share<fusex::detail::tuple<A...>>
    : std::bool_constant<(has_shares_v<typename A::expr_type> || ...)> {};

template <class Evs, std::size_t... I>
bool all_leaves_first(const Evs& evs, std::index_sequence<I...>) {
  return (leaves_all_first(fusex::detail::get<I>(evs)) && ...);
}

/// The forms of an elementwise kernel: shared values (if any) computed where first met
/// (form_plain), computed first and read lazily with repeated leaves' roles tested (form_lazy), or
/// lazily with every repeated leaf its type's first view (form_lazy_first).
enum elementwise_form : int { form_plain, form_lazy, form_lazy_first };
inline const char* elementwise_form_name(int form) {
  return form == form_plain  ? "elementwise_kernel"
         : form == form_lazy ? "elementwise_kernel (shared values resolved at compile time)"
                             : "elementwise_kernel (shared values and repeated leaves resolved at compile time)";
}

/// Chooses the kernel's form (`lazy`: the evaluators allow the lazy one) and calls
/// run(assignments, std::integral_constant<int, form>{}) with the assignments of that form only.
/// Device launches and the host backend both choose here, so the host runs what the GPU would.
template <class Index, class PE, class... T, class Evs, class Run>
void with_elementwise_form(const PE& pe, const std::tuple<view<T>...>& dsts, const Evs& evs, bool lazy, Run&& run) {
  using seq = std::index_sequence_for<T...>;
  using AS = decltype(make_assignments<share_leaf_any, Index>(pe, dsts, evs, seq{}));
  if constexpr (assignments_share<AS>::value) {
    if (lazy) {
      using AS_first = decltype(make_assignments<share_leaf_first, Index>(pe, dsts, evs, seq{}));
      // A third kernel only where repeated leaves exist (else both leaf forms are one type).
      if constexpr (!std::is_same_v<AS, AS_first>) {
        if (all_leaves_first(evs, seq{})) {
          run(make_assignments<share_leaf_first, Index>(pe, dsts, evs, seq{}),
              std::integral_constant<int, form_lazy_first>{});
          return;
        }
      }
      run(make_assignments<share_leaf_any, Index>(pe, dsts, evs, seq{}), std::integral_constant<int, form_lazy>{});
      return;
    }
  }
  run(make_assignments<share_leaf_any, Index>(pe, dsts, evs, seq{}), std::integral_constant<int, form_plain>{});
}

}  // namespace detail
}  // namespace fusex

#include <fusex/dispatch/reduce.hpp>

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
  bool lazy = true;
  const auto evs = make_evaluators<Index>(pe, sizeof...(T), lazy, exprs...);
  const device_properties& dev = current_device_info();
  int block = elementwise_block;
  // (Rank 2 here is the kernel's two-dimension path: 32-bit plans of rank 1 are padded above.)
  const int unroll = L.rank == 2 ? elementwise_unroll : general_unroll_of<elementwise_unroll>;
  auto blocks_of = [&](int b) {
    const std::int64_t per_block = std::int64_t{b} * unroll;
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
  with_elementwise_form<Index>(pe, dsts, evs, lazy, [&](const auto& as, auto form) {
    using AS = std::decay_t<decltype(as)>;
    constexpr int f = decltype(form)::value;
    launch_kernel(elementwise_form_name(f), elementwise_kernel_for<Index, V, AS, f != form_plain>(),
                  dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(block)), 0, stream, dev, params, as);
  });
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
        for (auto& o : ops) advance_operand(o, r0 * o.s[0]);
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
  device_reducer dr{{stream, {}}};
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
    bool lazy = true;
    const auto evs = make_evaluators<std::uint64_t>(pe, sizeof...(T), lazy, exprs...);
    using seq = std::make_index_sequence<sizeof...(T)>;
    // The form the device would run, so that host tests check each kernel's evaluators.
    with_elementwise_form<std::uint64_t>(pe, dsts, evs, lazy, [&](const auto& as, auto form) {
      for (std::uint64_t w = 0; w < params.work; ++w)
        process_items<1, 1, max_rank, decltype(form)::value != form_plain>(as, params, w, std::uint64_t{1}, params.work,
                                                                       seq{});
    });
  }
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
}  // namespace fusex
