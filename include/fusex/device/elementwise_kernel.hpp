#pragma once
/// \file
/// The elementwise kernel: one kernel for any expression tree and any number of destinations.
/// Work items are vectors of V elements (16-byte accesses) when the plan allows, single elements
/// otherwise; each thread computes U items before storing them so that their loads are in flight
/// together.

#include <fusex/config.hpp>
#include <fusex/device/fast_divmod.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/device/evaluator.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <fusex/core/detail/tuple.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace fusex::detail {

/// Kernel parameters derived from an elementwise_layout.
template <class Index>
struct elementwise_params {
  Index work;        // work items (vectors or elements)
  Index total;       // elements
  Index tail_start;  // first element of the scalar tail (vector path, rank 1)
  int rank;
  bool vectorized;
  fast_divmod<Index> div[max_rank];  // divisors of dimensions 1..rank-1, in work-item units
};

template <class Index>
elementwise_params<Index> make_elementwise_params(const elementwise_layout& L) {
  elementwise_params<Index> p{};
  p.work = static_cast<Index>(L.work);
  p.total = static_cast<Index>(L.numel);
  p.tail_start = static_cast<Index>(L.tail_start);
  p.rank = L.rank;
  p.vectorized = L.vector_width > 1;
  for (int d = 0; d < L.rank; ++d) {
    std::int64_t e = L.extent[d];
    if (d == L.rank - 1) e /= L.vector_width;
    p.div[d] = fast_divmod<Index>(static_cast<Index>(e));
  }
  return p;
}

/// The coordinates (in elements) of work item `w`, for kernels handling R dimensions (R ==
/// max_rank: any rank; smaller: exactly R, with rank-1 plans padded to rank 2 by the launcher).
template <int V, int R, class Index>
FUSEX_HD FUSEX_FORCEINLINE coord<Index, R> work_coord(const elementwise_params<Index>& p, Index w) {
  coord<Index, R> c;
  c.rank = p.rank;
  FUSEX_UNROLL
  for (int d = R - 1; d >= 1; --d) {
    if (R < max_rank || d < p.rank) {
      Index q, r;
      p.div[d].divmod(w, q, r);
      c.c[d] = r;
      w = q;
    }
  }
  c.c[0] = w;
  if constexpr (V > 1) c.c[c.last()] *= V;
  return c;
}

/// One destination and the expression evaluated into it.
template <class Out, class Expr>
struct assignment {
  using out_type = Out;
  using expr_type = Expr;
  Out out;
  Expr expr;
};

/// Computes work items first, first+step, ... (U of them, those below `limit`) and stores them.
/// `Lazy`: the expressions' shared values in their lazy form (memo_context).
template <int V, int U, int R, bool Lazy = false, class Index, class Assignments, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE void process_items(const Assignments& as, const elementwise_params<Index>& p, Index first,
                                              Index step, Index limit, std::index_sequence<I...>) {
  using results =
      fusex::detail::tuple<vec<typename fusex::detail::tuple_element_t<I, Assignments>::expr_type::compute_type, V>...>;
  if (first + static_cast<Index>(U - 1) * step < limit) {
    // Full set (the common case): no per-item branches, so all loads can be issued together.
    coord<Index, R> c[U];
    results r[U];
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u) {
      c[u] = work_coord<V, R>(p, first + static_cast<Index>(u) * step);
      r[u] = results{load_scope<V, Lazy>(fusex::detail::get<I>(as).expr, c[u], no_context{})...};
    }
    FUSEX_UNROLL
    for (int u = 0; u < U; ++u)
      (fusex::detail::get<I>(as).out.template store<V>(c[u], fusex::detail::get<I>(r[u])), ...);
    return;
  }
  // A partial set (only the grid's last threads have one): item by item, in a loop kept rolled,
  // so the kernel holds one more copy of the expression here instead of U predicated ones (less
  // code for nvcc to compile; the few items it serves do not need their loads in flight together).
  FUSEX_NO_UNROLL
  for (int u = 0; u < U; ++u) {
    const Index w = first + static_cast<Index>(u) * step;
    if (w >= limit) return;
    const coord<Index, R> cw = work_coord<V, R>(p, w);
    const results rw{load_scope<V, Lazy>(fusex::detail::get<I>(as).expr, cw, no_context{})...};
    (fusex::detail::get<I>(as).out.template store<V>(cw, fusex::detail::get<I>(rw)), ...);
  }
}

