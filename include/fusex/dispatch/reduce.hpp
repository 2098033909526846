#pragma once
/// \file
/// (Included by dispatch/elementwise.hpp after the elementwise machinery it builds on.)
/// Evaluation of expressions that contain reductions: the row kernel (one launch) when the plan
/// allows, otherwise materialisation of each reduction into a temporary by the generic reduction
/// kernels, then one elementwise kernel. The host backend materialises with plain loops.

#include <fusex/core/view.hpp>
#include <fusex/device/reduce_kernels.hpp>
#include <fusex/device/evaluator.hpp>
#include <fusex/expr/reduce.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/plan/reduce_pieces.hpp>
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
/// returns for it: a leaf over its result.
template <class R>
struct materializer : rebuild_tree {
  R& r;
  using rebuild_tree::operator();
  template <class Op, class C, class K>
  auto operator()(const reduce_node<Op, C>& n, const K& child) const {
    return r(n.with_children(child));
  }
};
template <class E, class R>
auto materialize(const E& e, R& r) {
  materializer<R> m{{}, r};
  return fold_tree(e, m);
}

// Kept and reduced dimensions of an operand shape.
struct reduce_split {
  std::int64_t k_count = 1, n_count = 1;
  int nk = 0, nr = 0;
  int kdim[max_rank] = {}, rdim[max_rank] = {};
};
inline reduce_split split_dims(const shape_t& s, std::uint32_t mask) {
  reduce_split r;
  for (int d = 0; d < s.rank(); ++d) {
    if (mask & (1u << d)) {
      r.rdim[r.nr++] = d;
      r.n_count *= s[d];
    } else {
      r.kdim[r.nk++] = d;
      r.k_count *= s[d];
    }
  }
  return r;
}

/// The host backend's reducer: evaluates the operand into a host temporary, then reduces it with
/// plain loops in row-major order.
struct host_reducer {
  std::deque<std::vector<unsigned char>> storage;

  template <class Op, class C>
  materialized_reduction_t<Op, C> operator()(const reduce_node<Op, C>& n);
};

