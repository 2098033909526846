#pragma once
/// \file
/// The matmul expression node and the tree utilities the matmul evaluation needs: counting and
/// finding the one matmul node of an epilogue tree, and replacing it by a leaf (a temporary).
/// Part of <fusex/matmul.hpp>; needs no cuBLAS.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/reduce.hpp>

#include <fusex/core/detail/tuple.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// Which implementation computes a matmul (see docs/matmul.md, "Choosing a path").
enum class matmul_path {
  automatic,  ///< the chooser decides by shape and dtype (default)
  cublaslt,   ///< always cuBLASLt (one fused call, or GEMM + one elementwise kernel)
  fusex       ///< always fusex's own GEMM kernel with the epilogue inlined (made for M <= 64)
};

/// Per-matmul options, passed to fusex::matmul and fusex::linear.
struct matmul_options {
  /// float32 operands: let cuBLASLt use TF32 tensor cores (10-bit mantissa products). Off by
  /// default, so float32 results are float32-accurate unless the caller opts in.
  bool allow_tf32 = false;
  /// Overrides the path chooser for this matmul.
  matmul_path path = matmul_path::automatic;
  /// The GEMM + elementwise path (an epilogue cuBLASLt cannot apply whole) with a float16 or
  /// bfloat16 destination. false (default): one cuBLASLt call applies the largest part of the
  /// epilogue it can (e.g. bias + gelu_tanh) and writes the destination in its dtype, then one
  /// elementwise kernel applies the rest in place: that part's result is rounded to the
  /// destination's dtype before the rest (one rounding more) and no temporary is needed. true: the
  /// product goes to a float32 temporary and the whole epilogue runs in float32, rounded once at
  /// the store (6 more bytes of memory traffic per element). A float32 destination is always
  /// handled the first way (no extra rounding there).
  bool float32_intermediate = false;
};

namespace detail {
template <class T>
inline constexpr bool is_matmul_dtype_v =
    std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// Dimensions of one (possibly batched) matrix product: a [batch?, M, K] times b [batch?, K, N].
struct gemm_dims {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  bool batched = false;  ///< the result is rank 3 [batch, M, N]
};

// A rank-2 or rank-3 operand's matrix extents and strides (batch stride 0 when it has no batch).
struct matrix_layout {
  std::int64_t batch = 1, rows = 0, cols = 0;
  std::int64_t batch_stride = 0, row_stride = 0, col_stride = 0;
};
template <class T>
matrix_layout matrix_of(const view<T>& v) {
  matrix_layout L;
  const int r = v.rank();
  L.rows = v.shape()[r - 2];
  L.cols = v.shape()[r - 1];
  L.row_stride = v.strides()[r - 2];
  L.col_stride = v.strides()[r - 1];
  if (r == 3) {
    L.batch = v.shape()[0];
    L.batch_stride = L.batch == 1 ? 0 : v.strides()[0];
  }
  return L;
}

inline std::string operand_desc(const char* dtype, const shape_t& s, const strides_t& st) {
  return std::string(dtype) + " " + s.str() + " strides " + st.str();
}

/// Checks the operands of a product and returns its dimensions; throws fusex::shape_error naming
/// both operands when ranks, inner dimensions or batch dimensions do not match.
template <class T>
gemm_dims check_gemm(const char* who, const view<const T>& a, const view<const T>& b) {
  auto both = [&] {
    return operand_desc(dtype_name<T>(), a.shape(), a.strides()) + " and " +
           operand_desc(dtype_name<T>(), b.shape(), b.strides());
  };
  if (a.rank() < 2 || a.rank() > 3 || b.rank() < 2 || b.rank() > 3) {
    throw shape_error(std::string("fusex::") + who +
                      ": operands must be 2-D matrices or 3-D batches of matrices; got " + both());
  }
  const matrix_layout la = matrix_of(a), lb = matrix_of(b);
  if (la.cols != lb.rows) {
    throw shape_error(std::string("fusex::") + who + ": inner dimensions do not match (" + std::to_string(la.cols) +
                      " vs " + std::to_string(lb.rows) + "): " + both());
  }
  gemm_dims g;
  g.m = la.rows;
  g.n = lb.cols;
  g.k = la.cols;
  g.batched = a.rank() == 3 || b.rank() == 3;
  if (la.batch != lb.batch && la.batch != 1 && lb.batch != 1) {
    throw shape_error(std::string("fusex::") + who + ": batch dimensions do not match (" + std::to_string(la.batch) +
                      " vs " + std::to_string(lb.batch) + "): " + both());
  }
  g.batch = la.batch == 1 ? lb.batch : la.batch;  // a batch of 1 broadcasts (also to 0)
  return g;
}
}  // namespace detail

/// A matrix product a x b as an expression node: a [M, K] or [B, M, K], b [K, N] or [B, K, N]
/// (a batch of 1 broadcasts). Its value type is the operands' type; products accumulate in
/// float32, and the result stays in float32 through the rest of the expression (the epilogue)
/// until it is stored, as every fusex intermediate does. Build it with fusex::matmul.
template <class T>
struct matmul_node : detail::expr_base {
  static_assert(detail::is_matmul_dtype_v<T>,
                "fusex::matmul: operands must be float, fusex::half or fusex::bfloat16 (float32 accumulation)");
  using value_type = T;
  /// The operands are not elementwise leaves: an epilogue's leaves are the other views.
  static constexpr int leaf_count = 0;
  static constexpr int reduce_count = 0;

