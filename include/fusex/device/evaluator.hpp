#pragma once
/// \file
/// Evaluators: the trivially copyable, device-side form of an expression that a kernel (or the
/// host backend) calls per element or per vector of V elements. The planner builds them from
/// expression nodes, giving each leaf its strides in the kernel's (collapsed) index space.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/view.hpp>
#include <fusex/expr/index.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/reduce.hpp>
#include <fusex/expr/share.hpp>
#include <fusex/expr/detail/share.hpp>
#include <fusex/expr/detail/tree.hpp>
#include <fusex/plan/cache_roles.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <fusex/core/detail/tuple.hpp>
#include <fusex/core/detail/type_list.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
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

/// Coordinates of one work item in the kernel's index space. R is the number of dimensions the
/// code handles: R == max_rank means any rank up to it (the run-time `rank`); a smaller R means
/// exactly R dimensions, so offsets are R multiply-adds with no per-dimension test.
template <class Index, int R = max_rank>
struct coord {
  Index c[R];
  int rank;

  FUSEX_HD FUSEX_FORCEINLINE Index offset(const Index* stride) const {
    Index off = 0;
    FUSEX_UNROLL
    for (int d = 0; d < R; ++d)
      if (R < max_rank || d < rank) off += c[d] * stride[d];
    return off;
  }
  /// The innermost dimension.
  FUSEX_HD FUSEX_FORCEINLINE int last() const { return R < max_rank ? R - 1 : rank - 1; }
};

template <class T, class Index>
struct leaf_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  const T* p;
  Index stride[max_rank];

  bool same_data(const leaf_eval& o) const { return p == o.p && std::memcmp(stride, o.stride, sizeof(stride)) == 0; }

  // The innermost stride, read with compile-time indices (a run-time index would copy the
  // stride array to local memory).
  template <int R>
  FUSEX_HD FUSEX_FORCEINLINE Index inner_stride(const coord<Index, R>& c) const {
    Index s = 0;
    FUSEX_UNROLL
    for (int d = 0; d < R; ++d)
      if (d == c.last()) s = stride[d];
    return s;
  }

  /// V stored elements at c, unconverted (the row kernel's fill converts them to the compute type
  /// itself, once). `Dense`: the caller knows the innermost stride is not 0 (no broadcast along
  /// the vectorised dimension), so there is nothing to test.
  template <int V, bool Dense = false, int R>
  FUSEX_HD FUSEX_FORCEINLINE vec<T, V> load_raw(const coord<Index, R>& c) const {
    const Index off = c.offset(stride);
    vec<T, V> r;
    if constexpr (V == 1) {
      r.v[0] = p[off];
    } else if (!Dense && inner_stride(c) == 0) {
      FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = p[off];
    } else {
      const aligned_vec<T, V> raw = *reinterpret_cast<const aligned_vec<T, V>*>(p + off);
      FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = raw.v[l];
    }
    return r;
  }

  /// Asks for the line of the element at c into L1 (a hint: no value, no fault semantics beyond
  /// the address being the one a later load reads).
  template <int R>
  FUSEX_HD FUSEX_FORCEINLINE void prefetch(const coord<Index, R>& c) const {
#ifdef __CUDA_ARCH__
    asm volatile("prefetch.L1 [%0];" ::"l"(p + c.offset(stride)));
#else
    (void)c;
#endif
  }

  template <int V, bool Dense = false, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>& c, const Ctx&) const {
    const Index off = c.offset(stride);
    vec<compute_type, V> r;
    if constexpr (V == 1) {
      r.v[0] = convert<compute_type>(p[off]);
    } else if (!Dense && inner_stride(c) == 0) {  // broadcast along the vectorised dimension
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

/// An index leaf: the value at coordinate c is base + c's offset in its strides (1 along its axis,
/// 0 elsewhere, or row-major for a linear index, in the kernel's index space); vector lanes step
/// by the innermost stride.
template <class Index>
struct index_eval {
  using value_type = std::int64_t;
  using compute_type = std::int64_t;
  std::int64_t base;
  Index stride[max_rank];

  bool same_data(const index_eval& o) const {
    return base == o.base && std::memcmp(stride, o.stride, sizeof(stride)) == 0;
  }

  template <int V, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<std::int64_t, V> load(const coord<Index, R>& c, const Ctx&) const {
    const std::int64_t first = base + static_cast<std::int64_t>(c.offset(stride));
    vec<std::int64_t, V> r;
    if constexpr (V == 1) {
      r.v[0] = first;
    } else {
      // The innermost stride, read with compile-time indices (see leaf_eval::inner_stride).
      std::int64_t inner = 0;
      FUSEX_UNROLL
      for (int d = 0; d < R; ++d)
        if (d == c.last()) inner = static_cast<std::int64_t>(stride[d]);
      FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = first + l * inner;
    }
    return r;
  }
};

template <class T>
struct scalar_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  compute_type value;

  bool same_data(const scalar_eval& o) const { return std::memcmp(&value, &o.value, sizeof(value)) == 0; }

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>&, const Ctx&) const {
    vec<compute_type, V> r;
    FUSEX_UNROLL
    for (int l = 0; l < V; ++l) r.v[l] = value;
    return r;
  }
};

/// Whether Op computes V lanes of its one operand (an int64 vector) together: `op.lanes<V>(in, out)`.
template <class Op, int V, class Result, class = void>
struct has_lanes_member : std::false_type {};
template <class Op, int V, class Result>
struct has_lanes_member<Op, V, Result,
                        std::void_t<decltype(std::declval<const Op&>().template lanes<V>(
                            std::declval<const std::int64_t (&)[V]>(), std::declval<Result (&)[V]>()))>>
    : std::bool_constant<(V > 1)> {};