/// Evaluates the scalar tail of a one-dimensional vector plan (padded to [1, n]): element `e`
/// directly, with two-dimension coordinates.
template <bool Lazy, class Index, class Assignments, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE void process_element(const Assignments& as, Index e, std::index_sequence<I...>) {
  coord<Index, 2> c;
  c.rank = 2;
  c.c[0] = 0;
  c.c[1] = e;
  (fusex::detail::get<I>(as).out.template store<1>(c, load_scope<1, Lazy>(fusex::detail::get<I>(as).expr, c, no_context{})),
   ...);
}

inline constexpr int elementwise_block = 256;
inline constexpr int elementwise_unroll = 4;
/// The most work items per thread and step on the general path (plans of more than two
/// dimensions), whose index arithmetic is per dimension: each item there is about 2.4 times the
/// code of an item of the two-dimension path, and that path was 70% of an elementwise test TU's PTX
/// with 4 (docs/performance.md, "Compile time"). The grid is sized with it (for the unroll of the
/// plain kernel: below 4 the random kernel, 2 per step, would no longer be sized as for 4).
inline constexpr int elementwise_general_unroll = 4;
template <int U>
inline constexpr int general_unroll_of = U < elementwise_general_unroll ? U : elementwise_general_unroll;
/// The elementwise kernel of an expression with random numbers (elementwise_random_kernel) is
/// compiled for 4 resident blocks per SM (__launch_bounds__' second argument: at most 64 registers)
/// and takes 2 work items per thread and step instead of 4; its grid is sized as for 4 (each thread
/// takes two steps: the configuration measured). Philox's ten rounds per four lanes had left dropout
/// at 117-142 registers, two blocks per SM: ncu on an H100 found it latency-bound (DRAM 60% busy in
/// float32, 47% in bf16; issue slots 30-45%), not short of arithmetic. A/B on the H100, [16384,
/// 4096], fraction of a copy's bytes/s: float32 0.69 -> 0.89, bf16 0.36 -> 0.78 (docs/performance.md;
/// 4 items per step: bf16 0.69; 3 blocks: float32 0.84). Other kernels are not capped; only the
/// elementwise kernel of such expressions is (row, reduction and GEMM-epilogue kernels are not).
inline constexpr int elementwise_random_min_blocks = 4;
inline constexpr int elementwise_random_unroll = 2;

template <class Op, class = void>
struct is_random_op : std::false_type {};
template <class Op>
struct is_random_op<Op, std::void_t<decltype(Op::counter_based_random)>> : std::true_type {};
template <class N, class... K>
struct has_random_f : std::bool_constant<(false || ... || K::value)> {};
template <class Op, class... C, class... K>
struct has_random_f<map_eval<Op, C...>, K...> : std::bool_constant<(is_random_op<Op>::value || ... || K::value)> {};
/// Whether a kernel's assignments draw random numbers (they then take elementwise_random_kernel).
template <class Assignments>
struct assignments_random;
template <class... A>
struct assignments_random<fusex::detail::tuple<A...>>
    : std::bool_constant<(fold_type_t<typename A::expr_type, has_random_f>::value || ...)> {};
template <class Assignments>
inline constexpr bool has_random_v = assignments_random<Assignments>::value;

