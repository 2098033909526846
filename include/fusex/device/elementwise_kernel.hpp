#pragma once
/// \file
/// The elementwise kernel: one kernel for any expression tree and any number of destinations.
/// Work items are vectors of V elements (16-byte accesses) when the plan allows, single elements
/// otherwise; each thread computes U items before storing them so that their loads are in flight
/// together.

#include <fusex/config.hpp>
#include <fusex/detail/fast_divmod.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/expr/detail/evaluator.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cuda/std/tuple>

#include <cstddef>
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

/// The coordinates (in elements) of work item `w`.
template <int V, class Index>
FUSEX_HD FUSEX_FORCEINLINE coord<Index> work_coord(const elementwise_params<Index>& p, Index w) {
  coord<Index> c;
  c.rank = p.rank;
  const int inner = p.rank - 1;
FUSEX_UNROLL
  for (int d = max_rank - 1; d >= 1; --d) {
    if (d < p.rank) {
      Index q, r;
      p.div[d].divmod(w, q, r);
      // Vector plans count the inner dimension in vectors; compile-time d keeps c in registers.
      c.c[d] = (V > 1 && d == inner) ? r * V : r;
      w = q;
    }
  }
  c.c[0] = (V > 1 && inner == 0) ? w * V : w;
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
template <int V, int U, class Index, class Assignments, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE void process_items(const Assignments& as, const elementwise_params<Index>& p, Index first,
                                              Index step, Index limit, std::index_sequence<I...>) {
  using results = cuda::std::tuple<
      vec<typename cuda::std::tuple_element_t<I, Assignments>::expr_type::compute_type, V>...>;
  coord<Index> c[U];
  results r[U];
  bool ok[U];
  if (first + static_cast<Index>(U - 1) * step < limit) {
    // Full set (the common case): no per-item branches, so all loads can be issued together.
FUSEX_UNROLL
    for (int u = 0; u < U; ++u) {
      c[u] = work_coord<V>(p, first + static_cast<Index>(u) * step);
      r[u] = results{cuda::std::get<I>(as).expr.template load<V>(c[u], no_context{})...};
    }
FUSEX_UNROLL
    for (int u = 0; u < U; ++u) (cuda::std::get<I>(as).out.template store<V>(c[u], cuda::std::get<I>(r[u])), ...);
    return;
  }
FUSEX_UNROLL
  for (int u = 0; u < U; ++u) {
    const Index w = first + static_cast<Index>(u) * step;
    ok[u] = w < limit;
    if (ok[u]) {
      c[u] = work_coord<V>(p, w);
      r[u] = results{cuda::std::get<I>(as).expr.template load<V>(c[u], no_context{})...};
    }
  }
FUSEX_UNROLL
  for (int u = 0; u < U; ++u) {
    if (ok[u]) (cuda::std::get<I>(as).out.template store<V>(c[u], cuda::std::get<I>(r[u])), ...);
  }
}

/// Evaluates the scalar tail of a rank-1 vector plan: element `e` directly.
template <class Index, class Assignments, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE void process_element(const Assignments& as, Index e, std::index_sequence<I...>) {
  coord<Index, 2> c;  // a rank-1 plan: position 1 has stride 0 (constant indices keep c in registers)
  c.rank = 2;
  c.c[0] = e;
  c.c[1] = 0;
  (cuda::std::get<I>(as).out.template store<1>(c, cuda::std::get<I>(as).expr.template load<1>(c, no_context{})), ...);
}

inline constexpr int elementwise_block = 256;
inline constexpr int elementwise_unroll = 4;

/// Launch tuning, settable for measurements: the grid is capped at `waves` times the number of
/// blocks the GPU holds at once (0: no cap, one set of U work items per thread).
struct elementwise_tuning {
  int waves = 0;
};
inline elementwise_tuning& elementwise_tuning_state() {
  static elementwise_tuning t;
  return t;
}

#if defined(__CUDACC__)
template <class Index, int V, class Assignments>
__global__ void __launch_bounds__(elementwise_block)
    elementwise_kernel(const elementwise_params<Index> p, const Assignments as) {
  pdl_begin();
  constexpr int U = elementwise_unroll;
  using seq = std::make_index_sequence<cuda::std::tuple_size<Assignments>::value>;
  const Index block_first = static_cast<Index>(blockIdx.x) * blockDim.x * U + threadIdx.x;
  const Index chunk = static_cast<Index>(gridDim.x) * blockDim.x * U;
  if constexpr (V > 1) {
    if (p.vectorized) {
      for (Index first = block_first; first < p.work; first += chunk)
        process_items<V, U>(as, p, first, static_cast<Index>(blockDim.x), p.work, seq{});
      const Index threads = static_cast<Index>(gridDim.x) * blockDim.x;
      for (Index e = p.tail_start + static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; e < p.total; e += threads)
        process_element(as, e, seq{});
      return;
    }
  }
  for (Index first = block_first; first < p.work; first += chunk)
    process_items<1, U>(as, p, first, static_cast<Index>(blockDim.x), p.work, seq{});
}
#endif

}  // namespace fusex::detail