template <class Op, int V, class Result, class... In>
struct has_lanes : std::false_type {};
template <class Op, int V, class Result>
struct has_lanes<Op, V, Result, vec<std::int64_t, V>> : has_lanes_member<Op, V, Result> {};

template <class Op, class... Children>
struct map_eval {
  using value_type = typename Op::template result<typename Children::value_type...>;
  using compute_type = compute_t<value_type>;
  Op op;
  fusex::detail::tuple<Children...> children;

  static constexpr int share_kind = share_value;
  bool same_data(const map_eval& o) const { return ops_equal(op, o.op); }

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>& c, const Ctx& ctx) const {
    return apply<V>(c, ctx, std::index_sequence_for<Children...>{});
  }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = sizeof...(Children);
  template <std::size_t I>
  FUSEX_HD FUSEX_FORCEINLINE const auto& child_at() const {
    return fusex::detail::get<I>(children);
  }
  template <class... C>
  FUSEX_HD FUSEX_FORCEINLINE map_eval<Op, C...> with_children(const C&... c) const {
    return map_eval<Op, C...>{op, {c...}};
  }

 private:
  template <std::size_t I>
  using operand_t = typename Op::template operand<I, typename Children::value_type...>;

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <int V, class Index, int R, class Ctx, std::size_t... I>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> apply(const coord<Index, R>& c, const Ctx& ctx,
                                                        std::index_sequence<I...>) const {
    const fusex::detail::tuple<decltype(fusex::detail::get<I>(children).template load<V>(c, ctx))...> in{
        fusex::detail::get<I>(children).template load<V>(c, ctx)...};
    vec<compute_type, V> r;
    if constexpr (has_lanes<Op, V, value_type, std::decay_t<decltype(fusex::detail::get<I>(in))>...>::value) {
      // An op that computes its V lanes together (random numbers: one Philox block for four).
      value_type out[V];
      op.template lanes<V>(fusex::detail::get<I>(in).v..., out);
      FUSEX_UNROLL
      for (int l = 0; l < V; ++l) r.v[l] = convert<compute_type>(out[l]);
    } else {
      FUSEX_UNROLL
      for (int l = 0; l < V; ++l)
        r.v[l] = convert<compute_type>(op(convert<operand_t<I>>(fusex::detail::get<I>(in).v[l])...));
    }
    return r;
  }
};

/// The evaluation context of plain elementwise kernels: no reduction results.
struct no_context {};

/// The evaluation context of a row kernel: the finished results of this row's reductions, one
/// 8-byte slot each, in post-order.
struct row_context {
  const std::uint64_t* slots;

  template <class C>
  FUSEX_HD FUSEX_FORCEINLINE C get(int slot) const {
    C v;
    static_assert(sizeof(C) <= sizeof(std::uint64_t), "reduction results fit one slot");
    memcpy(&v, slots + slot, sizeof(C));
    return v;
  }
};

/// A reduction inside a row kernel: its result for the current row, computed by an earlier pass.
template <class Op, class Child>
struct reduce_eval {
  using input_type = typename Child::value_type;
  using value_type = typename Op::template result<input_type>;
  using compute_type = compute_t<value_type>;
  using op_type = Op;
  Op op;
  Child child;
  int slot;
  // The same reduction as an earlier one (expr/detail/share.hpp), whose slot it reads: the passes
  // skip it.
  bool dup = false;

  static constexpr int share_kind = share_reduction;
  bool same_data(const reduce_eval& o) const { return ops_equal(op, o.op); }

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>&, const Ctx& ctx) const {
    static_assert(std::is_base_of_v<row_context, Ctx>, "fusex: internal: a reduction evaluated outside a row kernel");
    const compute_type x = ctx.template get<compute_type>(slot);
    vec<compute_type, V> r;
    FUSEX_UNROLL
    for (int l = 0; l < V; ++l) r.v[l] = x;
    return r;
  }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = 1;
  template <std::size_t I>
  FUSEX_HD FUSEX_FORCEINLINE const Child& child_at() const {
    return child;
  }
  template <class C>
  FUSEX_HD FUSEX_FORCEINLINE reduce_eval<Op, C> with_children(const C& c) const {
    return reduce_eval<Op, C>{op, c, slot, dup};
  }
};

// --- shared values (expr/detail/share.hpp) ---------------------------------------------------------
/// Where the shared values of one evaluation of a scope (one work item of an elementwise kernel,
/// one vector of a row's epilogue or of a reduction's operand) are kept: one vector per candidate
/// type (Keys), in registers after inlining.
template <int V, class Keys>
struct share_memo;
template <int V, class... Keys>
struct share_memo<V, type_list<Keys...>> {
  fusex::detail::tuple<vec<typename Keys::compute_type, V>...> v;
  template <class K>
  FUSEX_HD FUSEX_FORCEINLINE vec<typename K::compute_type, V>& get() {
    return fusex::detail::get<type_index<K, Keys...>::value>(v);
  }
};
/// An evaluation context with the memo of its scope. `Lazy`: load_scope computed every shared value
/// of the scope into the memo before the expression (share_table::lazy_ok held at launch: each
/// equals the first of its type), so each use reads it: straight-line code, as if written by hand
/// with named values. Otherwise each candidate tests its role, a kernel parameter.
template <class Ctx, class Memo, bool Lazy = false>
struct memo_context : Ctx {
  using memo_type = Memo;
  static constexpr bool lazy = Lazy;
  Memo* memo;
};
template <class Ctx, class = void>
struct has_memo : std::false_type {};
template <class Ctx>
struct has_memo<Ctx, std::void_t<typename Ctx::memo_type>> : std::true_type {};

