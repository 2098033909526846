#pragma once
/// \file
/// The definitions behind dispatch/reduce_generic.hpp: strategy and launch geometry of the
/// generic reductions. Included by <fusex/dispatch/reduce_generic.hpp> where
/// FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in nvcc's device pass, and, under
/// FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/dispatch/reduce_generic.hpp>
#include <fusex/error.hpp>
#include <fusex/plan/reduce_pieces.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fusex::detail {

namespace reduce_generic {

// Leaf strides in coordinate-position order: kept dimensions first, then reduced ones.
inline std::vector<operand_layout> to_positions(const operand_layout* leaves, int n, const reduce_split& sp) {
  std::vector<operand_layout> pos(leaves, leaves + n);
  for (auto& o : pos) {
    std::int64_t t[max_rank] = {};
    for (int j = 0; j < sp.nk; ++j) t[j] = o.s[sp.kdim[j]];
    for (int j = 0; j < sp.nr; ++j) t[sp.nk + j] = o.s[sp.rdim[j]];
    for (int d = 0; d < max_rank; ++d) o.s[d] = t[d];
  }
  return pos;
}

// The largest y (or x) extent of a grid.
inline constexpr std::int64_t grid_yz_limit = 65535;

inline std::int64_t at_most(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// The finishing launch over `k_count` outputs of `splits` partials each (k-major: one block per
// output, else split-major: one warp per output).
inline void launch_finish(const reduce_kernels& k, const device_properties& dev, cudaStream_t stream,
                          std::int64_t k_count, std::int64_t splits, std::int64_t n_count, bool k_major,
                          void* partials, const void* prev, void* running, void* out) {
  reduce_launch l;
  l.kind = reduce_kernel_kind::finish;
  const std::int64_t kx = at_most(k_count, grid_yz_limit);
  l.grid = dim3(static_cast<unsigned>(kx), static_cast<unsigned>((k_count + kx - 1) / kx));
  l.block = dim3(k_major ? 256 : 32);
  l.stream = stream;
  l.dev = &dev;
  l.k_count = static_cast<std::uint32_t>(k_count);
  l.splits = static_cast<std::uint32_t>(splits);
  l.n_count = n_count;
  l.k_major = k_major;
  l.partials = partials;
  l.prev = prev;
  l.running = running;
  l.out = out;
  k.launch(k.node, l);
}

// A launch of a partial kernel (rows, cols, block, thread) over `leaves` with its `params`: 256
// threads; the caller sets the kind and grid.
inline reduce_launch partial_launch(const device_properties& dev, cudaStream_t stream, const operand_layout* leaves,
                                    const void* params, void* partials, void* out) {
  reduce_launch l;
  l.block = dim3(256);
  l.stream = stream;
  l.dev = &dev;
  l.leaves = leaves;
  l.params = params;
  l.partials = partials;
  l.out = out;
  return l;
}

// The grid of the kernels with a block per (split, output) (rows, block): outputs past the y
// limit continue in z.
inline dim3 split_output_grid(std::int64_t splits, std::int64_t k_count) {
  const std::int64_t ky = at_most(k_count, grid_yz_limit);
  return dim3(static_cast<unsigned>(splits), static_cast<unsigned>(ky), static_cast<unsigned>((k_count + ky - 1) / ky));
}

// The two-dimensional fast path: when every leaf folds to [kept, reduced] (or [reduced, kept])
// strides with unit stride (or broadcast) along the inner one and 16-byte alignment, the
// reduction runs with vector loads and two-term addressing. Returns false (nothing launched)
// where it does not apply.
inline bool launch_2d(const reduce_kernels& k, const shape_t& s, const reduce_split& sp,
                      const std::vector<operand_layout>& pos, bool inner_reduced, std::int64_t resident, void* out,
                      reduce_temps& t) {
  const int W = k.vector_width;
  if (W <= 1) return false;  // the generic kernels serve operands of 16-byte elements
  if (sp.n_count == 0 || sp.k_count == 0) return false;
  std::int64_t ext[max_rank] = {};
  for (int j = 0; j < sp.nk; ++j) ext[j] = s[sp.kdim[j]];
  for (int j = 0; j < sp.nr; ++j) ext[sp.nk + j] = s[sp.rdim[j]];
  std::vector<operand_layout> ops = pos;
  for (operand_layout& o : ops) {
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
  reduce2d_params<std::uint32_t> p{};
  p.k_count = static_cast<std::uint32_t>(sp.k_count);
  p.n_count = static_cast<std::uint32_t>(sp.n_count);
  std::int64_t splits = 1, tiles = 0;
  int lane_shift = 0;
  if (inner_reduced) {
    const std::int64_t want = (2 * resident / 256 + sp.k_count - 1) / sp.k_count;
    const std::int64_t most = (sp.n_count + 4095) / 4096;
    splits = at_most(want, most);
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
    const std::int64_t wave = std::int64_t{dev.sm_count} * k.cols_blocks_per_sm(dev);
    const std::int64_t want = wave / tiles;
    const std::int64_t most = sp.n_count / ((256 >> lane_shift) * 8);
    splits = at_most(at_most(want, most), 256);
  }
  if (splits < 1) splits = 1;
  if (!inner_reduced) {
    p.span = static_cast<std::uint32_t>((sp.n_count + splits - 1) / splits);
    splits = (sp.n_count + static_cast<std::int64_t>(p.span) - 1) / static_cast<std::int64_t>(p.span);  // none empty
    p.lane_shift = lane_shift;
  }
  p.splits = static_cast<std::uint32_t>(splits);
  void* partials = splits > 1 ? t.take(static_cast<std::size_t>(splits * sp.k_count) * k.acc_size) : nullptr;
  reduce_launch l = partial_launch(dev, t.stream, ops.data(), &p, partials, out);
  if (inner_reduced) {
    l.kind = reduce_kernel_kind::rows;
    l.grid = split_output_grid(splits, sp.k_count);
  } else {
    l.kind = reduce_kernel_kind::cols;
    l.grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  }
  k.launch(k.node, l);
  if (splits > 1 && inner_reduced) {
    launch_finish(k, dev, t.stream, sp.k_count, splits, sp.n_count, true, partials, nullptr, nullptr, out);
  } else if (splits > 1) {
    reduce_launch f;
    f.kind = reduce_kernel_kind::finish_cols;
    f.grid = dim3(static_cast<unsigned>(at_most((sp.k_count + 31) / 32, std::int64_t{dev.sm_count} * 64)));
    f.block = dim3(256);
    f.stream = t.stream;
    f.dev = &dev;
    f.k_count = static_cast<std::uint32_t>(sp.k_count);
    f.splits = static_cast<std::uint32_t>(splits);
    f.n_count = sp.n_count;
    f.partials = partials;
    f.out = out;
    k.launch(k.node, f);
  }
  return true;
}

// Where a generic reduction's results go: finished values at `out`, or, for a piece of a reduction
// whose reduced elements are cut (plan/reduce_pieces.hpp), partial accumulators.
struct generic_target {
  void* partials = nullptr;      // non-null: write the partials here (outputs x splits), no finish
  std::int64_t* used = nullptr;  // the splits written
  std::int64_t n_base = 0;       // the piece's first reduced element (argmin/argmax indices)
};

// One launch (or two, with a finishing one) of the generic reduction kernels, 32-bit indices: the
// caller has checked that counts and offsets fit (pieces cut larger ones). `pos`: the leaves in
// position order. `inner_reduced`: whether the operand's innermost dimension is reduced (threads
// then run along the reduced elements).
inline void launch_generic(const reduce_kernels& k, const shape_t& s, const reduce_split& sp,
                           const std::vector<operand_layout>& pos, bool inner_reduced, void* out, reduce_temps& t,
                           const generic_target& target) {
  const device_properties& dev = current_device_info();
  reduce_params<std::uint32_t> p{};
  p.k_count = static_cast<std::uint32_t>(sp.k_count);
  p.n_count = static_cast<std::uint32_t>(sp.n_count);
  p.nk = sp.nk;
  p.nr = sp.nr;
  p.n_base = target.n_base;
  // (An empty reduced dimension is never decoded; divide by 1 rather than 0.)
  auto divisor = [](std::int64_t e) {
    return fast_divmod<std::uint32_t>(static_cast<std::uint32_t>(e > 0 ? e : 1));
  };
  for (int j = 0; j < sp.nk; ++j) p.div[j] = divisor(s[sp.kdim[j]]);
  for (int j = 0; j < sp.nr; ++j) p.div[sp.nk + j] = divisor(s[sp.rdim[j]]);
  const std::int64_t resident = std::int64_t{dev.sm_count} * dev.max_threads_per_sm;
  if (target.partials == nullptr && launch_2d(k, s, sp, pos, inner_reduced, resident, out, t)) return;
  std::int64_t splits = 1;
  if (inner_reduced) {
    const std::int64_t want = (2 * resident / 256 + sp.k_count - 1) / sp.k_count;
    splits = at_most(want, (sp.n_count + 2047) / 2048);
  } else {
    const std::int64_t want = (2 * resident + sp.k_count - 1) / sp.k_count;
    splits = at_most(want, sp.n_count / 16);
  }
  if (splits < 1) splits = 1;
  p.splits = static_cast<std::uint32_t>(splits);
  void* partials = target.partials;
  if (partials != nullptr) {
    *target.used = splits;
  } else if (splits > 1) {
    partials = t.take(static_cast<std::size_t>(splits * sp.k_count) * k.acc_size);
  }
  reduce_launch l = partial_launch(dev, t.stream, pos.data(), &p, partials, out);
  if (inner_reduced) {
    l.kind = reduce_kernel_kind::block;
    l.grid = split_output_grid(splits, sp.k_count);
  } else {
    l.kind = reduce_kernel_kind::thread;
    l.grid = dim3(static_cast<unsigned>(at_most((sp.k_count * splits + 255) / 256, std::int64_t{dev.sm_count} * 64)));
  }
  k.launch(k.node, l);
  if (target.partials == nullptr && splits > 1)
    launch_finish(k, dev, t.stream, sp.k_count, splits, sp.n_count, inner_reduced, partials, nullptr, nullptr, out);
}

// A reduction whose element count or operand offsets reach 2^31: launches over pieces that each
// fit 32-bit indices (plan/reduce_pieces.hpp), instead of 64-bit twins of every kernel.
inline void launch_in_pieces(const reduce_kernels& k, const shape_t& s, const reduce_split& sp,
                             const std::vector<operand_layout>& pos, bool inner_reduced, void* out, reduce_temps& t) {
  const int n_leaves = static_cast<int>(pos.size());
  std::int64_t ext[max_rank] = {};
  for (int j = 0; j < sp.nk; ++j) ext[j] = s[sp.kdim[j]];
  for (int j = 0; j < sp.nr; ++j) ext[sp.nk + j] = s[sp.rdim[j]];
  // Where the reduced elements are cut, a kept box keeps an accumulator per output: at most 2^24.
  const reduce_piece_plan plan = plan_reduce_pieces(sp.nk, sp.nr, ext, pos.data(), n_leaves, std::int64_t{1} << 24);
  if (plan.too_many()) {
    std::string strides;
    for (int i = 0; i < n_leaves; ++i) strides += (i > 0 ? ", " : "") + pos[static_cast<std::size_t>(i)].strides.str();
    throw error("fusex: " + std::string(k.name) + " over " + s.str() + " (operand strides " + strides +
                ") would need " + std::to_string(plan.pieces) + " launches of 32-bit pieces (at most " +
                std::to_string(max_reduce_pieces) +
                "): its large strides are on inner dimensions; reduce a contiguous copy instead");
  }
  // Each piece is a reduction in position space: its shape is the box, kept positions first, and
  // its operands start at the box's first element.
  const int rank = sp.nk + sp.nr;
  std::uint32_t mask = 0;
  for (int q = sp.nk; q < rank; ++q) mask |= 1u << q;
  char* const out_bytes = static_cast<char*>(out);
  auto launch_piece = [&](const reduce_box& kb, const reduce_box& nb, void* piece_out, const generic_target& tg) {
    shape_t ps;
    for (int q = 0; q < sp.nk; ++q) ps.push_back(kb.extent[q]);
    for (int q = sp.nk; q < rank; ++q) ps.push_back(nb.extent[q]);
    std::vector<operand_layout> po = pos;
    for (operand_layout& o : po) {
      std::int64_t off = 0;
      for (int q = 0; q < sp.nk; ++q) off += kb.start[q] * o.s[q];
      for (int q = sp.nk; q < rank; ++q) off += nb.start[q] * o.s[q];
      advance_operand(o, off);
    }
    // (Already in position order, kept positions first: the piece's split is the identity.)
    launch_generic(k, ps, split_dims(ps, mask), po, inner_reduced, piece_out, t, tg);
  };
  if (!plan.split_reduced()) {
    for (const reduce_box& kb : plan.kept) {
      // A piece's partials are freed (stream-ordered) once its launches are enqueued, not held
      // to the end of the evaluation.
      const std::size_t held = t.storage.size();
      launch_piece(kb, plan.reduced.front(), out_bytes + kb.first * static_cast<std::int64_t>(k.result_size),
                   generic_target{});
      while (t.storage.size() > held) t.storage.pop_back();
    }
    return;
  }
  // Per kept box, the reduced boxes in order: each leaves partials (outputs x splits, at most
  // 2 * resident + outputs as launch_generic splits), which a finishing launch folds into the
  // running accumulators; the last one finishes with the whole count.
  const device_properties& dev = current_device_info();
  std::int64_t most = 0;
  for (const reduce_box& kb : plan.kept) most = kb.count > most ? kb.count : most;
  const std::int64_t resident = std::int64_t{dev.sm_count} * dev.max_threads_per_sm;
  void* scratch = t.take(static_cast<std::size_t>(2 * resident + most) * k.acc_size);
  void* running = t.take(static_cast<std::size_t>(most) * k.acc_size);
  std::int64_t used = 0;
  generic_target tg;
  tg.partials = scratch;
  tg.used = &used;
  for (const reduce_box& kb : plan.kept) {
    for (std::size_t j = 0; j < plan.reduced.size(); ++j) {
      tg.n_base = plan.reduced[j].first;
      launch_piece(kb, plan.reduced[j], nullptr, tg);
      const bool last = j + 1 == plan.reduced.size();
      launch_finish(k, dev, t.stream, kb.count, used, sp.n_count, inner_reduced, scratch, j > 0 ? running : nullptr,
                    last ? nullptr : running, out_bytes + kb.first * static_cast<std::int64_t>(k.result_size));
    }
  }
}

}  // namespace reduce_generic

FUSEX_DECL void run_generic_reduction(const reduce_kernels& k, const shape_t& s, std::uint32_t mask,
                                      const operand_layout* leaves, int n_leaves, void* out, reduce_temps& t) {
  const reduce_split sp = split_dims(s, mask);
  if (sp.k_count == 0) return;
  const std::int64_t reach = index_reach(sp.k_count * (sp.n_count > 0 ? sp.n_count : 1), s.begin(), s.rank(),
                                         leaves, n_leaves);
  const bool inner_reduced = s.rank() > 0 && (mask & (1u << (s.rank() - 1))) != 0;
  const std::vector<operand_layout> pos = reduce_generic::to_positions(leaves, n_leaves, sp);
  if (reach >= index32_limit) reduce_generic::launch_in_pieces(k, s, sp, pos, inner_reduced, out, t);
  else reduce_generic::launch_generic(k, s, sp, pos, inner_reduced, out, t, reduce_generic::generic_target{});
}

}  // namespace fusex::detail