// Device-side temporaries of one evaluation, freed (stream-ordered) when it ends.
struct device_reducer {
  cudaStream_t stream;
  std::deque<buffer<unsigned char>> storage;

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
/// The two-dimensional fast path of the generic reductions: when every leaf folds to
/// [kept, reduced] (or [reduced, kept]) strides with unit stride (or broadcast) along the inner
/// one and 16-byte alignment, the reduction runs with vector loads and two-term addressing.
/// Returns false (nothing launched) where it does not apply.
template <class Index, class Op, class C, std::size_t N>
bool launch_reduce_2d(const reduce_node<Op, C>& n, const shape_t& s, const reduce_split& sp,
                      const std::array<operand_layout, N>& reordered, bool inner_reduced, std::int64_t resident,
                      compute_t<typename reduce_node<Op, C>::value_type>* out, device_reducer& dr) {
  using T = typename C::value_type;
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  using Acc = typename Op::template acc<T>;
  constexpr int widest = max_leaf_size<C>::value;
  constexpr int W = widest <= 0 || widest >= 16 ? 1 : 16 / widest;
  if constexpr (W == 1) {
    return false;  // the generic kernels serve operands of 16-byte elements
  } else {
    if (sp.n_count == 0 || sp.k_count == 0) return false;
    std::int64_t ext[max_rank] = {};
    for (int j = 0; j < sp.nk; ++j) ext[j] = s[sp.kdim[j]];
    for (int j = 0; j < sp.nr; ++j) ext[sp.nk + j] = s[sp.rdim[j]];
    auto ops = reordered;
    for (std::size_t i = 1; i < N; ++i) {
      operand_layout& o = ops[i];
      std::int64_t ks = 0, ns = 0;
      if (!fold_dims(o.s, ext, 0, sp.nk, ks) || !fold_dims(o.s, ext, sp.nk, sp.nk + sp.nr, ns)) return false;
      // Vector access along the inner dimension (reduced for rows, kept for columns).
      const std::int64_t inner = inner_reduced ? ns : ks, outer = inner_reduced ? ks : ns;
      const std::int64_t outer_count = inner_reduced ? sp.k_count : sp.n_count;
      if (inner != 0 && !o.computed && !vector_ok(o, W, inner, &outer, outer_count > 1 ? 1 : 0)) return false;
      for (int d = 0; d < max_rank; ++d) o.s[d] = 0;
      o.s[0] = inner_reduced ? ks : ns;
      o.s[1] = inner_reduced ? ns : ks;
    }
    if (!inner_reduced && sp.k_count % W != 0) return false;
    const device_properties& dev = current_device_info();
    leaf_strides_source<Index> src{ops.data() + 1, 0, 0};
    const auto child = build_evaluator(n.child, src);
    reduce2d_params<Index> p{};
    p.k_count = static_cast<Index>(sp.k_count);
    p.n_count = static_cast<Index>(sp.n_count);
    std::int64_t splits = 1, tiles = 0;
    int lane_shift = 0;
    if (inner_reduced) {
      const std::int64_t want = (2 * resident / 256 + sp.k_count - 1) / sp.k_count;
      const std::int64_t most = (sp.n_count + 4095) / 4096;
      splits = want < most ? want : most;
    } else {
      // Column tiles of `lanes` vectors, 256 / lanes row groups per block; the rows split so that
      // the grid is at most one wave of resident blocks (every block then runs from start to end
      // beside the others: measured on the H200 at [4096, 16384] fp32, 1 wave 63.8 us, 1.94
      // waves 65.0, 2.06 waves 68.5: a last partial wave of blocks that each read a long column
      // range runs latency-bound), each thread keeping at least two batches of loads, and few
      // enough partials per output for the finishing kernel to read quickly.
      const std::int64_t kv = sp.k_count / W;
      while (lane_shift < 5 && (std::int64_t{1} << lane_shift) < kv) ++lane_shift;
      tiles = (kv + (std::int64_t{1} << lane_shift) - 1) >> lane_shift;
      const std::int64_t wave =
          std::int64_t{dev.sm_count} *
          resident_blocks_per_sm<&reduce_cols_kernel<Index, W, Op, decltype(child), Acc, R>, 256>(dev);
      const std::int64_t want = wave / tiles;
      const std::int64_t most = sp.n_count / ((256 >> lane_shift) * 8);
      splits = want < most ? want : most;
      if (splits > 256) splits = 256;
    }
    if (splits < 1) splits = 1;
    if (!inner_reduced) {
      p.span = static_cast<Index>((sp.n_count + splits - 1) / splits);
      splits = (sp.n_count + static_cast<std::int64_t>(p.span) - 1) / static_cast<std::int64_t>(p.span);  // none empty
      p.lane_shift = lane_shift;
    }
    p.splits = static_cast<Index>(splits);
    Acc* partials = nullptr;
    if (splits > 1) {
      dr.storage.emplace_back(static_cast<std::size_t>(splits * sp.k_count) * sizeof(Acc), dr.stream);
      partials = reinterpret_cast<Acc*>(dr.storage.back().data());
    }
    if (inner_reduced) {
      const std::int64_t ky = sp.k_count < 65535 ? sp.k_count : 65535;
      const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(ky),
                      static_cast<unsigned>((sp.k_count + ky - 1) / ky));
      launch_kernel("reduce_rows_kernel", &reduce_rows_kernel<Index, W, Op, decltype(child), Acc, R>, grid, dim3(256),
                    0, dr.stream, dev, p, n.op, child, partials, out);
    } else {
      launch_kernel("reduce_cols_kernel", &reduce_cols_kernel<Index, W, Op, decltype(child), Acc, R>,
                    dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits)), dim3(256), 0, dr.stream, dev, p,
                    n.op, child, partials, out);
    }
    if (splits > 1 && inner_reduced) {
      const std::int64_t kx = sp.k_count < 65535 ? sp.k_count : 65535;
      const dim3 grid(static_cast<unsigned>(kx), static_cast<unsigned>((sp.k_count + kx - 1) / kx));
      launch_kernel("reduce_finish_kernel", &reduce_finish_kernel<Index, Op, T, Acc, R>, grid, dim3(256), 0, dr.stream,
                    dev, static_cast<Index>(sp.k_count), static_cast<Index>(splits), sp.n_count, true, n.op,
                    static_cast<const Acc*>(partials), static_cast<const Acc*>(nullptr), static_cast<Acc*>(nullptr),
                    out);
    } else if (splits > 1) {
      std::int64_t fb = (sp.k_count + 31) / 32;
      const std::int64_t cap = std::int64_t{dev.sm_count} * 64;
      if (fb > cap) fb = cap;
      launch_kernel("reduce_finish_cols_kernel", &reduce_finish_cols_kernel<Index, Op, T, Acc, R>,
                    dim3(static_cast<unsigned>(fb)), dim3(256), 0, dr.stream, dev, static_cast<Index>(sp.k_count),
                    static_cast<Index>(splits), static_cast<Index>(sp.n_count), n.op, static_cast<const Acc*>(partials),
                    out);
    }
    return true;
  }
}
#endif

