#pragma once
/// \file
/// Reduction kernels. The row kernel computes reductions over the innermost axis together with
/// the elementwise expression that consumes them (softmax, layer_norm, ...), one group of threads
/// per row, in one launch. The generic kernels reduce any set of axes of any expression (fused:
/// the operand is evaluated on the fly, never stored) into partial accumulators, and a finishing
/// kernel combines the partials in a fixed order. No floating-point atomics anywhere: results are
/// bit-identical from run to run on the same GPU.

#include <fusex/config.hpp>
#include <fusex/device/fast_divmod.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/device/evaluator.hpp>
#include <fusex/plan/reduce_plan.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace fusex::detail {

/// Parameters of the row kernel.
template <class Index>
struct row_params {
  Index rows;
  Index cols;
  int tpr;             // threads per row (a multiple of 32, at most the block)
  int rows_per_block;  // blockDim.x / tpr
  int n_slots;         // reductions per row
  bool vectorized;
  bool cached;                // cols / V <= row_cache_chunks(V) * tpr: the row is kept in registers
  bool full;                  // epilogue over whole rows (else one value per row)
  std::uint64_t cache_modes;  // cached path: each leaf's cache role, 2 bits per leaf in visit order
};

/// Parameters of the generic reduction kernels. The operand's dimensions are reordered on the host
/// so that coordinate positions [0, nk) are the kept dimensions and [nk, nk + nr) the reduced
/// ones (each group in its original order): decoding then writes only compile-time positions, and
/// the coordinates stay in registers.
template <class Index>
struct reduce_params {
  Index k_count;                     // outputs
  Index n_count;                     // reduced elements per output
  Index splits;                      // partial accumulators per output
  int nk, nr;                        // kept and reduced dimension counts
  fast_divmod<Index> div[max_rank];  // extent of each coordinate position
  std::int64_t n_base;               // a piece's first reduced element (argmin/argmax indices)
};

/// Writes the row-major decomposition of `i` over positions [lo, hi) into c.
template <class Index>
FUSEX_HD FUSEX_FORCEINLINE void decode(Index i, int lo, int hi, const fast_divmod<Index>* div, coord<Index>& c) {
  FUSEX_UNROLL
  for (int d = max_rank - 1; d >= 0; --d) {
    if (d >= lo && d < hi) {
      Index q, r;
      div[d].divmod(i, q, r);
      c.c[d] = r;
      i = q;
    }
  }
}

/// Whether the cached path exists for this kernel: vectorised, 32-bit indices (every row kernel
/// is: larger plans are launched in pieces of rows), and the leaves' vectors fit the register
/// budget (as the planner decides).
template <class Index, int V, class Expr>
inline constexpr bool row_cache_possible = V > 1 && sizeof(Index) == 4 &&
                                           row_cache_chunks(V) * V* leaf_type_bytes<Expr>::value
                                               <= row_cache_budget_bytes;

template <class L>
struct one_two_byte_type : std::false_type {};
template <class T>
struct one_two_byte_type<type_list<T>> : std::bool_constant<sizeof(T) == 2> {};
/// Blocks per SM the static row kernel's registers are capped for, where its leaves are of one
/// 2-byte type (half or bfloat16): four blocks of 256 threads (64 registers). At vector width 8
/// such rows cache 32 elements per thread (row_cache_chunks); at width 4 (a float32
/// destination) 16; a cap of six blocks (40 registers) would make layer_norm spill (ptxas,
/// sm_90). Expressions over several leaf types keep one register set per type and the
/// compiler's choice.
template <bool Static, class Expr>
inline constexpr int row_min_blocks = (Static && one_two_byte_type<leaf_types_t<Expr>>::value) ? 4 : 1;

/// Parameters of the two-dimensional reduction kernels: the operand folds to [k_count, n_count]
/// (every leaf steps through the kept dimensions as one and the reduced ones as one).
template <class Index>
struct reduce2d_params {
  Index k_count;   // outputs
  Index n_count;   // reduced elements per output
  Index splits;    // partial accumulators per output
  Index span;      // column kernel: rows per split
  int lane_shift;  // column kernel: log2 of the vector columns per block
};