/// The evaluator of fusex::share: its child, with the node's identity for the sharing analysis.
template <class E>
struct share_mark_eval {
  using value_type = typename E::value_type;
  using compute_type = typename E::compute_type;
  E child;
  std::uint64_t share_id;

  static constexpr int share_kind = share_value;
  bool same_data(const share_mark_eval&) const { return true; }

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>& c, const Ctx& ctx) const {
    return child.template load<V>(c, ctx);
  }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = 1;
  template <std::size_t I>
  FUSEX_HD FUSEX_FORCEINLINE const E& child_at() const {
    return child;
  }
  template <class C>
  FUSEX_HD FUSEX_FORCEINLINE share_mark_eval<C> with_children(const C& c) const {
    return share_mark_eval<C>{c, share_id};
  }
};

/// Whether a shared value's subtree uses one shared value type twice or more in its scope (defined
/// below).
template <class E>
struct nested_repeats;
/// A subtree computed out of line: one copy per type (V, tree, index and context types), called
/// from each place that computes it. The run-time-role form of shared_eval uses it where a shared
/// value's subtree repeats a shared value type (nested_repeats): there each occurrence keeps its
/// subtree's code behind its role's branch, so inline copies multiply with the nesting (h used
/// three times in a value g used three times: nine copies of h's code, 3^d at depth d), where the
/// calls keep the code linear in the tree's types. Only there: a call waits for its loads, so the
/// work items' loads are no longer in flight together, and the run-time-role form is what runs
/// where equal-typed values hold different data (f(a) + f(b): share_table::lazy_ok false) and
/// what the generic reduction kernels run. The call takes the addresses of the memo and of the
/// kernel's parameters, so there they live in local memory (L1) rather than registers; its speed on
/// the GPU is to be measured (docs/performance.md, "Compile time").
template <int V, class E, class Index, int R, class Ctx>
FUSEX_HD FUSEX_NOINLINE vec<typename E::compute_type, V> load_outlined(const E& e, const coord<Index, R>& c,
                                                                       const Ctx& ctx) {
  return e.template load<V>(c, ctx);
}

/// Leaf forms of shared_eval: a value node (share_node); a leaf of a type that occurs more than
/// once in an elementwise tree that has shared values (share_leaves), whose role says at run time
/// whether it is the first of its type's view (share_leaf_any); the same where every repeated leaf is
/// that view (share_leaf_first: the launch checked it; the lazy form only).
inline constexpr int share_node = 0, share_leaf_any = 1, share_leaf_first = 2;

/// A candidate value node (Key: its evaluator type before wrapping) with its role: computed on its
/// own (share_compute), computed and kept for later uses (share_store), or read from the memo
/// (share_reuse). The role is a kernel parameter, so the branch is uniform; every candidate of a
/// tree keeps its own code (a tree whose equal-typed values differ at run time computes each).
/// Or (`Leaf`, Key is the leaf's type) a repeated leaf: the first of its type (share_store) is kept in the memo, a
/// later one that is the same view (share_reuse) reads it, another view (share_compute) reads
/// memory, also in the lazy form, behind a uniform branch; share_leaf_first has no branch (the
/// branch keeps nvcc from interleaving a thread's work items: the chain ran at 0.90 of a
/// hand-written kernel with it, 0.95 without, H100). The compiler cannot see that two leaf
/// parameters hold one pointer, so without this each would load (and, with every work item's loads
/// in flight together, hold registers for) its own copy of the same values.
template <class Key, class E, int Leaf = share_node>
struct shared_eval {
  using value_type = typename E::value_type;
  using compute_type = typename E::compute_type;
  E child;
  int role;

  template <int V, class Index, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>& c, const Ctx& ctx) const {
    static_assert(has_memo<Ctx>::value, "fusex: internal: a shared value evaluated outside load_scope");
    auto& m = ctx.memo->template get<Key>();
    if constexpr (Ctx::lazy) {
      // (load_scope computed the first of each key into the memo. A value's role is not tested: the
      // first of a type used once is share_compute. A leaf's first is always share_store.)
      if constexpr (Leaf == share_leaf_any) {
        if (role == share_compute) return child.template load<V>(c, ctx);
      }
      return m;
    } else {
      if (role == share_reuse) return m;
      vec<compute_type, V> x;
      if constexpr (Leaf == share_node && nested_repeats<E>::value) {
        x = fusex::detail::load_outlined<V>(child, c, ctx);
      } else {
        x = child.template load<V>(c, ctx);
      }
      if (role == share_store) m = x;
      return x;
    }
  }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = 1;
  template <std::size_t I>
  FUSEX_HD FUSEX_FORCEINLINE const E& child_at() const {
    return child;
  }
  template <class C>
  FUSEX_HD FUSEX_FORCEINLINE shared_eval<Key, C, Leaf> with_children(const C& c) const {
    return shared_eval<Key, C, Leaf>{c, role};
  }
};

template <class N, class... K>
struct memo_keys_f : std::conditional<share_kind_of<N>::value == share_reduction, type_list<>,
                                      typename type_lists_merge<K...>::type> {};
