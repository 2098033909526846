#pragma once
/// \file
/// (Included by dispatch/elementwise.hpp after the elementwise machinery it builds on.)
/// Evaluation of expressions that contain reductions: the row kernel (one launch) when the plan
/// allows, otherwise materialisation of each reduction into a temporary by the generic reduction
/// kernels, then one elementwise kernel. The host backend materialises with plain loops.

#include <fusex/core/view.hpp>
#include <fusex/device/reduce_kernels.hpp>
#include <fusex/device/evaluator.hpp>
#include <fusex/dispatch/reduce_generic.hpp>
#include <fusex/expr/reduce.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/plan/reduce_plan.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

namespace fusex::detail {

// Defined in <fusex/dispatch/elementwise.hpp>: the host backend's elementwise loop.
template <class... T, class... E>
void eval_host(const std::tuple<view<T>...>& dsts, const E&... exprs);

// --- the reductions of an expression, in post-order (the order of their row-kernel slots) -------
struct reduction_collector {
  std::vector<reduction_info>& out;
  template <class N, class... K>
  int operator()(const N&, const K&...) const {
    return 0;
  }
  template <class Op, class C>
  int operator()(const reduce_node<Op, C>& n, int) const {
    out.push_back({n.child.shape(), n.mask, Op::name});
    return 0;
  }
};
template <class E>
void collect_reductions(const E& e, std::vector<reduction_info>& out) {
  reduction_collector c{out};
  fold_tree(e, c);
}

// --- materialisation: each reduction replaced by a leaf over its computed result ---------------
// A materialised reduction is kept in its compute type (float for float16/bfloat16 results), as
// the row kernel keeps it, so the two strategies round alike.
template <class Op, class C>
using materialized_reduction_t = leaf_node<compute_t<typename reduce_node<Op, C>::value_type>>;

/// The tree with each reduction (its operand materialised first) replaced by what the reducer R
/// returns for it: a leaf over its result. A reduction equal to an earlier one (the same op, axes
/// and operand: expr/detail/share.hpp; only reduction types that occur more than once are looked
/// up) takes that one's result: computed once.
template <class R, class Dups>
struct materializer : rebuild_tree {
  struct done {
    const void* node;  // the reduction in the caller's tree
    const void* type;  // &type_tag<its type>::id
    const void* result;
    strides_t strides;  // the result leaf's (a validating stand-in's are zeros)
  };
  R& r;
  std::vector<done> seen;
  using rebuild_tree::operator();
  template <class Op, class C, class K>
  auto operator()(const reduce_node<Op, C>& n, const K& child) {
    using N = reduce_node<Op, C>;
    using L = materialized_reduction_t<Op, C>;
    using T = typename L::value_type;
    if constexpr (type_list_contains<N, Dups>::value) {
      for (const done& d : seen) {
        if (d.type == &type_tag<N>::id && same_value(*static_cast<const N*>(d.node), n))
          return L{{}, view<const T>(static_cast<const T*>(d.result), n.shape(), d.strides)};
      }
      const L leaf = r(n.with_children(child));
      seen.push_back({&n, &type_tag<N>::id, leaf.v.data(), leaf.v.strides()});
      return leaf;
    } else {
      return r(n.with_children(child));
    }
  }
};
template <class E, class R>
auto materialize(const E& e, R& r) {
  materializer<R, share_dups_t<E>> m{{}, r, {}};
  return fold_tree(e, m);
}

/// The host backend's reducer: evaluates the operand into a host temporary, then reduces it with
/// plain loops in row-major order.
struct host_reducer {
  std::deque<std::vector<unsigned char>> storage;

  template <class Op, class C>
  materialized_reduction_t<Op, C> operator()(const reduce_node<Op, C>& n);
};

// The device backend's reducer: each reduction into a temporary of `temps` (dispatch/reduce_generic.hpp).
struct device_reducer {
  reduce_temps temps;

