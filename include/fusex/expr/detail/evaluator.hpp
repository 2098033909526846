#pragma once
/// \file
/// Evaluators: the trivially copyable, device-side form of an expression that a kernel (or the
/// host backend) calls per element or per vector of V elements. The planner builds them from
/// expression nodes, giving each leaf its strides in the kernel's (collapsed) index space.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cuda/std/tuple>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace fusex::detail {

/// V values of type T in registers.
template <class T, int V>
struct vec {
  T v[V];
};

/// V values of type T as one aligned memory access.
template <class T, int V>
struct alignas(sizeof(T) * V) aligned_vec {
  T v[V];
};

/// Coordinates of one work item in the kernel's index space (rank <= max_rank).
template <class Index>
struct coord {
  Index c[max_rank];
  int rank;

  FUSEX_HD FUSEX_FORCEINLINE Index offset(const Index* stride) const {
    Index off = 0;
FUSEX_UNROLL
    for (int d = 0; d < max_rank; ++d)
      if (d < rank) off += c[d] * stride[d];
    return off;
  }
};

template <class T, class Index>
struct leaf_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  const T* p;
  Index stride[max_rank];

  template <int V>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index>& c) const {
    const Index off = c.offset(stride);
    vec<compute_type, V> r;
    if constexpr (V == 1) {
      r.v[0] = convert<compute_type>(p[off]);
    } else if (stride[c.rank - 1] == 0) {  // broadcast along the vectorised dimension
      const compute_type x = convert<compute_type>(p[off]);
FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = x;
    } else {  // the planner guarantees unit stride and alignment here
      const aligned_vec<T, V> raw = *reinterpret_cast<const aligned_vec<T, V>*>(p + off);
FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = convert<compute_type>(raw.v[l]);
    }
    return r;
  }
};

template <class T>
struct scalar_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  compute_type value;

  template <int V, class Index>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index>&) const {
    vec<compute_type, V> r;
FUSEX_UNROLL
    for (int l = 0; l < V; ++l) r.v[l] = value;
    return r;
  }
};

template <class Op, class... Children>
struct map_eval {
  using value_type = typename Op::template result<typename Children::value_type...>;
  using compute_type = compute_t<value_type>;
  Op op;
  cuda::std::tuple<Children...> children;

  template <int V, class Index>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index>& c) const {
    return apply<V>(c, std::index_sequence_for<Children...>{});
  }

 private:
  template <std::size_t I>
  using operand_t = typename Op::template operand<I, typename Children::value_type...>;

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <int V, class Index, std::size_t... I>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> apply(const coord<Index>& c, std::index_sequence<I...>) const {
    const cuda::std::tuple<decltype(cuda::std::get<I>(children).template load<V>(c))...> in{
        cuda::std::get<I>(children).template load<V>(c)...};
    vec<compute_type, V> r;
FUSEX_UNROLL
    for (int l = 0; l < V; ++l)
      r.v[l] = convert<compute_type>(op(convert<operand_t<I>>(cuda::std::get<I>(in).v[l])...));
    return r;
  }
};

/// A destination: where computed values are stored, converted to T.
template <class T, class Index>
struct out_eval {
  using value_type = T;
  T* p;
  Index stride[max_rank];

  template <int V, class C>
  FUSEX_HD FUSEX_FORCEINLINE void store(const coord<Index>& c, const vec<C, V>& x) const {
    const Index off = c.offset(stride);
    if constexpr (V == 1) {
      p[off] = convert<T>(x.v[0]);
    } else {
      aligned_vec<T, V> raw;
FUSEX_UNROLL
      for (int l = 0; l < V; ++l) raw.v[l] = convert<T>(x.v[l]);
      *reinterpret_cast<aligned_vec<T, V>*>(p + off) = raw;
    }
  }
};

// --- building evaluators from nodes ---------------------------------------------------------------
template <class Node, class Index>
struct evaluator_of;
template <class T, class Index>
struct evaluator_of<leaf_node<T>, Index> { using type = leaf_eval<typename leaf_node<T>::value_type, Index>; };
template <class T, class Index>
struct evaluator_of<scalar_node<T>, Index> { using type = scalar_eval<T>; };
template <class Op, class... Args, class Index>
struct evaluator_of<map_node<Op, Args...>, Index> {
  using type = map_eval<Op, typename evaluator_of<Args, Index>::type...>;
};
template <class Node, class Index>
using evaluator_t = typename evaluator_of<Node, Index>::type;

/// The planned leaves (strides in the kernel's index space), in the order visit_leaves reports
/// them.
template <class Index>
struct leaf_strides_source {
  const operand_layout* leaves;
  int next = 0;
};

template <class Index, class T>
leaf_eval<T, Index> make_evaluator(const leaf_node<T>& n, leaf_strides_source<Index>& src) {
  leaf_eval<T, Index> e{n.v.data(), {}};
  const std::int64_t* s = src.leaves[src.next++].s;
  for (int d = 0; d < max_rank; ++d) e.stride[d] = static_cast<Index>(s[d]);
  return e;
}
template <class Index, class T>
scalar_eval<T> make_evaluator(const scalar_node<T>& n, leaf_strides_source<Index>&) {
  return scalar_eval<T>{n.value};
}
template <class Index, class Op, class... Args, std::size_t... I>
evaluator_t<map_node<Op, Args...>, Index> make_map_evaluator(const map_node<Op, Args...>& n, leaf_strides_source<Index>& src,
                                                             std::index_sequence<I...>);
template <class Index, class Op, class... Args>
evaluator_t<map_node<Op, Args...>, Index> make_evaluator(const map_node<Op, Args...>& n, leaf_strides_source<Index>& src) {
  return make_map_evaluator(n, src, std::index_sequence_for<Args...>{});
}
template <class Index, class Op, class... Args, std::size_t... I>
evaluator_t<map_node<Op, Args...>, Index> make_map_evaluator(const map_node<Op, Args...>& n, leaf_strides_source<Index>& src,
                                                             std::index_sequence<I...>) {
  // Braced initialisation evaluates left to right, so leaves take their strides in visit order.
  return evaluator_t<map_node<Op, Args...>, Index>{
      n.op, cuda::std::tuple<evaluator_t<Args, Index>...>{make_evaluator(cuda::std::get<I>(n.args), src)...}};
}

}  // namespace fusex::detail