template <class Key, class E, int Leaf, class K>
struct memo_keys_f<shared_eval<Key, E, Leaf>, K> : type_list_add<K, Key> {};
/// The shared values' keys of a scope (an evaluator tree outside its reductions: each reduction's
/// operand is a scope of its own), in the post-order of their first uses.
template <class E>
using memo_keys_t = fold_type_t<E, memo_keys_f>;
template <class N>
struct is_shared_value_eval : std::false_type {};
template <class Key, class E>
struct is_shared_value_eval<shared_eval<Key, E, share_node>> : std::true_type {};
template <class N, class... K>
struct value_sets_f {  // the shared value types of a scope, and those that occur twice or more
  using type = std::conditional_t<share_kind_of<N>::value == share_reduction, share_sets<type_list<>, type_list<>>,
                                  typename candidate_sets<is_shared_value_eval>::template f<N, K...>::type>;
};
template <class E>
struct nested_repeats : std::bool_constant<(fold_type_t<E, value_sets_f>::dups::size > 0)> {};

template <class Key, class N>
struct is_shared_of : std::false_type {};
template <class Key, class E, int Leaf>
struct is_shared_of<Key, shared_eval<Key, E, Leaf>> : std::true_type {};
template <class Key>
struct has_key {
  template <class N, class... K>
  struct f : std::bool_constant<is_shared_of<Key, N>::value ||
                                ((share_kind_of<N>::value != share_reduction) && (false || ... || K::value))> {};
};
template <class Key, class N>
inline constexpr bool scope_has_key_v = fold_type_t<N, has_key<Key>::template f>::value;
/// The first (leftmost) shared_eval of Key in a scope. (Nodes of one type never nest, so it is also
/// the first in post-order: the first that the kernels evaluate.)
template <class Key, class N>
FUSEX_HD FUSEX_FORCEINLINE const auto& first_shared(const N& n);
template <class Key, class N, std::size_t I0, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE const auto& first_shared_in(const N& n, std::index_sequence<I0, I...>) {
  if constexpr (scope_has_key_v<Key, child_t<I0, N>>) {
    return first_shared<Key>(n.template child_at<I0>());
  } else {
    return first_shared_in<Key>(n, std::index_sequence<I...>{});
  }
}
template <class Key, class N>
FUSEX_HD FUSEX_FORCEINLINE const auto& first_shared(const N& n) {
  if constexpr (is_shared_of<Key, N>::value) {
    return n;
  } else {
    return first_shared_in<Key>(n, std::make_index_sequence<tree_arity<N>::value>{});
  }
}
template <int V, class E, class Index, int R, class Ctx, class... Keys>
FUSEX_HD FUSEX_FORCEINLINE void fill_memo(const E& e, const coord<Index, R>& c, const Ctx& ctx, type_list<Keys...>) {
  // Post-order: the values a shared value uses are in the memo before it is computed.
  ((ctx.memo->template get<Keys>() = first_shared<Keys>(e).child.template load<V>(c, ctx)), ...);
}

/// Evaluates the root of a scope (every kernel's entry into a tree: the expression of an
/// elementwise kernel, a row's epilogue, a reduction's operand) at c, with the memo its shared
/// values need. `Lazy` (lazy_ok held at launch): the shared values first, then the expression.
template <int V, bool Lazy = false, class E, class Index, int R, class Ctx>
FUSEX_HD FUSEX_FORCEINLINE vec<typename E::compute_type, V> load_scope(const E& e, const coord<Index, R>& c,
                                                                       const Ctx& ctx) {
  using keys = memo_keys_t<E>;
  if constexpr (keys::size == 0) {
    return e.template load<V>(c, ctx);
  } else {
    share_memo<V, keys> m;
    const memo_context<Ctx, share_memo<V, keys>, Lazy> mc{ctx, &m};
    if constexpr (Lazy) fill_memo<V>(e, c, mc, keys{});
    return e.template load<V>(c, mc);
  }
}
/// Whether an evaluator tree has shared values (then a kernel may take their lazy form).
template <class E>
inline constexpr bool has_shares_v = memo_keys_t<E>::size > 0;

/// Wraps the candidates of an evaluator tree (a fold_tree visitor, in the post-order of the
/// share_table): value nodes in shared_eval with their roles; a reduction that repeats an earlier
/// one reads that one's slot and is skipped by the passes.
template <class Dups, class Table>
struct share_wrapper : rebuild_tree {
  const Table& t;
  int next = 0;
  using rebuild_tree::operator();
  template <class N, class K0, class... K>
  auto operator()(const N& n, const K0& k0, const K&... k) {
    auto rebuilt = n.with_children(k0, k...);
    if constexpr (!type_list_contains<N, Dups>::value) {
      return rebuilt;
    } else {
      const share_entry& x = t.e[static_cast<std::size_t>(next++)];
      if constexpr (share_kind_of<N>::value == share_reduction) {
        if (x.role == share_reuse) {
          rebuilt.slot = static_cast<const N*>(t.e[static_cast<std::size_t>(x.rep)].node)->slot;
          rebuilt.dup = true;
        }
        return rebuilt;
      } else {
        return shared_eval<N, decltype(rebuilt)>{rebuilt, x.role};
      }
    }
  }
};
/// The evaluator tree with its shared values marked (unchanged where no node type repeats);
/// `lazy_ok` is cleared where their lazy form would be wrong (share_table::lazy_ok).
template <class E>
auto share_values(const E& e, bool& lazy_ok) {
  if constexpr (share_count_v<E> == 0) {
    return e;
  } else {
    const share_table<E> t = share_roles(e);
    lazy_ok = lazy_ok && t.lazy_ok;
    share_wrapper<share_dups_t<E>, share_table<E>> w{{}, t};
    return fold_tree(e, w);
  }
}