#if defined(__CUDACC__)
/// Moves any trivially copyable value across a warp, 32 bits at a time: `shuffle(word)` is one
/// __shfl*_sync of a 32-bit word.
template <class T, class Shuffle>
__device__ FUSEX_FORCEINLINE T shfl_words(const T& v, const Shuffle& shuffle) {
  constexpr int words = (static_cast<int>(sizeof(T)) + 3) / 4;
  unsigned w[words] = {};
  memcpy(w, &v, sizeof(T));
  FUSEX_UNROLL
  for (int i = 0; i < words; ++i) w[i] = shuffle(w[i]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}
/// The value of the lane `mask` away (butterfly).
template <class T>
__device__ FUSEX_FORCEINLINE T shfl_xor(const T& v, int mask) {
  return shfl_words(v, [mask](unsigned x) { return __shfl_xor_sync(0xffffffffu, x, mask); });
}
/// Broadcasts lane `src`'s value to the whole warp.
template <class T>
__device__ FUSEX_FORCEINLINE T shfl_index(const T& v, int src) {
  return shfl_words(v, [src](unsigned x) { return __shfl_sync(0xffffffffu, x, src); });
}

/// Reduces `v` over each group of `tpr` consecutive threads (tpr a power of two, at most 1024);
/// every thread of the group gets the result (below 32, groups share a warp and shuffle only
/// among themselves). Fixed combination order: deterministic. All
/// threads of the block must call it. `scratch` holds one Acc per warp. (cub::BlockReduce needs
/// the block size at compile time; groups here are sized at run time.)
/// Both stages are balanced trees of shuffles: partial results of equal size meet (Welford's
/// combine skips its division then) and the dependent chain is log2(tpr) combines long.
template <class Acc, class Combine>
__device__ FUSEX_FORCEINLINE Acc group_reduce(Acc v, const Combine& combine, int tpr, Acc* scratch) {
  FUSEX_UNROLL
  for (int o = 16; o > 0; o >>= 1) {
    if (o < tpr) v = combine(v, shfl_xor(v, o));  // (tpr is uniform: every lane shuffles or none)
  }
  if (tpr <= 32) return v;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Every warp reduces its group's per-warp results: lane i holds warp i's (lanes past the
  // group's warp count only pair with each other, their values are never used).
  const int wpr = tpr / 32, first = warp & ~(wpr - 1);  // (wpr a power of two: no division)
  Acc r = scratch[first + (lane < wpr ? lane : 0)];
  for (int o = wpr / 2; o > 0; o >>= 1) r = combine(r, shfl_xor(r, o));
  return shfl_index(r, 0);
}

inline constexpr int reduce_scratch_bytes = 32 * 32;  // one accumulator (<= 32 bytes) per warp

template <class R>
using row_acc_t = typename R::op_type::template acc<typename R::input_type>;

template <class Op, class T, int W, class = void>
struct has_lift_vec : std::false_type {};
template <class Op, class T, int W>
struct has_lift_vec<Op, T, W,
                    std::void_t<decltype(std::declval<const Op&>().template lift_vec<T, W>(
                        std::declval<const compute_t<T> (&)[W]>(), std::int64_t{}))>> : std::true_type {};

/// The accumulator of W consecutive elements (indices first .. first + W - 1): the op's own
/// lift_vec where it has one (logsumexp, variance), else a pairwise tree of lifts, so no chain of
/// W dependent combines.
template <class T, int W, class Op>
__device__ FUSEX_FORCEINLINE typename Op::template acc<T> lift_vec(const Op& op, const compute_t<T> (&x)[W],
                                                                   std::int64_t first) {
  if constexpr (has_lift_vec<Op, T, W>::value) {
    return op.template lift_vec<T, W>(x, first);
  } else {
    typename Op::template acc<T> a[W];
    FUSEX_UNROLL
    for (int l = 0; l < W; ++l) a[l] = op.template lift<T>(x[l], first + l);
    FUSEX_UNROLL
    for (int w = 1; w < W; w *= 2) {
      FUSEX_UNROLL
      for (int l = 0; l + w < W; l += 2 * w) a[l] = op.template combine<T>(a[l], a[l + w]);
    }
    return a[0];
  }
}

// The accumulator of elements j * W .. j * W + W - 1 of the row alone (the cached path: each
// chunk's accumulator starts from it, with no combine against the identity).
template <int W, class Index, class R, class Acc, class Ctx>
__device__ FUSEX_FORCEINLINE void row_lift(const R& r, Acc& acc, const coord<Index, 2>& c, Index j, const Ctx& ctx) {
  using T = typename R::input_type;
  const auto v = load_scope<W>(r.child, c, ctx);
  acc = lift_vec<T, W>(r.op, v.v, static_cast<std::int64_t>(j) * W);
}
// Folds those elements into one reduction's running accumulator.
template <int W, class Index, class R, class Acc, class Ctx>
__device__ FUSEX_FORCEINLINE void row_accumulate(const R& r, Acc& acc, const coord<Index, 2>& c, Index j,
                                                 const Ctx& ctx) {
  if (r.dup) return;  // an earlier reduction computes its value (a uniform branch)
  Acc part;
  row_lift<W>(r, part, c, j, ctx);
  acc = r.op.template combine<typename R::input_type>(acc, part);
}

// Combines one reduction's accumulator over the group and publishes the result in its slot.
template <class Index, class R, class Acc>
__device__ FUSEX_FORCEINLINE void row_publish(const R& r, Acc acc, const row_params<Index>& p, bool active, int lane,
                                              std::uint64_t* slots, unsigned char* scratch) {
  using T = typename R::input_type;
  if (r.dup) return;
  auto combine = [&](const Acc& a, const Acc& b) { return r.op.template combine<T>(a, b); };
  acc = group_reduce(acc, combine, p.tpr, reinterpret_cast<Acc*>(scratch));
  if (active && lane == 0) {
    const auto out = r.op.template finish<T>(acc, static_cast<std::int64_t>(p.cols));
    std::uint64_t bits = 0;
    memcpy(&bits, &out, sizeof(out));
    slots[r.slot] = bits;
  }
}

/// One pass over the row for every reduction of one nesting level (`rs`: pointers to them): each
/// element is loaded once for all of them, so mean and variance, or max and sum of the same
/// operand, cost one read of the row.
template <int W, class Index, class... R, std::size_t... I>
__device__ FUSEX_FORCEINLINE void row_pass(const fusex::detail::tuple<const R*...>& rs, const row_params<Index>& p,
                                           Index row, bool active, int lane, row_context ctx, std::uint64_t* slots,
                                           unsigned char* scratch, std::index_sequence<I...>) {
  fusex::detail::tuple<row_acc_t<R>...> acc{
      fusex::detail::get<I>(rs)->op.template identity<typename R::input_type>()...};
  if (active) {
    for (Index j = static_cast<Index>(lane); j < p.cols / W; j += static_cast<Index>(p.tpr)) {
      coord<Index, 2> c;
      c.rank = 2;
      c.c[0] = row;
      c.c[1] = j * W;
      (row_accumulate<W>(*fusex::detail::get<I>(rs), fusex::detail::get<I>(acc), c, j, ctx), ...);
    }
  }
  (row_publish(*fusex::detail::get<I>(rs), fusex::detail::get<I>(acc), p, active, lane, slots, scratch), ...);
  __syncthreads();  // the results are visible to the whole group before the next pass reads them
}

template <int W, int L, class Index, class Expr>
__device__ FUSEX_FORCEINLINE void row_level_pass(const Expr& expr, const row_params<Index>& p, Index row, bool active,
                                                 int lane, row_context ctx, std::uint64_t* slots,
                                                 unsigned char* scratch) {
  const auto rs = gather_level<L>(expr);
  row_pass<W>(rs, p, row, active, lane, ctx, slots, scratch,
              std::make_index_sequence<fusex::detail::tuple_size<decltype(rs)>::value>{});
}

// --- the cached path: each thread's row_cache_chunks(W) vectors of the row live in registers ----

template <class Op, class T, class = void>
struct has_two_level : std::false_type {};
template <class Op, class T>
struct has_two_level<Op, T, std::void_t<decltype(std::declval<const Op&>().template pre_identity<T>())>>
    : std::true_type {};

// Loads chunk k of one reduction's operand from the cached row and hands its W values (and the
// index of the first) to f, if the chunk is in the row.
template <int W, int k, bool Lazy, class Index, class R, class Set, class Acc, class F>
__device__ FUSEX_FORCEINLINE void cached_visit(const R& r, const row_params<Index>& p, Index row, bool active, int lane,
                                               const std::uint64_t* slots, const Set& set, Acc& acc, const F& f) {
  const Index j = static_cast<Index>(lane) + static_cast<Index>(k) * static_cast<Index>(p.tpr);
  if (!active || j >= p.cols / W) return;
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = row;
  c.c[1] = j * W;
  const auto v = load_scope<W, Lazy>(r.child, c, cached_row_context<k, Set>{{slots}, &set});
  f(acc, v.v, static_cast<std::int64_t>(j) * W);
}

// A balanced tree over the chunks' accumulators (chunk counts are powers of two, so partials of
// equal size meet), in fixed order: deterministic. The result is in a[0].
template <int N, class Acc, class Combine>
__device__ FUSEX_FORCEINLINE void combine_chunks(Acc (&a)[N], const Combine& combine) {
  FUSEX_UNROLL
  for (int w = 1; w < N; w *= 2) {
    FUSEX_UNROLL
    for (int k = 0; k + w < N; k += 2 * w) a[k] = combine(a[k], a[k + w]);
  }
}

/// One reduction over the cached row. One accumulator per chunk (independent chains:
/// instruction-level parallelism), combined in chunk order, then over the group. Where the op has
/// a two-level form (logsumexp, var, std) and the row is in registers, a second sweep over the
/// registers is cheaper than the one-pass combine: the maximum first, then a plain sum of
/// exp(x - max) with no rescaling (the combine's two exps per merge are most of a softmax's
/// exps); the mean first, then a plain sum of squared deviations (no Welford merges).
template <int W, bool Lazy, class Index, class R, class Set, int... K>
__device__ FUSEX_FORCEINLINE void cached_reduce(const R& r, const row_params<Index>& p, Index row, bool active,
                                                int lane, std::uint64_t* slots, unsigned char* scratch, const Set& set,
                                                std::integer_sequence<int, K...>) {
  using T = typename R::input_type;
  using Op = typename R::op_type;
  constexpr int N = static_cast<int>(sizeof...(K));
  if (r.dup) return;  // an earlier reduction computes its value
  if constexpr (has_two_level<Op, T>::value) {
    static_assert(std::int64_t{N} * W * row_max_threads <= Op::two_level_max_count,
                  "fusex: internal: a cached row longer than the op's two-level form allows");
    using C = typename Op::template pre_acc<T>;
    C a[N];
    FUSEX_UNROLL
    for (int k = 0; k < N; ++k) a[k] = r.op.template pre_identity<T>();
    const auto pre = [&](C& acc, const compute_t<T>(&x)[W], std::int64_t) {
      acc = r.op.template pre_lift_vec<T, W>(x);
    };
    (cached_visit<W, K, Lazy>(r, p, row, active, lane, slots, set, a[K], pre), ...);
    const auto pre_combine = [&](const C& x, const C& y) { return r.op.template pre_combine<T>(x, y); };
    combine_chunks(a, pre_combine);
    const C first = r.op.template pre_finish<T>(group_reduce(a[0], pre_combine, p.tpr, reinterpret_cast<C*>(scratch)),
                                                static_cast<std::int64_t>(p.cols));
    C b[N];
    FUSEX_UNROLL
    for (int k = 0; k < N; ++k) b[k] = C(0);
    const auto post = [&](C& acc, const compute_t<T>(&x)[W], std::int64_t) {
      acc = r.op.template post_lift_vec<T, W>(x, first);
    };
    (cached_visit<W, K, Lazy>(r, p, row, active, lane, slots, set, b[K], post), ...);
    const auto add = [](const C& x, const C& y) { return x + y; };
    combine_chunks(b, add);
    const C second = group_reduce(b[0], add, p.tpr, reinterpret_cast<C*>(scratch));
    if (active && lane == 0) {
      const auto out = r.op.template finish_two_level<T>(first, second, static_cast<std::int64_t>(p.cols));
      std::uint64_t bits = 0;
      memcpy(&bits, &out, sizeof(out));
      slots[r.slot] = bits;
    }
  } else {
    using Acc = row_acc_t<R>;
    Acc a[N];
    FUSEX_UNROLL
    for (int k = 0; k < N; ++k) a[k] = r.op.template identity<T>();
    // Each chunk's accumulator starts from its own lift, with no combine against the identity.
    const auto lift = [&](Acc& acc, const compute_t<T>(&x)[W], std::int64_t first) {
      acc = lift_vec<T, W>(r.op, x, first);
    };
    (cached_visit<W, K, Lazy>(r, p, row, active, lane, slots, set, a[K], lift), ...);
    combine_chunks(a, [&](const Acc& x, const Acc& y) { return r.op.template combine<T>(x, y); });
    row_publish(r, a[0], p, active, lane, slots, scratch);
  }
}

// The reductions of one nesting level over the cached row, one after the other (their operands
// are registers, so separate sweeps cost no memory traffic).
template <int W, bool Lazy, class Index, class Set, class... R, std::size_t... I, class Chunks>
__device__ FUSEX_FORCEINLINE void cached_pass(const fusex::detail::tuple<const R*...>& rs, const row_params<Index>& p,
                                              Index row, bool active, int lane, std::uint64_t* slots,
                                              unsigned char* scratch, const Set& set, std::index_sequence<I...>,
                                              Chunks chunks) {
  (cached_reduce<W, Lazy>(*fusex::detail::get<I>(rs), p, row, active, lane, slots, scratch, set, chunks), ...);
  __syncthreads();  // the results are visible to the whole group before the next pass reads them
}

template <int W, int L, bool Lazy, class Index, class CExpr, class Set, class Chunks>
__device__ FUSEX_FORCEINLINE void cached_level_pass(const CExpr& ce, const row_params<Index>& p, Index row, bool active,
                                                    int lane, std::uint64_t* slots, unsigned char* scratch,
                                                    const Set& set, Chunks chunks) {
  const auto rs = gather_level<L>(ce);
  cached_pass<W, Lazy>(rs, p, row, active, lane, slots, scratch, set,
                 std::make_index_sequence<fusex::detail::tuple_size<decltype(rs)>::value>{}, chunks);
}

template <int W, int k, class Index, class CExpr, class Set>
__device__ FUSEX_FORCEINLINE void cached_fill(const CExpr& ce, const row_params<Index>& p, Index row, bool active,
                                              int lane, Set& set) {
  // Branch-free: a chunk outside the row (or a row past the end) loads row 0's first vector
  // instead, which the passes and the epilogue never use. Every chunk's registers are then
  // written on every path, so the conversion of half and bfloat16 to float happens once here; a
  // conditional fill left the raw values merged across paths, and each pass converted them again
  // (measured in the SASS of a bf16 softmax: a shift per element and pass).
  const Index j = static_cast<Index>(lane) + static_cast<Index>(k) * static_cast<Index>(p.tpr);
  const bool in = active && j < p.cols / W;
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = in ? row : Index{0};
  c.c[1] = in ? j * W : Index{0};
  fill_cached<k>(ce, c, set);
}

template <int W, int k, bool Lazy, class Index, class Out, class CExpr, class Set>
__device__ FUSEX_FORCEINLINE void cached_store(const Out& out, const CExpr& ce, const row_params<Index>& p, Index row,
                                               int lane, const std::uint64_t* slots, const Set& set) {
  const Index j = static_cast<Index>(lane) + static_cast<Index>(k) * static_cast<Index>(p.tpr);
  if (j >= p.cols / W) return;
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = row;
  c.c[1] = j * W;
  out.template store<W>(c, load_scope<W, Lazy>(ce, c, cached_row_context<k, Set>{{slots}, &set}));
}

/// The cached row: each leaf type's owner operand is loaded once (all loads in flight together),
/// each nesting level of reductions is one pass over registers, and the epilogue stores from them.
/// `modes`: the leaves' roles (a compile-time constant after inlining on the static path, where
/// Dense also says that no leaf broadcasts along the row and that the shared values take their
/// lazy form: share_table::lazy_ok held at launch).
template <int W, bool Dense, class Index, class Out, class Expr, int... L, int... K>
__device__ FUSEX_FORCEINLINE void cached_row(const Expr& expr, const Out& out, const row_params<Index>& p,
                                             std::uint64_t modes, Index row, bool active, int lane,
                                             std::uint64_t* slots, unsigned char* scratch,
                                             std::integer_sequence<int, L...>,
                                             std::integer_sequence<int, K...> chunks) {
  const auto ce = make_cached<W, sizeof...(K), Dense, Index>(expr, modes);
  row_cache_set<W, sizeof...(K), leaf_types_t<Expr>> set;
  (cached_fill<W, K>(ce, p, row, active, lane, set), ...);
  (cached_level_pass<W, L, Dense>(ce, p, row, active, lane, slots, scratch, set, chunks), ...);
  if (!active) return;
  if (p.full) {
    (cached_store<W, K, Dense>(out, ce, p, row, lane, slots, set), ...);
  } else if (lane == 0) {
    coord<Index, 2> c;
    c.rank = 2;
    c.c[0] = row;
    c.c[1] = 0;
    out.template store<1>(c, load_scope<1>(expr, c, row_context{slots}));
  }
}

/// The passes of the row kernel: one per nesting level of reductions, innermost first.
template <int W, class Index, class Expr, int... L>
__device__ FUSEX_FORCEINLINE void row_passes(const Expr& expr, const row_params<Index>& p, Index row, bool active,
                                             int lane, row_context ctx, std::uint64_t* slots, unsigned char* scratch,
                                             std::integer_sequence<int, L...>) {
  (row_level_pass<W, L>(expr, p, row, active, lane, ctx, slots, scratch), ...);
}
template <int W, class Index, class Out, class Expr>
__device__ FUSEX_FORCEINLINE void row_epilogue(const row_params<Index>& p, const Out& out, const Expr& expr, Index row,
                                               int lane, row_context ctx) {
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = row;
  if (p.full) {
    for (Index j = static_cast<Index>(lane); j < p.cols / W; j += static_cast<Index>(p.tpr)) {
      c.c[1] = j * W;
      out.template store<W>(c, load_scope<W>(expr, c, ctx));
    }
  } else if (lane == 0) {
    c.c[1] = 0;
    out.template store<1>(c, load_scope<1>(expr, c, ctx));
  }
}

/// One group of p.tpr threads per row: a pass over the row per nesting level of reductions
/// (innermost first, so a reduction may use those inside it), then the epilogue over the row (or
/// one value per row).
/// `Static`: the kernel of the static path (row_static_path), the cached row alone with
/// the leaves' roles and unit strides as compile-time facts. A kernel of its own, not a branch of
/// the other: registers are allocated per kernel, and the generic paths need more.
template <class Index, int V, bool Static, class Out, class Expr>
__global__ void __launch_bounds__(row_max_threads, row_min_blocks<Static, Expr>)
    row_kernel(const row_params<Index> p, const Out out, const Expr expr) {
  pdl_begin();
  __shared__ alignas(16) unsigned char scratch[reduce_scratch_bytes];
  extern __shared__ std::uint64_t row_slots[];
  const int group = static_cast<int>(threadIdx.x) / p.tpr;
  const int lane = static_cast<int>(threadIdx.x) % p.tpr;
  std::uint64_t* slots = row_slots + group * p.n_slots;
  using levels = std::make_integer_sequence<int, reduction_depth<Expr>::value>;
  using chunks = std::make_integer_sequence<int, row_cache_chunks(V)>;
  for (Index row0 = static_cast<Index>(blockIdx.x) * p.rows_per_block; row0 < p.rows;
       row0 += static_cast<Index>(gridDim.x) * p.rows_per_block) {
    const Index row = row0 + static_cast<Index>(group);
    const bool active = row < p.rows;
    if constexpr (Static) {
      static_assert(row_cache_possible<Index, V, Expr>, "fusex: internal: a static row kernel without a cached path");
      cached_row<V, true>(expr, out, p, predicted_cache_modes<Expr>::value, row, active, lane, slots, scratch, levels{},
                          chunks{});
      __syncthreads();
      continue;
    } else {
      const row_context ctx{slots};
      if constexpr (row_cache_possible<Index, V, Expr>) {
        if (p.cached) {
          cached_row<V, false>(expr, out, p, p.cache_modes, row, active, lane, slots, scratch, levels{}, chunks{});
          __syncthreads();
          continue;
        }
      }
      if constexpr (V > 1) {
        if (p.vectorized) {
          row_passes<V>(expr, p, row, active, lane, ctx, slots, scratch, levels{});
          if (active) row_epilogue<V>(p, out, expr, row, lane, ctx);
          __syncthreads();
          continue;
        }
      }
      row_passes<1>(expr, p, row, active, lane, ctx, slots, scratch, levels{});
      if (active) row_epilogue<1>(p, out, expr, row, lane, ctx);
      __syncthreads();  // slots are reused by the next row
    }
  }
}

/// Generic partial reduction, one thread per (output, split): used when the innermost operand
/// dimension is kept, so neighbouring threads read neighbouring elements.
template <class Index, class Op, class Child, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_thread_kernel(const reduce_params<Index> p, const Op op, const Child child, Acc* partials, OutT* out) {
  pdl_begin();
  using T = typename Child::value_type;
  const Index total = p.k_count * p.splits;
  for (Index t = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index k = t % p.k_count, s = t / p.k_count;
    coord<Index> c;
    c.rank = p.nk + p.nr;
    FUSEX_UNROLL
    for (int d = 0; d < max_rank; ++d) c.c[d] = 0;
    decode(k, 0, p.nk, p.div, c);
    Acc acc = op.template identity<T>();
    for (Index n = s; n < p.n_count; n += p.splits) {
      decode(n, p.nk, p.nk + p.nr, p.div, c);
      acc = op.template combine<T>(
          acc, op.template lift<T>(load_scope<1>(child, c, no_context{}).v[0], static_cast<std::int64_t>(n) + p.n_base));
    }
    if (partials == nullptr) out[k] = convert<OutT>(op.template finish<T>(acc, static_cast<std::int64_t>(p.n_count)));
    else partials[s * p.k_count + k] = acc;
  }
}

/// Generic partial reduction, one block per (output, split) with threads along the reduced
/// elements: used when the innermost operand dimension is reduced (full reductions included).
template <class Index, class Op, class Child, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_block_kernel(const reduce_params<Index> p, const Op op, const Child child, Acc* partials, OutT* out) {
  pdl_begin();
  using T = typename Child::value_type;
  __shared__ alignas(16) unsigned char scratch[reduce_scratch_bytes];
  auto combine = [&](const Acc& a, const Acc& b) { return op.template combine<T>(a, b); };
  const Index k = static_cast<Index>(blockIdx.y) + static_cast<Index>(blockIdx.z) * gridDim.y;
  if (k >= p.k_count) return;  // uniform per block
  const Index s = blockIdx.x;
  coord<Index> c;
  c.rank = p.nk + p.nr;
  FUSEX_UNROLL
  for (int d = 0; d < max_rank; ++d) c.c[d] = 0;
  decode(k, 0, p.nk, p.div, c);
  // Four independent accumulators keep four loads in flight per thread; combined in fixed order.
  constexpr int U = 4;
  Acc acc[U];
  FUSEX_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = op.template identity<T>();
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  Index n = s * blockDim.x + threadIdx.x;
  for (; n + (U - 1) * step < p.n_count; n += U * step) {
    typename Child::compute_type v[U];
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u) {
      coord<Index> cu = c;
      decode(n + static_cast<Index>(u) * step, p.nk, p.nk + p.nr, p.div, cu);
      v[u] = load_scope<1>(child, cu, no_context{}).v[0];
    }
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u)
      acc[u] = combine(acc[u], op.template lift<T>(v[u], static_cast<std::int64_t>(n + static_cast<Index>(u) * step) +
                                                              p.n_base));
  }
  for (; n < p.n_count; n += step) {
    decode(n, p.nk, p.nk + p.nr, p.div, c);
    acc[0] = combine(acc[0], op.template lift<T>(load_scope<1>(child, c, no_context{}).v[0],
                                                 static_cast<std::int64_t>(n) + p.n_base));
  }
  Acc a = acc[0];
  FUSEX_UNROLL
  for (int u = 1; u < U; ++u) a = combine(a, acc[u]);
  a = group_reduce(a, combine, static_cast<int>(blockDim.x), reinterpret_cast<Acc*>(scratch));
  if (threadIdx.x == 0) {
    if (partials == nullptr) out[k] = convert<OutT>(op.template finish<T>(a, static_cast<std::int64_t>(p.n_count)));
    else partials[k * p.splits + s] = a;
  }
}