#if defined(__CUDACC__)
// Where a generic reduction's results go: finished values at `out`, or, for a piece of a reduction
// whose reduced elements are cut (plan/reduce_pieces.hpp), partial accumulators.
struct generic_target {
  void* partials = nullptr;      // non-null: write the partials here (outputs x splits), no finish
  std::int64_t* used = nullptr;  // the splits written
  std::int64_t n_base = 0;       // the piece's first reduced element (argmin/argmax indices)
};

// Leaf strides in coordinate-position order: kept dimensions first, then reduced ones.
template <std::size_t N>
std::array<operand_layout, N> to_positions(const std::array<operand_layout, N>& ops, const reduce_split& sp) {
  auto reordered = ops;
  for (auto& o : reordered) {
    std::int64_t t[max_rank] = {};
    for (int j = 0; j < sp.nk; ++j) t[j] = o.s[sp.kdim[j]];
    for (int j = 0; j < sp.nr; ++j) t[sp.nk + j] = o.s[sp.rdim[j]];
    for (int d = 0; d < max_rank; ++d) o.s[d] = t[d];
  }
  return reordered;
}

// One launch (or two, with a finishing one) of the generic reduction kernels, 32-bit indices: the
// caller has checked that counts and offsets fit (device_reducer cuts larger ones into pieces).
// `inner_reduced`: whether the operand's innermost dimension is reduced (threads then run along
// the reduced elements).
template <class Op, class C>
void launch_generic_reduce(const reduce_node<Op, C>& n, const shape_t& s, const reduce_split& sp,
                           const std::array<operand_layout, static_cast<std::size_t>(C::leaf_count) + 1>& ops,
                           bool inner_reduced, compute_t<typename reduce_node<Op, C>::value_type>* out,
                           device_reducer& dr, const generic_target& target) {
  using Index = std::uint32_t;
  using T = typename C::value_type;
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  using Acc = typename Op::template acc<T>;
  static_assert(sizeof(Acc) <= 32, "fusex: internal: accumulator larger than the scratch slot");
  const device_properties& dev = current_device_info();
  const auto reordered = to_positions(ops, sp);
  leaf_strides_source<Index> src{reordered.data() + 1, 0, 0};
  const auto child = build_evaluator(n.child, src);
  reduce_params<Index> p{};
  p.k_count = static_cast<Index>(sp.k_count);
  p.n_count = static_cast<Index>(sp.n_count);
  p.nk = sp.nk;
  p.nr = sp.nr;
  p.n_base = target.n_base;
  // (An empty reduced dimension is never decoded; divide by 1 rather than 0.)
  auto divisor = [](std::int64_t e) { return fast_divmod<Index>(static_cast<Index>(e > 0 ? e : 1)); };
  for (int j = 0; j < sp.nk; ++j) p.div[j] = divisor(s[sp.kdim[j]]);
  for (int j = 0; j < sp.nr; ++j) p.div[sp.nk + j] = divisor(s[sp.rdim[j]]);
  const std::int64_t resident = std::int64_t{dev.sm_count} * dev.max_threads_per_sm;
  if (target.partials == nullptr &&
      launch_reduce_2d<Index>(n, s, sp, reordered, inner_reduced, resident, out, dr))
    return;
  std::int64_t splits = 1;
  if (inner_reduced) {
    const std::int64_t want = (2 * resident / 256 + sp.k_count - 1) / sp.k_count;
    const std::int64_t most = (sp.n_count + 2047) / 2048;
    splits = want < most ? want : most;
  } else {
    const std::int64_t want = (2 * resident + sp.k_count - 1) / sp.k_count;
    const std::int64_t most = sp.n_count / 16;
    splits = want < most ? want : most;
  }
  if (splits < 1) splits = 1;
  p.splits = static_cast<Index>(splits);
  Acc* partials = static_cast<Acc*>(target.partials);
  if (partials != nullptr) {
    *target.used = splits;
  } else if (splits > 1) {
    dr.storage.emplace_back(static_cast<std::size_t>(splits * sp.k_count) * sizeof(Acc), dr.stream);
    partials = reinterpret_cast<Acc*>(dr.storage.back().data());
  }
  if (inner_reduced) {
    const std::int64_t ky = sp.k_count < 65535 ? sp.k_count : 65535;
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(ky),
                    static_cast<unsigned>((sp.k_count + ky - 1) / ky));
    launch_kernel("reduce_block_kernel", &reduce_block_kernel<Index, Op, decltype(child), Acc, R>, grid, dim3(256), 0,
                  dr.stream, dev, p, n.op, child, partials, out);
  } else {
    std::int64_t blocks = (sp.k_count * splits + 255) / 256;
    const std::int64_t cap = std::int64_t{dev.sm_count} * 64;
    if (blocks > cap) blocks = cap;
    launch_kernel("reduce_thread_kernel", &reduce_thread_kernel<Index, Op, decltype(child), Acc, R>,
                  dim3(static_cast<unsigned>(blocks)), dim3(256), 0, dr.stream, dev, p, n.op, child, partials, out);
  }
  if (target.partials == nullptr && splits > 1) {
    const std::int64_t kx = sp.k_count < 65535 ? sp.k_count : 65535;
    const dim3 grid(static_cast<unsigned>(kx), static_cast<unsigned>((sp.k_count + kx - 1) / kx));
    launch_kernel("reduce_finish_kernel", &reduce_finish_kernel<Index, Op, T, Acc, R>, grid,
                  dim3(inner_reduced ? 256 : 32), 0, dr.stream, dev, static_cast<Index>(sp.k_count),
                  static_cast<Index>(splits), sp.n_count, inner_reduced, n.op, static_cast<const Acc*>(partials),
                  static_cast<const Acc*>(nullptr), static_cast<Acc*>(nullptr), out);
  }
}