template <class N>
struct is_leaf_eval : std::false_type {};
template <class T, class Index>
struct is_leaf_eval<leaf_eval<T, Index>> : std::true_type {};
template <class E>
using repeated_leaf_types_t = typename fold_type_t<E, candidate_sets<is_leaf_eval>::template f>::dups;
// Wraps the leaves of the types in Dups in shared_eval<N, N, Form>, in post-order: the first of a type
// keeps its value, a later one reads it where it is the same view.
template <class Dups, int Form>
struct leaf_wrapper : rebuild_tree {
  const void* first[Dups::size] = {};
  using rebuild_tree::operator();
  template <class N>
  auto operator()(const N& n) {
    if constexpr (!type_list_contains<N, Dups>::value) {
      return n;
    } else {
      const void*& f = first[type_list_index<N, Dups>::value];
      int role = share_store;
      if (f == nullptr) f = &n;
      else role = n.same_data(*static_cast<const N*>(f)) ? share_reuse : share_compute;
      return shared_eval<N, N, Form>{n, role};
    }
  }
};
/// The leaves of an elementwise evaluator tree that has shared values, with repeated leaf types
/// wrapped (shared_eval in leaf form `Form`: share_leaf_any, or share_leaf_first where
/// leaves_all_first holds); other trees unchanged (no kernel is added for leaves alone, and both
/// forms are one type). In the lazy form every leaf that is the first of its type's view is read
/// once per work item.
template <int Form, class E>
auto share_leaves(const E& e) {
  using dups = repeated_leaf_types_t<E>;
  if constexpr (!has_shares_v<E> || dups::size == 0) {
    return e;
  } else {
    leaf_wrapper<dups, Form> w;
    return fold_tree(e, w);
  }
}
// Whether each later leaf of a repeated type is the same view as the first (leaves in the order
// leaf_wrapper meets them: visit_tree and fold_tree both take children left to right).
template <class Dups>
struct leaf_first_check {
  const void* first[Dups::size] = {};
  bool all_first = true;
  template <class N>
  int operator()(const N& n, int) {
    if constexpr (type_list_contains<N, Dups>::value) {
      const void*& f = first[type_list_index<N, Dups>::value];
      if (f == nullptr) f = &n;
      else all_first = all_first && n.same_data(*static_cast<const N*>(f));
    }
    return 0;
  }
};
/// Whether every repeated leaf of an elementwise evaluator tree is the first of its type's view
/// (vacuously true where share_leaves wraps nothing): then share_leaf_first may run. A walk that
/// builds nothing, so a launch decides its kernel before it builds that kernel's arguments.
template <class E>
bool leaves_all_first(const E& e) {
  using dups = repeated_leaf_types_t<E>;
  if constexpr (!has_shares_v<E> || dups::size == 0) {
    (void)e;
    return true;
  } else {
    leaf_first_check<dups> c;
    visit_tree(e, c, 0);
    return c.all_first;
  }
}

// --- the row kernel's register cache -------------------------------------------------------------
// An operand written several times in an expression (the x of (x - mean(x)) * rsqrt(var(x))) is
// several leaves. The cache holds ONE set of vectors per leaf *type* (one for float, one for bf16,
// ...): the planner picks per type the operand with the most occurrences as its owner; each leaf
// is told at run time whether it is that operand (it then reads the shared registers) or another
// one of the same type (it reads memory on each use, mostly L1/L2 hits).

template <class N, class... K>
struct leaf_types_f {  // terminals other than leaves: none
  using type = type_list<>;
};
template <class N, class K0, class... K>
struct leaf_types_f<N, K0, K...> : type_lists_merge<K0, K...> {};  // inner nodes: merged left to right
template <class T, class Index>
struct leaf_types_f<leaf_eval<T, Index>> {
  using type = type_list<std::remove_const_t<T>>;
};
/// The distinct stored types of an evaluator's leaves, in first-visit order.
template <class E>
using leaf_types_t = fold_type_t<E, leaf_types_f>;

template <class L>
struct type_list_bytes;
template <class... T>
struct type_list_bytes<type_list<T...>>
    : std::integral_constant<int, (0 + ... + static_cast<int>(sizeof(compute_t<T>)))> {};
/// Bytes of one cached element of each distinct leaf type (the cached row keeps one vector set per
/// type, in the compute type).
template <class E>
struct leaf_type_bytes : type_list_bytes<leaf_types_t<E>> {};

/// One leaf type's cached vectors: K chunks of W elements per thread, in the compute type (half and
/// bfloat16 are converted once, when the row is loaded, not in each pass that reads it).
template <class T, int W, int K>
struct leaf_cache {
  vec<compute_t<T>, W> v[K];
};

template <int W, int K, class L>
struct row_cache_set;
/// The registers of the cached row: one leaf_cache per distinct leaf type.
template <int W, int K, class... Ts>
struct row_cache_set<W, K, type_list<Ts...>> {
  fusex::detail::tuple<leaf_cache<Ts, W, K>...> caches;
  template <class T>
  FUSEX_HD FUSEX_FORCEINLINE leaf_cache<T, W, K>& get() {
    return fusex::detail::get<type_index<T, Ts...>::value>(caches);
  }
  template <class T>
  FUSEX_HD FUSEX_FORCEINLINE const leaf_cache<T, W, K>& get() const {
    return fusex::detail::get<type_index<T, Ts...>::value>(caches);
  }
};

/// The context of the row kernel's cached path while it works on chunk K of its share of the row:
/// cached leaves answer from the registers in `set`.
template <int K, class Set>
struct cached_row_context : row_context {
  static constexpr int chunk = K;
  const Set* set;
};