/// Reduction along rows of a [k_count, n_count] operand (the innermost dimension reduced, full
/// reductions included): grid (splits, k); each thread reads W-element vectors (16 bytes) with
/// four independent accumulators, so many loads are in flight and addressing is two multiply-adds.
/// The few elements past the last whole vector are read one by one.
template <class Index, int W, class Op, class Child, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_rows_kernel(const reduce2d_params<Index> p, const Op op, const Child child, Acc* partials, OutT* out) {
  pdl_begin();
  using T = typename Child::value_type;
  __shared__ alignas(16) unsigned char scratch[reduce_scratch_bytes];
  auto combine = [&](const Acc& a, const Acc& b) { return op.template combine<T>(a, b); };
  const Index k = static_cast<Index>(blockIdx.y) + static_cast<Index>(blockIdx.z) * gridDim.y;
  if (k >= p.k_count) return;  // uniform per block
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = k;
  constexpr int U = 4;
  Acc acc[U];
  FUSEX_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = op.template identity<T>();
  const Index nv = p.n_count / W;
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  const Index first = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x;
  Index j = first;
  for (; j + (U - 1) * step < nv; j += U * step) {
    vec<typename Child::compute_type, W> v[U];
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u) {
      coord<Index, 2> cu = c;
      cu.c[1] = (j + static_cast<Index>(u) * step) * W;
      v[u] = load_scope<W>(child, cu, no_context{});
    }
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u)
      acc[u] =
          combine(acc[u], lift_vec<T, W>(op, v[u].v, static_cast<std::int64_t>(j + static_cast<Index>(u) * step) * W));
  }
  for (; j < nv; j += step) {
    c.c[1] = j * W;
    acc[0] = combine(acc[0],
                     lift_vec<T, W>(op, load_scope<W>(child, c, no_context{}).v, static_cast<std::int64_t>(j) * W));
  }
  if constexpr (W > 1) {
    for (Index e = nv * W + first; e < p.n_count; e += step) {
      c.c[1] = e;
      acc[1] = combine(acc[1],
                       op.template lift<T>(load_scope<1>(child, c, no_context{}).v[0], static_cast<std::int64_t>(e)));
    }
  }
  Acc a = acc[0];
  FUSEX_UNROLL
  for (int u = 1; u < U; ++u) a = combine(a, acc[u]);
  a = group_reduce(a, combine, static_cast<int>(blockDim.x), reinterpret_cast<Acc*>(scratch));
  if (threadIdx.x == 0) {
    if (p.splits == 1) out[k] = convert<OutT>(op.template finish<T>(a, static_cast<std::int64_t>(p.n_count)));
    else partials[k * p.splits + blockIdx.x] = a;
  }
}