/// Launch tuning, settable for measurements: the grid is capped at `waves` times the number of
/// blocks the GPU holds at once (0: no cap, one set of U work items per thread; the count assumes
/// 2048 / 256 blocks per SM, twice what the register-capped random kernel is built for).
struct elementwise_tuning {
  int waves = 0;
  /// Small problems (fewer full blocks than SMs) get smaller blocks, down to one warp, so they
  /// spread over more SMs: a kernel of a few thousand elements is latency-bound, and 4 blocks of
  /// 256 threads issue each SM's share one warp after another where 32 one-warp blocks do it in
  /// parallel. Same kernel, only the launch shape changes.
  bool spread_small = true;
};
inline elementwise_tuning& elementwise_tuning_state() {
  static elementwise_tuning t;
  return t;
}

#if defined(__CUDACC__)
template <int R, int V, bool Lazy, int U, class Index, class Assignments>
__device__ FUSEX_FORCEINLINE void elementwise_body(const elementwise_params<Index>& p, const Assignments& as) {
  using seq = std::make_index_sequence<fusex::detail::tuple_size<Assignments>::value>;
  const Index block_first = static_cast<Index>(blockIdx.x) * blockDim.x * U + threadIdx.x;
  const Index chunk = static_cast<Index>(gridDim.x) * blockDim.x * U;
  if constexpr (V > 1) {
    if (p.vectorized) {
      for (Index first = block_first; first < p.work; first += chunk)
        process_items<V, U, R, Lazy>(as, p, first, static_cast<Index>(blockDim.x), p.work, seq{});
      // Only one-dimensional plans have a tail (a vector plan of more dimensions has whole vectors
      // in its innermost one), and the launcher pads them to two.
      if constexpr (R == 2 || sizeof(Index) == 8) {  // (no 64-bit kernel is launched today)
        const Index threads = static_cast<Index>(gridDim.x) * blockDim.x;
        for (Index e = p.tail_start + static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < p.total;
             e += threads)
          process_element<Lazy>(as, e, seq{});
      }
      return;
    }
  }
  for (Index first = block_first; first < p.work; first += chunk)
    process_items<1, U, R, Lazy>(as, p, first, static_cast<Index>(blockDim.x), p.work, seq{});
}

/// 32-bit plans of rank 1 or 2 (padded to 2) take a path with exactly two dimensions: no
/// per-dimension tests in the index arithmetic. Everything else takes the general path. `Lazy`:
/// shared values resolved at compile time (instantiated only for expressions that have them).
template <class Index, int V, bool Lazy, int U, class Assignments>
__device__ FUSEX_FORCEINLINE void elementwise_entry(const elementwise_params<Index>& p, const Assignments& as) {
  pdl_begin();
  if constexpr (sizeof(Index) == 4) {
    if (p.rank == 2) {
      elementwise_body<2, V, Lazy, U>(p, as);
      return;
    }
  }
  elementwise_body<max_rank, V, Lazy, general_unroll_of<U>>(p, as);
}
template <class Index, int V, class Assignments, bool Lazy = false>
__global__ void __launch_bounds__(elementwise_block)
    elementwise_kernel(const elementwise_params<Index> p, const Assignments as) {
  elementwise_entry<Index, V, Lazy, elementwise_unroll>(p, as);
}
/// The same for expressions with random numbers: register-capped, two work items per step
/// (elementwise_random_min_blocks).
template <class Index, int V, class Assignments, bool Lazy = false>
__global__ void __launch_bounds__(elementwise_block, elementwise_random_min_blocks)
    elementwise_random_kernel(const elementwise_params<Index> p, const Assignments as) {
  elementwise_entry<Index, V, Lazy, elementwise_random_unroll>(p, as);
}
/// The kernel for Assignments: only one of the two is instantiated per expression.
template <class Index, int V, class Assignments, bool Lazy = false>
constexpr auto elementwise_kernel_for() {
  if constexpr (has_random_v<Assignments>) {
    return &elementwise_random_kernel<Index, V, Assignments, Lazy>;
  } else {
    return &elementwise_kernel<Index, V, Assignments, Lazy>;
  }
}
#endif

}  // namespace fusex::detail