  template <class Op, class C>
  materialized_reduction_t<Op, C> operator()(const reduce_node<Op, C>& n);
};

// Stands in for the reductions of an evaluation while it is validated (fusex::eval checks every
// shape and overlap before its first launch): each reduction becomes a leaf of its result's shape
// over one static element (zero strides), which aliases no destination, as its temporary won't.
// Nothing is allocated or launched.
struct validating_reducer {
  template <class Op, class C>
  materialized_reduction_t<Op, C> operator()(const reduce_node<Op, C>& n) const {
    using R = compute_t<typename reduce_node<Op, C>::value_type>;
    static const R stand_in{};
    const shape_t s = n.shape();
    strides_t zero;
    for (int d = 0; d < s.rank(); ++d) zero.push_back(0);
    return leaf_node<R>{{}, view<const R>(&stand_in, s, zero)};
  }
};

// Leaves of `e` with strides in the space `s` (no collapsing), as planner operands.
template <class E, std::size_t N>
void leaves_in_space(const E& e, const shape_t& s, std::array<operand_layout, N>& ops, int first) {
  int k = first;
  auto add = [&](const leaf_info& li) {
    operand_layout& o = ops[static_cast<std::size_t>(k++)];
    o = operand_from_leaf(li);
    for (int d = 0; d < max_rank; ++d) o.s[d] = 0;
    if (!broadcast_strides(li.shape, li.strides, s, o.s)) throw broadcast_error("operand", li.shape, s);
  };
  visit_leaves(e, add);
}

template <class Op, class C>
materialized_reduction_t<Op, C> host_reducer::operator()(const reduce_node<Op, C>& n) {
  using T = typename C::value_type;
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  const shape_t s = n.child.shape();
  const reduce_split sp = split_dims(s, n.mask);
  // The operand, evaluated densely in its compute type (float for float16/bfloat16), as the
  // device kernels see it: not rounded to T on the way.
  using CT = compute_t<T>;
  storage.emplace_back(static_cast<std::size_t>(numel(s)) * sizeof(CT) + 1);
  CT* in = reinterpret_cast<CT*>(storage.back().data());
  eval_host(std::make_tuple(view<CT>(in, s)), n.child);
  storage.emplace_back(static_cast<std::size_t>(sp.k_count) * sizeof(R) + 1);
  R* out = reinterpret_cast<R*>(storage.back().data());
  const strides_t st = contiguous_strides(s);
  for (std::int64_t k = 0; k < sp.k_count; ++k) {
    std::int64_t base = 0, rem = k;
    for (int j = sp.nk - 1; j >= 0; --j) {
      const int d = sp.kdim[j];
      base += (rem % s[d]) * st[d];
      rem /= s[d];
    }
    auto acc = n.op.template identity<T>();
    for (std::int64_t i = 0; i < sp.n_count; ++i) {
      std::int64_t off = base, r = i;
      for (int j = sp.nr - 1; j >= 0; --j) {
        const int d = sp.rdim[j];
        off += (r % s[d]) * st[d];
        r /= s[d];
      }
      acc = n.op.template combine<T>(acc, n.op.template lift<T>(in[off], i));
    }
    out[k] = convert<R>(n.op.template finish<T>(acc, sp.n_count));
  }
  return leaf_node<R>{{}, view<const R>(out, n.shape())};
}

#if defined(__CUDACC__)
/// The type-dependent half of a generic reduction: launches one of the reduction's kernels
/// (dispatch/reduce_generic.hpp decides which, where and how many), each built over the operand's
/// evaluator with the leaf strides it is given.
template <class Op, class C>
struct generic_reduce_thunks {
  using Index = std::uint32_t;
  using T = typename C::value_type;
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  using Acc = typename Op::template acc<T>;
  static_assert(sizeof(Acc) <= 32, "fusex: internal: accumulator larger than the scratch slot");
  static constexpr int widest = max_leaf_size<C>::value;
  static constexpr int W = widest <= 0 || widest >= 16 ? 1 : 16 / widest;  // 1: no 2-D kernels
  using Ev = decltype(build_evaluator(std::declval<const C&>(), std::declval<leaf_strides_source<Index>&>()));