/// Reduction along columns of an [n_count, k_count] operand (the innermost dimension kept), grid
/// (column tiles, splits). A block is `1 << lane_shift` vector columns (up to 32: a warp reads
/// 512 contiguous bytes of a row) by 256 >> lane_shift row groups; each thread owns W neighbouring
/// outputs and reads rows g, g + groups, ... of its split's contiguous range of `span` rows, four
/// loads in flight. The block folds its row groups by a fixed tree in shared memory, so one
/// partial per split and output leaves the block (the finishing kernel reads few of them).
/// Requires k_count % W == 0.
template <class Index, int W, class Op, class Child, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_cols_kernel(const reduce2d_params<Index> p, const Op op, const Child child, Acc* partials, OutT* out) {
  pdl_begin();
  using T = typename Child::value_type;
  __shared__ alignas(16) unsigned char scratch[256 * sizeof(Acc)];
  Acc* fold = reinterpret_cast<Acc*>(scratch);
  const int lanes = 1 << p.lane_shift, groups = 256 >> p.lane_shift;
  const int tid = static_cast<int>(threadIdx.x), g = tid >> p.lane_shift;
  const Index kvi = static_cast<Index>(blockIdx.x) * static_cast<Index>(lanes) + static_cast<Index>(tid & (lanes - 1));
  const bool active = kvi < p.k_count / W;
  const Index first = static_cast<Index>(blockIdx.y) * p.span;
  const Index last = p.n_count - first < p.span ? p.n_count : first + p.span;
  Acc acc[W];
  FUSEX_UNROLL
  for (int l = 0; l < W; ++l) acc[l] = op.template identity<T>();
  if (active) {
    coord<Index, 2> c;
    c.rank = 2;
    c.c[1] = kvi * W;
    constexpr int U = 4;
    const Index step = static_cast<Index>(groups);
    Index n = first + static_cast<Index>(g);
    for (; n + (U - 1) * step < last; n += U * step) {
      vec<typename Child::compute_type, W> v[U];
      FUSEX_UNROLL
      for (int u = 0; u < U; ++u) {
        coord<Index, 2> cu = c;
        cu.c[0] = n + static_cast<Index>(u) * step;
        v[u] = load_scope<W>(child, cu, no_context{});
      }
      FUSEX_UNROLL
      for (int u = 0; u < U; ++u) {
        FUSEX_UNROLL
        for (int l = 0; l < W; ++l)
          acc[l] = op.template combine<T>(
              acc[l], op.template lift<T>(v[u].v[l], static_cast<std::int64_t>(n + static_cast<Index>(u) * step)));
      }
    }
    for (; n < last; n += step) {
      c.c[0] = n;
      const auto v = load_scope<W>(child, c, no_context{});
      FUSEX_UNROLL
      for (int l = 0; l < W; ++l)
        acc[l] = op.template combine<T>(acc[l], op.template lift<T>(v.v[l], static_cast<std::int64_t>(n)));
    }
  }
  FUSEX_UNROLL
  for (int l = 0; l < W; ++l) {
    // Each thread writes and (in group 0) reads back only its own slot between the folds.
    fold[tid] = acc[l];
    __syncthreads();
    for (int h = groups >> 1; h > 0; h >>= 1) {
      if (g < h) fold[tid] = op.template combine<T>(fold[tid], fold[tid + (h << p.lane_shift)]);
      __syncthreads();
    }
    if (g == 0 && active) {
      const Index k = kvi * W + static_cast<Index>(l);
      if (gridDim.y == 1)
        out[k] = convert<OutT>(op.template finish<T>(fold[tid], static_cast<std::int64_t>(p.n_count)));
      else partials[static_cast<Index>(blockIdx.y) * p.k_count + k] = fold[tid];
    }
  }
}