// A reduction whose element count or operand offsets reach 2^31: launches over pieces that each
// fit 32-bit indices (plan/reduce_pieces.hpp), instead of 64-bit twins of every kernel.
template <class Op, class C, std::size_t N>
void launch_reduce_in_pieces(const reduce_node<Op, C>& n, const shape_t& s, const reduce_split& sp,
                             const std::array<operand_layout, N>& ops, bool inner_reduced,
                             compute_t<typename reduce_node<Op, C>::value_type>* out, device_reducer& dr) {
  using T = typename C::value_type;
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  using Acc = typename Op::template acc<T>;
  const auto pos = to_positions(ops, sp);
  std::int64_t ext[max_rank] = {};
  for (int j = 0; j < sp.nk; ++j) ext[j] = s[sp.kdim[j]];
  for (int j = 0; j < sp.nr; ++j) ext[sp.nk + j] = s[sp.rdim[j]];
  // Where the reduced elements are cut, a kept box keeps an accumulator per output: at most 2^24.
  const reduce_piece_plan plan =
      plan_reduce_pieces(sp.nk, sp.nr, ext, pos.data() + 1, static_cast<int>(N) - 1, std::int64_t{1} << 24);
  if (plan.too_many()) {
    std::string strides;
    for (std::size_t i = 1; i < N; ++i) strides += (i > 1 ? ", " : "") + ops[i].strides.str();
    throw error("fusex: " + std::string(Op::name) + " over " + s.str() + " (operand strides " + strides +
                ") would need " + std::to_string(plan.pieces) + " launches of 32-bit pieces (at most " +
                std::to_string(max_reduce_pieces) +
                "): its large strides are on inner dimensions; reduce a contiguous copy instead");
  }
  // Each piece is a reduction in position space: its shape is the box, kept positions first, and
  // its operands start at the box's first element.
  const int rank = sp.nk + sp.nr;
  std::uint32_t mask = 0;
  for (int q = sp.nk; q < rank; ++q) mask |= 1u << q;
  auto launch_piece = [&](const reduce_box& kb, const reduce_box& nb, R* piece_out, const generic_target& t) {
    shape_t ps;
    for (int q = 0; q < sp.nk; ++q) ps.push_back(kb.extent[q]);
    for (int q = sp.nk; q < rank; ++q) ps.push_back(nb.extent[q]);
    auto po = pos;
    for (std::size_t i = 1; i < N; ++i) {
      std::int64_t off = 0;
      for (int q = 0; q < sp.nk; ++q) off += kb.start[q] * po[i].s[q];
      for (int q = sp.nk; q < rank; ++q) off += nb.start[q] * po[i].s[q];
      advance_operand(po[i], off);
    }
    launch_generic_reduce(n, ps, split_dims(ps, mask), po, inner_reduced, piece_out, dr, t);
  };
  if (!plan.split_reduced()) {
    for (const reduce_box& kb : plan.kept) {
      // A piece's partials are freed (stream-ordered) once its launches are enqueued, not held
      // to the end of the evaluation.
      const std::size_t held = dr.storage.size();
      launch_piece(kb, plan.reduced.front(), out + kb.first, generic_target{});
      while (dr.storage.size() > held) dr.storage.pop_back();
    }
    return;
  }
  // Per kept box, the reduced boxes in order: each leaves partials (outputs x splits, at most
  // 2 * resident + outputs as launch_generic_reduce splits), which a finishing launch folds into
  // the running accumulators; the last one finishes with the whole count.
  const device_properties& dev = current_device_info();
  std::int64_t most = 0;
  for (const reduce_box& kb : plan.kept) most = kb.count > most ? kb.count : most;
  const std::int64_t resident = std::int64_t{dev.sm_count} * dev.max_threads_per_sm;
  dr.storage.emplace_back(static_cast<std::size_t>(2 * resident + most) * sizeof(Acc), dr.stream);
  Acc* scratch = reinterpret_cast<Acc*>(dr.storage.back().data());
  dr.storage.emplace_back(static_cast<std::size_t>(most) * sizeof(Acc), dr.stream);
  Acc* running = reinterpret_cast<Acc*>(dr.storage.back().data());
  std::int64_t used = 0;
  generic_target t;
  t.partials = scratch;
  t.used = &used;
  for (const reduce_box& kb : plan.kept) {
    for (std::size_t j = 0; j < plan.reduced.size(); ++j) {
      t.n_base = plan.reduced[j].first;
      launch_piece(kb, plan.reduced[j], nullptr, t);
      const bool last = j + 1 == plan.reduced.size();
      const std::int64_t kx = kb.count < 65535 ? kb.count : 65535;
      const dim3 grid(static_cast<unsigned>(kx), static_cast<unsigned>((kb.count + kx - 1) / kx));
      launch_kernel("reduce_finish_kernel", &reduce_finish_kernel<std::uint32_t, Op, T, Acc, R>, grid,
                    dim3(inner_reduced ? 256 : 32), 0, dr.stream, dev, static_cast<std::uint32_t>(kb.count),
                    static_cast<std::uint32_t>(used), sp.n_count, inner_reduced, n.op, static_cast<const Acc*>(scratch),
                    static_cast<const Acc*>(j > 0 ? running : nullptr), last ? static_cast<Acc*>(nullptr) : running,
                    out + kb.first);
    }
  }
}