/// A leaf in the cached path. The owner of its type's cache loads chunk k of this thread's share
/// of the row into it once (fill); owner and readers then answer from those registers (all
/// indices are compile-time constants after unrolling, so the arrays live in registers); other
/// leaves read memory (those marked leaf_prefetch have their line requested at the fill).
/// `Dense`: no leaf of the tree broadcasts along the row (see leaf_eval::load_raw).
template <class T, class Index, int W, int K, bool Dense>
struct cached_leaf_eval {
  using value_type = T;
  using compute_type = compute_t<T>;
  using raw_type = std::remove_const_t<T>;
  leaf_eval<T, Index> leaf;
  int mode;

  template <int k, int R, class Set>
  FUSEX_HD FUSEX_FORCEINLINE void fill(const coord<Index, R>& c, Set& set) const {
    if (mode == leaf_cache_owner) {
      const auto raw = leaf.template load_raw<W, Dense>(c);
      FUSEX_UNROLL
      for (int l = 0; l < W; ++l) set.template get<raw_type>().v[k].v[l] = convert<compute_type>(raw.v[l]);
    } else if (mode == leaf_prefetch) {
      leaf.prefetch(c);
    }
  }
  template <int V, int R, class Ctx>
  FUSEX_HD FUSEX_FORCEINLINE vec<compute_type, V> load(const coord<Index, R>& c, const Ctx& ctx) const {
    static_assert(V == W, "fusex: internal: a cached leaf is read with its own vector width");
    if (mode != leaf_cache_owner && mode != leaf_cache_reader) return leaf.template load<V, Dense>(c, ctx);
    return ctx.set->template get<raw_type>().v[Ctx::chunk];
  }
};

/// The cached form of an evaluator tree: leaves become cached_leaf_eval with their role (from
/// `modes`, leaves numbered in visit order by `next`), the rest is rebuilt around them
/// (reduction slots kept).
template <int W, int K, bool Dense, class Index>
struct cache_builder : rebuild_tree {
  std::uint64_t modes;
  int next;
  using rebuild_tree::operator();
  template <class T>
  FUSEX_HD FUSEX_FORCEINLINE cached_leaf_eval<T, Index, W, K, Dense> operator()(const leaf_eval<T, Index>& e) {
    const int i = next++;
    return cached_leaf_eval<T, Index, W, K, Dense>{e, i < 32 ? static_cast<int>((modes >> (2 * i)) & 3u) : leaf_uncached};
  }
  // An index leaf is a planner operand (it has a role number) but never cached.
  FUSEX_HD FUSEX_FORCEINLINE index_eval<Index> operator()(const index_eval<Index>& e) {
    ++next;
    return e;
  }
};
template <int W, int K, bool Dense, class Index, class E>
FUSEX_HD FUSEX_FORCEINLINE auto make_cached(const E& e, std::uint64_t modes) {
  cache_builder<W, K, Dense, Index> b{{}, modes, 0};
  return fold_tree(e, b);
}

/// Loads chunk k of every owner leaf of the tree at coordinate c into `set`.
template <int k, class Index, int R, class Set>
struct cache_filler {
  const coord<Index, R>& c;
  Set& set;
  template <class T, int W, int K, bool Dense>
  FUSEX_HD FUSEX_FORCEINLINE void operator()(const cached_leaf_eval<T, Index, W, K, Dense>& e, int) const {
    e.template fill<k>(c, set);
  }
  template <class N>
  FUSEX_HD FUSEX_FORCEINLINE int operator()(const N&, int) const {
    return 0;
  }
};
template <int k, class Index, int R, class E, class Set>
FUSEX_HD FUSEX_FORCEINLINE void fill_cached(const E& e, const coord<Index, R>& c, Set& set) {
  cache_filler<k, Index, R, Set> f{c, set};
  visit_tree(e, f, 0);
}

// --- the roles an expression's structure predicts ----------------------------------------------
// The planner assigns the roles from the operands' addresses, at run time, and the cached path
// tests each leaf's role once per chunk: compares and branches in the hottest code. In the common
// case the roles follow from the expression's shape: every leaf of a type inside the reductions
// is one operand (softmax's x, layer_norm's x), and so is every leaf of that type outside them
// that comes before one inside them in visit order (the x of x - mean(x), the residual x of
// x + f(layer_norm(x))); leaves after the last one inside them (a weight, a bias: expressions
// write them after the normalisation) are other operands. When the
// planner's roles equal that prediction (and no leaf broadcasts along the row), the kernel runs
// the cached path with the predicted roles as compile-time constants (row_params::static_path).