/// Combines the partials of the column kernel ([split][k] layout): a block per 32 outputs, warp
/// w folding splits w, w + 8, ... in order (a warp's reads of a split's partials are coalesced),
/// then the block folding its eight warps by a fixed tree.
template <class Index, class Op, class T, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_finish_cols_kernel(const Index k_count, const Index splits, const Index n_count, const Op op,
                              const Acc* partials, OutT* out) {
  pdl_begin();
  __shared__ alignas(16) unsigned char scratch[256 * sizeof(Acc)];
  Acc* fold = reinterpret_cast<Acc*>(scratch);
  const int tid = static_cast<int>(threadIdx.x), w = tid / 32;
  for (Index base = static_cast<Index>(blockIdx.x) * 32; base < k_count; base += static_cast<Index>(gridDim.x) * 32) {
    const Index k = base + static_cast<Index>(tid % 32);
    Acc a = op.template identity<T>();
    if (k < k_count)
      for (Index s = static_cast<Index>(w); s < splits; s += 8)
        a = op.template combine<T>(a, partials[s * k_count + k]);
    __syncthreads();  // (the previous tile's readers are done with `fold`)
    fold[tid] = a;
    __syncthreads();
    for (int h = 4; h > 0; h >>= 1) {
      if (w < h) fold[tid] = op.template combine<T>(fold[tid], fold[tid + h * 32]);
      __syncthreads();
    }
    if (w == 0 && k < k_count)
      out[k] = convert<OutT>(op.template finish<T>(fold[tid], static_cast<std::int64_t>(n_count)));
  }
}