  view<const T> a;
  view<const T> b;
  matmul_options options;
  detail::gemm_dims dims;

  matmul_node(view<const T> a_, view<const T> b_, matmul_options o, const char* who = "matmul")
      : a(a_), b(b_), options(o), dims(detail::check_gemm<T>(who, a_, b_)) {}

  /// The same product (expr/detail/share.hpp): the same operand views and options. An expression
  /// may use one product several times (`h = linear(...); h * sigmoid(h)`).
  bool same_data(const matmul_node& o) const {
    const auto same_view = [](const view<const T>& x, const view<const T>& y) {
      return x.data() == y.data() && x.shape() == y.shape() && x.strides() == y.strides();
    };
    return same_view(a, o.a) && same_view(b, o.b) && options.allow_tf32 == o.options.allow_tf32 &&
           options.path == o.options.path && options.float32_intermediate == o.options.float32_intermediate;
  }

  /// [M, N], or [batch, M, N] when an operand is batched.
  shape_t shape() const {
    if (dims.batched) return shape_t{dims.batch, dims.m, dims.n};
    return shape_t{dims.m, dims.n};
  }
};

namespace detail {
// --- the matmul node of an expression ---------------------------------------------------------------
template <class N, class... K>
struct matmul_count_f : sum_of<K...> {};
template <class T>
struct matmul_count_f<matmul_node<T>> : std::integral_constant<int, 1> {};
/// Number of matmul nodes in an expression type.
template <class E>
inline constexpr int matmul_count_v = fold_type_t<std::decay_t<E>, matmul_count_f>::value;

template <class N, class... K>
struct matmul_types_f : type_lists_merge<K...> {};
template <class T>
struct matmul_types_f<matmul_node<T>> {
  using type = type_list<matmul_node<T>>;
};
/// Whether an expression type has matmul nodes, all of one type: it may compute one product (used
/// any number of times; find_matmul checks at run time that they are one).
template <class E>
inline constexpr bool one_matmul_v = fold_type_t<std::decay_t<E>, matmul_types_f>::size == 1;

template <class A, class... R>
struct first_non_void {
  using type = std::conditional_t<std::is_void_v<A>, typename first_non_void<R...>::type, A>;
};
template <class A>
struct first_non_void<A> {
  using type = A;
};
template <class N, class... K>
struct matmul_type_f : first_non_void<K...> {};
template <class N>
struct matmul_type_f<N> {
  using type = void;
};
template <class T>
struct matmul_type_f<matmul_node<T>> {
  using type = matmul_node<T>;
};
/// The matmul_node<T> type inside an expression type (void when there is none).
template <class E>
using matmul_type_t = fold_type_t<std::decay_t<E>, matmul_type_f>;

template <class M>
struct matmul_finder {
  const M* found = nullptr;
  bool several = false;  // another product than the first
  void operator()(const M& n, int) {
    if (found == nullptr) found = &n;
    else if (!same_value(*found, n)) several = true;
  }
  template <class N>
  int operator()(const N&, int) const {
    return 0;
  }
};
/// The one matmul product of an expression (its first node; the others must be the same product:
/// fusex::invalid_argument otherwise).
template <class E>
const matmul_type_t<E>& find_matmul(const E& e) {
  matmul_finder<matmul_type_t<E>> f;
  visit_tree(e, f, 0);
  if (f.several) {
    throw invalid_argument("fusex: an expression may contain one matmul product (used any number of times); this one "
                           "has several different ones: evaluate the others into tensors first");
  }
  return *f.found;
}

/// The expression with its matmul node replaced by the leaf `leaf`.
template <class L>
struct matmul_replacer : rebuild_tree {
  const L& leaf;
  using rebuild_tree::operator();
  template <class T>
  L operator()(const matmul_node<T>&) const {
    return leaf;
  }
};
template <class L, class E>
auto replace_matmul(const E& e, const L& leaf) {
  matmul_replacer<L> r{{}, leaf};
  return fold_tree(e, r);
}
/// The expression type E with its matmul node replaced by the leaf type L.
template <class E, class L>
using with_leaf_t = fold_tree_t<E, matmul_replacer<L>>;

// A 2-D or 3-D view of any supported element type as a view of const T (operands of matmul).
template <class X>
auto as_matmul_operand(const X& x) {
  using D = std::decay_t<X>;
  if constexpr (is_view<D>::value) {
    return view<const typename D::value_type>(x);
  } else if constexpr (is_tensor<D>::value) {
    return view<const typename D::value_type>(x.view());
  } else {
    static_assert(is_view<D>::value || is_tensor<D>::value,
                  "fusex::matmul / fusex::linear: operands must be fusex::view or fusex::tensor (matrices)");
    return view<const float>();
  }
}
}  // namespace detail

}  // namespace fusex