struct static_leaf {
  int type;     // index in leaf_types_t
  bool usable;  // a fusex dtype (a user type is never cached)
  bool in_reduction;
  int key;  // the innermost shared value (shared_eval) around it: an index in share_keys_t, or -1
  int pos;  // its position among that shared value's leaves
};
// The leaves in visit order (the order make_cached numbers them), each with its type, whether it
// is inside a reduction, and its place in the innermost shared value around it (Key, Pos).
template <class T, bool InReduction, class Key = void, int Pos = 0>
struct leaf_entry {};
template <class L>
struct mark_in_reduction;
template <class... T, bool... B, class... K, int... P>
struct mark_in_reduction<type_list<leaf_entry<T, B, K, P>...>> {
  using type = type_list<leaf_entry<T, true, K, P>...>;
};
template <class Key, class L, class = std::make_index_sequence<L::size>>
struct mark_in_share;
template <class Key, class... T, bool... B, class... K, int... P, std::size_t... I>
struct mark_in_share<Key, type_list<leaf_entry<T, B, K, P>...>, std::index_sequence<I...>> {
  using type = type_list<leaf_entry<T, B, std::conditional_t<std::is_void_v<K>, Key, K>,
                                    std::is_void_v<K> ? static_cast<int>(I) : P>...>;
};
template <class N, class... K>
struct leaf_entries_f : type_list_cat<K...> {};  // inner nodes: the children's, in order; terminals: none
template <class T, class Index>
struct leaf_entries_f<leaf_eval<T, Index>> {
  using type = type_list<leaf_entry<std::remove_const_t<T>, false>>;
};
// An index leaf: a planner operand that is never cached (a type no leaf of a fusex dtype has).
struct index_leaf_type {};
template <class Index>
struct leaf_entries_f<index_eval<Index>> {
  using type = type_list<leaf_entry<index_leaf_type, false>>;
};
template <class Op, class C, class K>
struct leaf_entries_f<reduce_eval<Op, C>, K> : mark_in_reduction<K> {};
template <class Key, class E, int Leaf, class K>
struct leaf_entries_f<shared_eval<Key, E, Leaf>, K> : mark_in_share<Key, K> {};

template <class N, class... K>
struct share_keys_f : type_lists_merge<K...> {};
template <class Key, class E, int Leaf, class K>
struct share_keys_f<shared_eval<Key, E, Leaf>, K> : type_list_add<K, Key> {};
/// The keys of every shared value of an evaluator tree (any scope).
template <class E>
using share_keys_t = fold_type_t<E, share_keys_f>;

// T's index among Ts, or -1 (an index leaf's type is not among the cached types).
template <class T, class... Ts>
struct type_position : std::integral_constant<int, -1> {};
template <class T, class... Ts>
struct type_position<T, T, Ts...> : std::integral_constant<int, 0> {};
template <class T, class U, class... Ts>
struct type_position<T, U, Ts...>
    : std::integral_constant<int, type_position<T, Ts...>::value < 0 ? -1 : 1 + type_position<T, Ts...>::value> {};

template <class Types, class Keys, class Entries>
struct static_leaves_of;
template <class... Ts, class... Ks, class... T, bool... B, class... K, int... P>
struct static_leaves_of<type_list<Ts...>, type_list<Ks...>, type_list<leaf_entry<T, B, K, P>...>> {
  static constexpr int size = sizeof...(T);
  static constexpr static_leaf v[sizeof...(T) > 0 ? sizeof...(T) : 1] = {
      static_leaf{type_position<T, Ts...>::value, is_dtype_v<T>, B, type_position<K, Ks...>::value, P}...};
};

template <class E>
constexpr std::uint64_t predict_cache_modes() {
  using leaves = static_leaves_of<leaf_types_t<E>, share_keys_t<E>, fold_type_t<E, leaf_entries_f>>;
  constexpr int N = leaves::size;
  const auto& l = leaves::v;
  // A leaf at the same place in an earlier copy of its shared value (`n` in n * gelu(n)) is
  // predicted to be that copy's operand: a shared value's copies are one value (its second copy is
  // never evaluated, so its leaves say nothing about the others). Only copies on the same side of
  // the reductions: values of one type in different scopes are different values (mean(x * 2) +
  // w * 2), and a leaf inside a reduction is predicted to be the main operand anyway.
  int twin[N > 0 ? N : 1] = {};
  for (int i = 0; i < N; ++i) {
    twin[i] = -1;
    for (int j = 0; j < i && twin[i] < 0 && l[i].key >= 0; ++j)
      if (l[j].key == l[i].key && l[j].pos == l[i].pos && l[j].in_reduction == l[i].in_reduction) twin[i] = j;
  }
  // The predicted operand of each leaf: 0 for its type's main operand, else one of its own.
  int operand[N > 0 ? N : 1] = {};
  for (int i = 0; i < N; ++i) {
    if (twin[i] >= 0) {
      operand[i] = operand[twin[i]];
      continue;
    }
    bool reduced_later = false;
    for (int j = i + 1; j < N && !reduced_later; ++j)
      reduced_later = twin[j] < 0 && l[j].in_reduction && l[j].type == l[i].type;
    operand[i] = l[i].in_reduction || reduced_later ? 0 : i + 1;
  }
  int cached = 0;
  return cache_roles(
      N, [&](int i) { return l[i].usable; }, [&](int a, int b) { return l[a].type == l[b].type; },
      [&](int a, int b) { return l[a].type == l[b].type && operand[a] == operand[b]; }, cached);
}
/// The cache roles (row_params::cache_modes) the structure of evaluator E predicts.
template <class E>
struct predicted_cache_modes : std::integral_constant<std::uint64_t, predict_cache_modes<E>()> {};

template <class N, class... K>
struct max_leaf_size_f : max_of<K...> {};
template <class T>
struct max_leaf_size_f<leaf_node<T>> : std::integral_constant<int, static_cast<int>(sizeof(T))> {};
/// The widest stored element (bytes) of the leaves of an expression node (0 without leaves):
/// kernels read 16 / widest elements per vector.
template <class N>
using max_leaf_size = fold_type_t<N, max_leaf_size_f>;

template <class N, class... K>
struct reduction_depth_f : max_of<K...> {};
template <class Op, class C, class K>
struct reduction_depth_f<reduce_eval<Op, C>, K> : std::integral_constant<int, K::value + 1> {};
/// How deeply reductions nest in an evaluator: 0 without reductions; a reduction is one deeper
/// than its operand. A reduction's *level* is its operand's depth: the row kernel computes all
/// reductions of one level in one pass over the row (layer_norm's mean and variance share it),
/// and takes one pass per level.
template <class E>
using reduction_depth = fold_type_t<E, reduction_depth_f>;