/// Combines the partial accumulators of each output in a fixed order and stores the result.
/// `k_major`: partials laid out [k][split] (else [split][k]). Each thread keeps four loads in
/// flight (one accumulator each): a full sum's 2112 partials read one after another by each of
/// 256 threads took 4.4 us on the H200, twice as long as 528.
template <class Index, class Op, class T, class Acc, class OutT>
__global__ void __launch_bounds__(256)
    reduce_finish_kernel(const Index k_count, const Index splits, const std::int64_t n_count, const bool k_major, const Op op,
                         const Acc* partials, const Acc* prev, Acc* running, OutT* out) {
  pdl_begin();
  __shared__ alignas(16) unsigned char scratch[reduce_scratch_bytes];
  auto combine = [&](const Acc& a, const Acc& b) { return op.template combine<T>(a, b); };
  const Index k = static_cast<Index>(blockIdx.x) + static_cast<Index>(blockIdx.y) * gridDim.x;
  if (k >= k_count) return;
  auto at = [&](Index s) -> const Acc& { return partials[k_major ? k * splits + s : s * k_count + k]; };
  constexpr int U = 4;
  Acc acc[U];
  FUSEX_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = op.template identity<T>();
  const Index step = blockDim.x;
  Index s = threadIdx.x;
  for (; s + (U - 1) * step < splits; s += U * step) {
    Acc v[U];
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u) v[u] = at(s + static_cast<Index>(u) * step);
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u) acc[u] = combine(acc[u], v[u]);
  }
  for (; s < splits; s += step) acc[0] = combine(acc[0], at(s));
  Acc a = acc[0];
  FUSEX_UNROLL
  for (int u = 1; u < U; ++u) a = combine(a, acc[u]);
  a = group_reduce(a, combine, static_cast<int>(blockDim.x), reinterpret_cast<Acc*>(scratch));
  if (threadIdx.x == 0) {
    // A reduction in pieces (plan/reduce_pieces.hpp): fold in the earlier pieces' accumulator,
    // and keep it for the next piece unless this is the last.
    if (prev != nullptr) a = combine(prev[k], a);
    if (running != nullptr) running[k] = a;
    else out[k] = convert<OutT>(op.template finish<T>(a, n_count));
  }
}
#endif

}  // namespace fusex::detail