  static void launch(const void* node, const reduce_launch& l) {
    const auto& n = *static_cast<const reduce_node<Op, C>*>(node);
    const device_properties& dev = *l.dev;
    auto child = [&] {
      leaf_strides_source<Index> src{l.leaves, 0, 0};
      return build_evaluator(n.child, src);
    };
    Acc* const partials = static_cast<Acc*>(l.partials);
    R* const out = static_cast<R*>(l.out);
    switch (l.kind) {
      case reduce_kernel_kind::rows:
      case reduce_kernel_kind::cols:
        if constexpr (W > 1) {
          const auto& p = *static_cast<const reduce2d_params<Index>*>(l.params);
          if (l.kind == reduce_kernel_kind::rows)
            launch_kernel("reduce_rows_kernel", &reduce_rows_kernel<Index, W, Op, Ev, Acc, R>, l.grid, l.block, 0,
                          l.stream, dev, p, n.op, child(), partials, out);
          else
            launch_kernel("reduce_cols_kernel", &reduce_cols_kernel<Index, W, Op, Ev, Acc, R>, l.grid, l.block, 0,
                          l.stream, dev, p, n.op, child(), partials, out);
          return;
        }
        break;
      case reduce_kernel_kind::block:
        launch_kernel("reduce_block_kernel", &reduce_block_kernel<Index, Op, Ev, Acc, R>, l.grid, l.block, 0, l.stream,
                      dev, *static_cast<const reduce_params<Index>*>(l.params), n.op, child(), partials, out);
        return;
      case reduce_kernel_kind::thread:
        launch_kernel("reduce_thread_kernel", &reduce_thread_kernel<Index, Op, Ev, Acc, R>, l.grid, l.block, 0,
                      l.stream, dev, *static_cast<const reduce_params<Index>*>(l.params), n.op, child(), partials, out);
        return;
      case reduce_kernel_kind::finish:
        launch_kernel("reduce_finish_kernel", &reduce_finish_kernel<Index, Op, T, Acc, R>, l.grid, l.block, 0, l.stream,
                      dev, Index{l.k_count}, Index{l.splits}, l.n_count, l.k_major, n.op,
                      static_cast<const Acc*>(l.partials), static_cast<const Acc*>(l.prev), static_cast<Acc*>(l.running),
                      out);
        return;
      case reduce_kernel_kind::finish_cols:
        launch_kernel("reduce_finish_cols_kernel", &reduce_finish_cols_kernel<Index, Op, T, Acc, R>, l.grid, l.block,
                      0, l.stream, dev, Index{l.k_count}, Index{l.splits}, static_cast<Index>(l.n_count), n.op,
                      static_cast<const Acc*>(l.partials), out);
        return;
    }
    throw error("fusex: internal: a reduction kernel this reduction does not have");
  }