template <class Op, class C>
materialized_reduction_t<Op, C> device_reducer::operator()(const reduce_node<Op, C>& n) {
  using R = compute_t<typename reduce_node<Op, C>::value_type>;
  const shape_t s = n.child.shape();
  const reduce_split sp = split_dims(s, n.mask);
  storage.emplace_back(static_cast<std::size_t>(sp.k_count) * sizeof(R), stream);
  R* out = reinterpret_cast<R*>(storage.back().data());
  if (sp.k_count > 0) {
    std::array<operand_layout, static_cast<std::size_t>(C::leaf_count) + 1> ops{};
    leaves_in_space(n.child, s, ops, 1);
    const std::int64_t reach = index_reach(sp.k_count * (sp.n_count > 0 ? sp.n_count : 1), s.begin(), s.rank(),
                                           ops.data() + 1, static_cast<int>(ops.size()) - 1);
    const bool inner_reduced = s.rank() > 0 && (n.mask & (1u << (s.rank() - 1))) != 0;
    if (reach >= index32_limit) launch_reduce_in_pieces(n, s, sp, ops, inner_reduced, out, *this);
    else launch_generic_reduce(n, s, sp, ops, inner_reduced, out, *this, generic_target{});
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
    if (p.cached && row_static_path(L, ops.data(), static_cast<int>(N), predicted_cache_modes<Ev>::value)) {
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