/// Pointers to the reductions of level L below an evaluator, as a tuple (leaves and scalars have
/// none).
template <int L>
struct level_gatherer {
  template <class N>
  FUSEX_HD FUSEX_FORCEINLINE tuple<> operator()(const N&) const {
    return {};
  }
  template <class N, class... K>
  FUSEX_HD FUSEX_FORCEINLINE auto operator()(const N&, const K&... k) const {
    return tuple_cat(k...);
  }
  template <class Op, class C, class K>
  FUSEX_HD FUSEX_FORCEINLINE auto operator()(const reduce_eval<Op, C>& r, const K& k) const {
    if constexpr (reduction_depth<C>::value == L) {
      return tuple_cat(k, tuple<const reduce_eval<Op, C>*>(&r));
    } else {
      return k;
    }
  }
};
template <int L, class E>
FUSEX_HD FUSEX_FORCEINLINE auto gather_level(const E& e) {
  level_gatherer<L> g;
  return fold_tree(e, g);
}

/// A destination: where computed values are stored, converted to T.
template <class T, class Index>
struct out_eval {
  using value_type = T;
  T* p;
  Index stride[max_rank];

  template <int V, int R, class C>
  FUSEX_HD FUSEX_FORCEINLINE void store(const coord<Index, R>& c, const vec<C, V>& x) const {
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

/// The planner's description of a view.
template <class T>
operand_layout describe_operand(const view<T>& v) {
  operand_layout o;
  o.data = v.data();
  o.elem_size = static_cast<int>(sizeof(T));
  o.dtype = dtype_of<std::remove_const_t<T>>();
  o.shape = v.shape();
  o.strides = v.strides();
  return o;
}

/// The planner's description of an expression leaf (strides in the space still to be planned).
inline operand_layout operand_from_leaf(const leaf_info& li) {
  operand_layout o;
  o.data = li.data;
  o.elem_size = li.elem_size;
  o.compute_size = li.compute_size;
  o.dtype = li.dtype;
  o.shape = li.shape;
  o.strides = li.strides;
  o.computed = li.computed;
  return o;
}

/// A destination evaluator with the planned strides.
template <class Index, class T>
out_eval<T, Index> make_out_evaluator(const view<T>&, const operand_layout& o) {
  // The operand's address, not the view's: a launch in pieces advances it (split_index32).
  out_eval<T, Index> e{static_cast<T*>(const_cast<void*>(o.data)), {}};
  for (int d = 0; d < max_rank; ++d) e.stride[d] = static_cast<Index>(o.s[d]);
  return e;
}

// --- building evaluators from nodes ---------------------------------------------------------------
/// Builds the evaluator of an expression (a fold_tree visitor): each leaf takes the next planned
/// operand's strides (in the kernel's index space, in the order visit_leaves reports leaves), each
/// reduction the next result slot (post-order). Another layer's terminal (matmul) brings its
/// evaluator through an overload of make_evaluator(node, leaf_strides_source<Index>&).
template <class Index>
struct leaf_strides_source {
  const operand_layout* leaves;
  int next = 0;
  int next_slot = 0;  // reduction slots, assigned in post-order
  bool shares_lazy = true;  // the trees built so far may take their shared values' lazy form

  template <class T>
  leaf_eval<T, Index> operator()(const leaf_node<T>&) {
    const operand_layout& o = leaves[next++];
    leaf_eval<T, Index> e{static_cast<const T*>(o.data), {}};  // (advanced in a launch in pieces)
    const std::int64_t* s = o.s;
    for (int d = 0; d < max_rank; ++d) e.stride[d] = static_cast<Index>(s[d]);
    return e;
  }
  template <class T>
  scalar_eval<T> operator()(const scalar_node<T>& n) {
    return scalar_eval<T>{n.value};
  }
  index_eval<Index> operator()(const index_node&) {
    const operand_layout& o = leaves[next++];
    // The value at the first element travels as the operand's "address" (advanced per piece).
    index_eval<Index> e{static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(o.data)), {}};
    for (int d = 0; d < max_rank; ++d) e.stride[d] = static_cast<Index>(o.s[d]);
    return e;
  }
  template <class Op, class... A, class... K>
  map_eval<Op, K...> operator()(const map_node<Op, A...>& n, const K&... k) {
    return map_eval<Op, K...>{n.op, {k...}};
  }
  template <class C, class K>
  share_mark_eval<K> operator()(const shared_node<C>& n, const K& k) {
    return share_mark_eval<K>{k, n.share_id};
  }
  template <class Op, class C, class K>
  reduce_eval<Op, K> operator()(const reduce_node<Op, C>& n, const K& k) {
    return reduce_eval<Op, K>{n.op, k, next_slot++};
  }
  template <class N>
  auto operator()(const N& n) -> decltype(make_evaluator(n, *this)) {
    return make_evaluator(n, *this);
  }
};

/// The evaluator of an expression, its shared values marked (share_values).
template <class Index, class E>
auto build_evaluator(const E& e, leaf_strides_source<Index>& src) {
  return share_values(fold_tree(e, src), src.shares_lazy);
}
template <class Node, class Index>
using evaluator_t = decltype(build_evaluator(std::declval<const Node&>(), std::declval<leaf_strides_source<Index>&>()));

}  // namespace fusex::detail