  static int cols_blocks_per_sm(const device_properties& dev) {
    if constexpr (W > 1) return resident_blocks_per_sm<&reduce_cols_kernel<Index, W, Op, Ev, Acc, R>, 256>(dev);
    else return 1;
  }
};

template <class Op, class C>
materialized_reduction_t<Op, C> device_reducer::operator()(const reduce_node<Op, C>& n) {
  using thunks = generic_reduce_thunks<Op, C>;
  using R = typename thunks::R;
  const shape_t s = n.child.shape();
  const std::int64_t k_count = numel(n.shape());
  R* out = static_cast<R*>(temps.take(static_cast<std::size_t>(k_count) * sizeof(R)));
  if (k_count > 0) {
    std::array<operand_layout, static_cast<std::size_t>(C::leaf_count) + 1> ops{};
    leaves_in_space(n.child, s, ops, 1);
    reduce_kernels k;
    k.node = &n;
    k.name = Op::name;
    k.vector_width = thunks::W;
    k.acc_size = sizeof(typename thunks::Acc);
    k.result_size = sizeof(R);
    k.launch = &thunks::launch;
    k.cols_blocks_per_sm = &thunks::cols_blocks_per_sm;
    run_generic_reduction(k, s, n.mask, ops.data() + 1, C::leaf_count, out, temps);
  }
  return leaf_node<R>{{}, view<const R>(out, n.shape())};
}
#endif

// Operands of a row evaluation: the destination, then the leaves (with their index spaces).
template <int NLeaves>
struct row_operands {
  std::array<operand_layout, NLeaves + 1> ops;
  std::array<bool, NLeaves + 1> inside{};
};

template <class T, class E>
row_operands<E::leaf_count> gather_row_operands(const view<T>& dst, const E& expr) {
  row_operands<E::leaf_count> ro;
  ro.ops[0] = describe_operand(dst);
  int k = 1;
  auto add = [&](const leaf_info& li) {
    ro.ops[static_cast<std::size_t>(k)] = operand_from_leaf(li);
    ro.inside[static_cast<std::size_t>(k)] = li.in_reduction;
    ++k;
  };
  visit_leaves(expr, add);
  return ro;
}

// In-place evaluation is allowed element for element on whole rows; any other overlap races.
template <std::size_t N>
void check_row_overlap(const std::array<operand_layout, N>& ops, const row_layout& L) {
  const std::int64_t ext[2] = {L.rows, L.cols > 0 ? L.cols : 1};
  const byte_range d = operand_bytes(ops[0], ext, 2);
  for (std::size_t i = 1; i < N; ++i) {
    if (ops[i].computed) continue;  // no memory
    if (!d.overlaps(operand_bytes(ops[i], ext, 2))) continue;
    const bool same = L.full_dest && ops[i].data == ops[0].data && ops[i].elem_size == ops[0].elem_size &&
                      ops[i].s[0] == ops[0].s[0] && ops[i].s[1] == ops[0].s[1];
    if (!same) throw overlap_error("destination", ops[0], "input " + std::to_string(i - 1), ops[i]);
  }
}

#if defined(__CUDACC__)
template <class Index, int V, class T, class E, std::size_t N>
void launch_rows(const std::array<operand_layout, N>& ops, const row_layout& L, const view<T>& dst, const E& expr,
                 cudaStream_t stream) {
  row_params<Index> p{};
  p.rows = static_cast<Index>(L.rows);
  p.cols = static_cast<Index>(L.cols);
  p.tpr = L.tpr;
  p.rows_per_block = L.rows_per_block;
  const device_properties& dev = current_device_info();
  // Opt-in (row_tuning::spread_small): few rows (fewer full blocks than SMs) get fewer rows per
  // block, down to one, so they spread over more SMs and each block's barriers wait for fewer
  // warps.
  if (row_tuning_state().spread_small) {
    while (p.rows_per_block > 1 && (L.rows + p.rows_per_block - 1) / p.rows_per_block < dev.sm_count)
      p.rows_per_block /= 2;
  }
  p.n_slots = E::reduce_count;
  p.vectorized = L.vector_width > 1;
  p.cached = L.cached && L.vector_width == V;
  p.full = L.full_dest;
  p.cache_modes = L.cache_modes;
  const auto out = make_out_evaluator<Index>(dst, ops[0]);
  leaf_strides_source<Index> src{ops.data() + 1, 0, 0};
  const auto ev = build_evaluator(expr, src);
  std::int64_t blocks = (L.rows + p.rows_per_block - 1) / p.rows_per_block;
  if (blocks > (std::int64_t{1} << 30)) blocks = std::int64_t{1} << 30;
  const std::size_t smem = static_cast<std::size_t>(p.rows_per_block) * E::reduce_count * sizeof(std::uint64_t);
  const unsigned block = static_cast<unsigned>(p.rows_per_block * p.tpr);
  using Out = std::decay_t<decltype(out)>;
  using Ev = std::decay_t<decltype(ev)>;
  // The planner's register budget is the kernel's (one vector set per distinct leaf type): a
  // cached plan always has the cached path compiled.
  if (p.cached && !row_cache_possible<Index, V, Ev>)
    throw error("fusex: internal: a cached row plan without a cached kernel");
  if constexpr (row_cache_possible<Index, V, Ev>) {
    // (The static path's shared values take their lazy form: it needs lazy_ok.)
    if (p.cached && src.shares_lazy && row_static_path(L, ops.data(), static_cast<int>(N), predicted_cache_modes<Ev>::value)) {
      launch_kernel("row_kernel (static path)", &row_kernel<Index, V, true, Out, Ev>,
                    dim3(static_cast<unsigned>(blocks)), dim3(block), smem, stream, dev, p, out, ev);
      return;
    }
  }
  launch_kernel("row_kernel", &row_kernel<Index, V, false, Out, Ev>, dim3(static_cast<unsigned>(blocks)), dim3(block),
                smem, stream, dev, p, out, ev);
}
#endif

}  // namespace fusex::detail
