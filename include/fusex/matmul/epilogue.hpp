#pragma once
/// \file
/// Epilogue analysis: does the elementwise expression around a matmul map onto cuBLASLt's own
/// epilogue, D = act(alpha * A B + beta * C + bias)?
///
/// Two steps. describe_epilogue() walks the expression type once (the structure is fixed at
/// compile time; scalar coefficients are read at run time) and writes an epilogue_form: an
/// optional cast at the root, an optional activation (relu or gelu_tanh), and a linear
/// combination of terms, each the GEMM or a view. classify_epilogue() is a plain function of
/// that form and the destination's layout: it decides which term is the bias (a vector along the
/// rows or the columns) and which the residual C, checks dtypes and strides, and returns either
/// the cuBLASLt parameters or the reason it cannot map. Neither needs CUDA devices or cuBLAS, so
/// the host tests check the mapping rules directly.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/expr/index.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/ops.hpp>
#include <fusex/expr/reduce.hpp>
#include <fusex/matmul/node.hpp>

#include <fusex/core/detail/tuple.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex::detail {

/// The activations cuBLASLt applies in its epilogue.
enum class epilogue_activation { none, relu, gelu_tanh };

/// A view in an epilogue, as the classifier sees it.
struct epilogue_operand {
  const void* data = nullptr;
  int elem_size = 0;
  dtype_id dtype = dtype_id::user;
  shape_t shape;
  strides_t strides;
};

/// One term of the linear combination: coefficient times the GEMM or a view.
struct epilogue_term {
  bool gemm = false;
  double coeff = 1;
  epilogue_operand operand;  ///< the view (when !gemm)
};

inline constexpr int max_epilogue_terms = 4;

/// The structure of an epilogue: cast?(activation?(sum of coefficient * term)).
struct epilogue_form {
  bool affine = true;        ///< the expression has that structure
  const char* why_not = "";  ///< the first construct that does not (static text)
  const char* why_op = "";   ///< the op concerned, when there is one
  epilogue_activation act = epilogue_activation::none;
  bool has_cast = false;                 ///< a cast at the root...
  dtype_id cast_dtype = dtype_id::user;  ///< ...to this dtype
  int n_terms = 0;
  epilogue_term terms[max_epilogue_terms];

  void fail(const char* why, const char* op = "") {
    if (!affine) return;
    affine = false;
    why_not = why;
    why_op = op;
  }
  void add(const epilogue_term& t) {
    if (n_terms == max_epilogue_terms) fail("more terms than GEMM + bias + residual");
    else terms[n_terms++] = t;
  }
};

template <class N>
struct is_scalar_node : std::false_type {};
template <class T>
struct is_scalar_node<scalar_node<T>> : std::true_type {};

// --- the walk ----------------------------------------------------------------------------------
template <class T>
void affine_terms(const leaf_node<T>& n, double c, epilogue_form& f) {
  epilogue_term t;
  t.coeff = c;
  t.operand.data = n.v.data();
  t.operand.elem_size = static_cast<int>(sizeof(T));
  t.operand.dtype = dtype_of<std::remove_const_t<T>>();
  t.operand.shape = n.v.shape();
  t.operand.strides = n.v.strides();
  f.add(t);
}
template <class T>
void affine_terms(const scalar_node<T>&, double, epilogue_form& f) {
  f.fail("an added constant (cuBLASLt's epilogue has no constant term)");
}
template <class T>
void affine_terms(const matmul_node<T>&, double c, epilogue_form& f) {
  epilogue_term t;
  t.gemm = true;
  t.coeff = c;
  f.add(t);
}
inline void affine_terms(const index_node&, double, epilogue_form& f) {
  f.fail("an index leaf (its values are computed, not a bias cuBLASLt can read)");
}
template <class Op, class C>
void affine_terms(const reduce_node<Op, C>&, double, epilogue_form& f) {
  f.fail("a reduction", Op::name);
}
template <class Op, class... A>
void affine_terms(const map_node<Op, A...>& n, double c, epilogue_form& f) {
  constexpr std::size_t arity = sizeof...(A);
  if constexpr (std::is_same_v<Op, ops::add> && arity == 2) {
    affine_terms(fusex::detail::get<0>(n.args), c, f);
    affine_terms(fusex::detail::get<1>(n.args), c, f);
  } else if constexpr (std::is_same_v<Op, ops::sub> && arity == 2) {
    affine_terms(fusex::detail::get<0>(n.args), c, f);
    affine_terms(fusex::detail::get<1>(n.args), -c, f);
  } else if constexpr (std::is_same_v<Op, ops::neg>) {
    affine_terms(fusex::detail::get<0>(n.args), -c, f);
  } else if constexpr (std::is_same_v<Op, ops::mul> && arity == 2) {
    using A0 = std::decay_t<decltype(fusex::detail::get<0>(n.args))>;
    using A1 = std::decay_t<decltype(fusex::detail::get<1>(n.args))>;
    if constexpr (is_scalar_node<A0>::value) {
      affine_terms(fusex::detail::get<1>(n.args), c * static_cast<double>(fusex::detail::get<0>(n.args).value), f);
    } else if constexpr (is_scalar_node<A1>::value) {
      affine_terms(fusex::detail::get<0>(n.args), c * static_cast<double>(fusex::detail::get<1>(n.args).value), f);
    } else {
      f.fail("a product of two tensors (only a scalar scale maps, onto alpha and beta)", Op::name);
    }
  } else if constexpr (std::is_same_v<Op, ops::div> && arity == 2) {
    using A1 = std::decay_t<decltype(fusex::detail::get<1>(n.args))>;
    if constexpr (is_scalar_node<A1>::value) {
      affine_terms(fusex::detail::get<0>(n.args), c / static_cast<double>(fusex::detail::get<1>(n.args).value), f);
    } else {
      f.fail("a division by a tensor", Op::name);
    }
  } else if constexpr (std::is_same_v<Op, ops::relu> || std::is_same_v<Op, ops::gelu_tanh>) {
    f.fail("an activation below a sum or a scale (cuBLASLt applies its activation last)", Op::name);
  } else if constexpr (std::is_same_v<Op, ops::gelu>) {
    f.fail("gelu in its erf form (cuBLASLt's GELU epilogue is the tanh approximation: write gelu_tanh to map)",
           Op::name);
  } else {
    f.fail("an op that is not one of cuBLASLt's epilogues (bias, relu, gelu_tanh, alpha, beta)", Op::name);
  }
}

template <class E>
void activation_level(const E& e, epilogue_form& f) {
  affine_terms(e, 1.0, f);
}
template <class Op, class... A>
void activation_level(const map_node<Op, A...>& n, epilogue_form& f) {
  if constexpr (std::is_same_v<Op, ops::relu>) {
    f.act = epilogue_activation::relu;
    affine_terms(fusex::detail::get<0>(n.args), 1.0, f);
  } else if constexpr (std::is_same_v<Op, ops::gelu_tanh>) {
    f.act = epilogue_activation::gelu_tanh;
    affine_terms(fusex::detail::get<0>(n.args), 1.0, f);
  } else {
    affine_terms(n, 1.0, f);
  }
}

template <class E>
void cast_level(const E& e, epilogue_form& f) {
  activation_level(e, f);
}
template <class T, class X>
void cast_level(const map_node<ops::cast<T>, X>& n, epilogue_form& f) {
  f.has_cast = true;
  f.cast_dtype = dtype_of<T>();
  activation_level(fusex::detail::get<0>(n.args), f);
}

/// The structure of the epilogue around the one matmul node of `e`.
template <class E>
epilogue_form describe_epilogue(const E& e) {
  epilogue_form f;
  cast_level(e, f);
  return f;
}

// --- peeling: the part of an epilogue one cuBLASLt call can compute --------------------------------
// When the whole epilogue does not map (path 3), the largest subtree on the way from the root to
// the GEMM that has cuBLASLt's form is computed by cuBLASLt straight into the destination, and the
// rest of the expression, with that subtree replaced by a view of the destination, by one
// elementwise kernel in place. The subtree is chosen from the expression's type (the topmost
// node below the root, on the path to the GEMM, with that form); whether it maps is decided at
// run time by classify_epilogue, as for the whole expression.

/// Whether a node type has the form of cuBLASLt's affine part: a sum of terms c * GEMM or c * view
/// (scalar scales, +, -, unary -).
template <class N>
struct lt_affine_form : std::false_type {};
template <class T>
struct lt_affine_form<matmul_node<T>> : std::true_type {};
template <class T>
struct lt_affine_form<leaf_node<T>> : std::true_type {};
template <class A, class B>
struct lt_affine_form<map_node<ops::add, A, B>>
    : std::bool_constant<lt_affine_form<A>::value && lt_affine_form<B>::value> {};
template <class A, class B>
struct lt_affine_form<map_node<ops::sub, A, B>>
    : std::bool_constant<lt_affine_form<A>::value && lt_affine_form<B>::value> {};
template <class A>
struct lt_affine_form<map_node<ops::neg, A>> : lt_affine_form<A> {};
template <class A, class B>
struct lt_affine_form<map_node<ops::mul, A, B>>
    : std::bool_constant<(is_scalar_node<A>::value && lt_affine_form<B>::value) ||
                         (lt_affine_form<A>::value && is_scalar_node<B>::value)> {};
template <class A, class B>
struct lt_affine_form<map_node<ops::div, A, B>>
    : std::bool_constant<lt_affine_form<A>::value && is_scalar_node<B>::value> {};

/// Whether a node type has the form one cuBLASLt call computes: the affine part, or relu /
/// gelu_tanh of it.
template <class N>
struct lt_call_form : lt_affine_form<N> {};
template <class X>
struct lt_call_form<map_node<ops::relu, X>> : lt_affine_form<X> {};
template <class X>
struct lt_call_form<map_node<ops::gelu_tanh, X>> : lt_affine_form<X> {};

/// Whether a child node is where the peeled part begins: it contains the GEMM and has cuBLASLt's
/// form (checked from the top, so the first such node on the path is the largest part).
template <class C>
inline constexpr bool peel_here_v = matmul_count_v<C> == 1 && lt_call_form<C>::value;

/// Whether an expression type has a part to peel: a map node (not a reduction) above the GEMM.
/// Every such expression has one (the GEMM itself at least).
template <class E>
struct has_peel : std::false_type {};
template <class Op, class... A>
struct has_peel<map_node<Op, A...>>
    : std::bool_constant<map_node<Op, A...>::reduce_count == 0 && matmul_count_v<map_node<Op, A...>> == 1> {};

// The type of a node below the root with the peeled part replaced by the leaf type L.
template <class N, class L>
struct peeled_below {
  using type = N;
};
template <class C, class L>
struct peeled_child {
  using type = std::conditional_t<matmul_count_v<C> == 0, C,
                                  std::conditional_t<peel_here_v<C>, L, typename peeled_below<C, L>::type>>;
};
template <class Op, class... A, class L>
struct peeled_below<map_node<Op, A...>, L> {
  using type = map_node<Op, typename peeled_child<A, L>::type...>;
};
/// The expression type E (has_peel) with its peeled part replaced by the leaf type L.
template <class E, class L>
using peeled_t = typename peeled_below<E, L>::type;

template <class L, class C>
typename peeled_child<C, L>::type peel_child(const C& c, const L& leaf);
template <class L, class Op, class... A>
peeled_t<map_node<Op, A...>, L> peel_rest(const map_node<Op, A...>& e, const L& leaf);
template <class L, class Op, class... A, std::size_t... I>
peeled_t<map_node<Op, A...>, L> peel_map(const map_node<Op, A...>& n, const L& leaf, std::index_sequence<I...>) {
  return peeled_t<map_node<Op, A...>, L>{n.op, peel_child(fusex::detail::get<I>(n.args), leaf)...};
}
template <class L, class C>
typename peeled_child<C, L>::type peel_child(const C& c, const L& leaf) {
  if constexpr (matmul_count_v<C> == 0) {
    (void)leaf;
    return c;
  } else if constexpr (peel_here_v<C>) {
    (void)c;
    return leaf;
  } else {
    return peel_rest(c, leaf);
  }
}
/// The rest of the epilogue: `e` (has_peel) with its peeled part replaced by `leaf`.
template <class L, class Op, class... A>
peeled_t<map_node<Op, A...>, L> peel_rest(const map_node<Op, A...>& e, const L& leaf) {
  return peel_map(e, leaf, std::index_sequence_for<A...>{});
}

template <class F, class C>
void visit_peel_child(const C& c, F& f);
template <class F, class Op, class... A>
void visit_peel(const map_node<Op, A...>& e, F&& f);
template <class F, class Op, class... A, std::size_t... I>
void visit_peel_map(const map_node<Op, A...>& n, F& f, std::index_sequence<I...>) {
  (visit_peel_child(fusex::detail::get<I>(n.args), f), ...);
}
template <class F, class C>
void visit_peel_child(const C& c, F& f) {
  if constexpr (matmul_count_v<C> == 1) {
    if constexpr (peel_here_v<C>) {
      f(c);
    } else {
      visit_peel(c, f);
    }
  }
}
/// Calls f(part) with the peeled part of `e` (has_peel).
template <class F, class Op, class... A>
void visit_peel(const map_node<Op, A...>& e, F&& f) {
  visit_peel_map(e, f, std::index_sequence_for<A...>{});
}

// --- the classification --------------------------------------------------------------------------
/// The GEMM's result as it is to be stored: its dimensions, the operand and destination dtypes,
/// and the destination's layout (its shape is the GEMM's result shape).
struct gemm_output {
  gemm_dims dims;
  dtype_id in_dtype = dtype_id::user;
  dtype_id out_dtype = dtype_id::user;
  const void* out_data = nullptr;
  int out_elem_size = 0;
  shape_t out_shape;
  strides_t out_strides;
};

/// A matrix in the layout cuBLASLt sees (column-major): `ld` between columns, unit stride within a
/// column, `batch_stride` between matrices.
struct lt_matrix_desc {
  std::int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
};

/// An operand as cuBLASLt sees it: the stored column-major matrix, and whether it is transposed.
struct lt_operand {
  bool trans = false;
  lt_matrix_desc m;
};

/// A logical matrix [R, C] with element strides (sr, sc) as a column-major cuBLASLt operand
/// (op N when unit stride runs down the columns, op T when along the rows). False when neither
/// stride is 1 or the other stride is too small.
inline bool lt_operand_of(std::int64_t R, std::int64_t C, std::int64_t sr, std::int64_t sc, lt_operand& out) {
  const std::int64_t r1 = R > 1 ? R : 1, c1 = C > 1 ? C : 1;
  if (R <= 1 || sr == 1) {
    const std::int64_t ld = C > 1 ? sc : r1;
    if (ld >= r1) {
      out.trans = false;
      out.m.rows = R;
      out.m.cols = C;
      out.m.ld = ld;
      return true;
    }
  }
  if (C <= 1 || sc == 1) {
    const std::int64_t ld = R > 1 ? sr : c1;
    if (ld >= c1) {
      out.trans = true;
      out.m.rows = C;
      out.m.cols = R;
      out.m.ld = ld;
      return true;
    }
  }
  return false;
}

/// What classify_epilogue decided.
struct lt_epilogue_plan {
  bool ok = false;          ///< one cuBLASLt call computes the whole expression
  const char* why = "";     ///< when !ok: why not (static text)
  const char* why_op = "";  ///< the op concerned, when there is one
  epilogue_activation act = epilogue_activation::none;
  /// true: cuBLASLt computes the transpose D^T [N x M] (its rows are our columns; a row-major
  /// destination). false: D [M x N] directly (a column-major destination).
  bool n_rows = true;
  double alpha = 1, beta = 0;
  bool has_bias = false;
  bool bias_along_n = true;  ///< the bias is indexed by the column n (else by the row m)
  epilogue_operand bias;
  bool has_residual = false;
  epilogue_operand residual;
  lt_matrix_desc d, c;  ///< destination and residual, as cuBLASLt sees them
};

inline bool cublaslt_output_supported(dtype_id in, dtype_id out) {
  if (out == dtype_id::float32) return true;  // every input dtype may write float32
  return in == out;                           // float16 -> float16, bfloat16 -> bfloat16
}

// Strides of an operand in the output space [batch?, M, N], 0 where it is broadcast; false when
// it does not broadcast.
inline bool strides_in_output(const shape_t& s, const strides_t& st, const shape_t& out, std::int64_t (&o)[3]) {
  if (!broadcasts_to(s, out)) return false;
  const int R = out.rank();
  std::int64_t t[3] = {0, 0, 0};
  for (int d = 0; d < R; ++d) {
    const int j = d - (R - s.rank());
    t[d] = (j < 0 || s[j] != out[d]) ? 0 : st[j];
  }
  // As [batch, M, N].
  if (R == 2) {
    o[0] = 0;
    o[1] = t[0];
    o[2] = t[1];
  } else {
    o[0] = t[0];
    o[1] = t[1];
    o[2] = t[2];
  }
  return true;
}

// A matrix [M, N] (strides sm, sn) as cuBLASLt's column-major matrix: rows = N when n_rows (unit
// stride along n), rows = M otherwise. False when the strides do not allow it.
inline bool lt_matrix_of(std::int64_t M, std::int64_t N, std::int64_t sm, std::int64_t sn, bool n_rows,
                         lt_matrix_desc& out) {
  const std::int64_t rows = n_rows ? N : M, cols = n_rows ? M : N;
  const std::int64_t unit = n_rows ? sn : sm, lead = n_rows ? sm : sn;
  if (rows > 1 && unit != 1) return false;
  std::int64_t ld = cols > 1 ? lead : (rows > 1 ? rows : 1);
  if (ld < rows || ld < 1) return false;
  out.rows = rows;
  out.cols = cols;
  out.ld = ld;
  return true;
}

/// Maps an epilogue onto cuBLASLt's D = act(alpha A B + beta C + bias), or says why it cannot.
/// Pure host code, no CUDA calls.
inline lt_epilogue_plan classify_epilogue(const epilogue_form& f, const gemm_output& o) {
  lt_epilogue_plan p;
  auto no = [&p](const char* why, const char* op = "") {
    p.ok = false;
    p.why = why;
    p.why_op = op;
    return p;
  };
  if (!f.affine) return no(f.why_not, f.why_op);
  if (f.has_cast && f.cast_dtype != o.out_dtype && f.cast_dtype != dtype_id::float32 &&
      f.cast_dtype != dtype_id::float64) {
    return no("a cast to a dtype other than the destination's (it rounds before the store)", "cast");
  }
  if (!cublaslt_output_supported(o.in_dtype, o.out_dtype)) {
    return no(
        "cuBLASLt cannot write this destination dtype from these operands (float32 operands write "
        "float32; float16/bfloat16 write their own dtype or float32)");
  }
  p.act = f.act;
  const gemm_dims& g = o.dims;
  std::int64_t ds[3];
  if (!strides_in_output(o.out_shape, o.out_strides, o.out_shape, ds)) return no("internal: destination shape");
  const bool batched = g.batch > 1;

  // Sort the terms: the GEMM (alpha), at most one bias vector, at most one full-size residual.
  bool have_gemm = false;
  for (int i = 0; i < f.n_terms; ++i) {
    const epilogue_term& t = f.terms[i];
    if (t.gemm) {
      if (have_gemm) return no("the GEMM appears twice");
      have_gemm = true;
      p.alpha = t.coeff;
      continue;
    }
    std::int64_t s[3];
    if (!strides_in_output(t.operand.shape, t.operand.strides, o.out_shape, s)) {
      return no("an operand that does not broadcast to the destination");
    }
    const bool vb = batched && s[0] != 0, vm = g.m > 1 && s[1] != 0, vn = g.n > 1 && s[2] != 0;
    const bool full = (!batched || vb) && (g.m <= 1 || vm) && (g.n <= 1 || vn);
    if (full && !p.has_residual) {
      p.has_residual = true;
      p.residual = t.operand;
      p.beta = t.coeff;
      continue;
    }
    if (full) return no("two full-size residual operands");
    if (vb) return no("an operand that varies along the batch but is not a full-size residual");
    if (vm && vn) return no("a residual broadcast along the batch (cuBLASLt's C needs one matrix per batch)");
    if (!vm && !vn) return no("a broadcast single value (cuBLASLt's epilogue has no constant term)");
    if (p.has_bias) return no("two bias vectors");
    if (t.coeff != 1.0) return no("a scaled bias (cuBLASLt adds the bias unscaled)");
    if (t.operand.dtype != o.out_dtype) {
      return no("a bias whose dtype differs from the destination's (cuBLASLt reads the bias in the output dtype)");
    }
    if ((vn && s[2] != 1) || (vm && s[1] != 1)) return no("a bias vector that is not contiguous");
    p.has_bias = true;
    p.bias_along_n = vn;
    p.bias = t.operand;
  }
  if (!have_gemm) return no("internal: no GEMM term");

  // Orientation: cuBLASLt's bias runs along its rows, and its rows must have unit stride in D.
  lt_matrix_desc dn, dm;
  const bool can_n = lt_matrix_of(g.m, g.n, ds[1], ds[2], true, dn);
  const bool can_m = lt_matrix_of(g.m, g.n, ds[1], ds[2], false, dm);
  if (p.has_bias) {
    p.n_rows = p.bias_along_n;
    if (p.n_rows && !can_n) {
      return no("a bias along the columns needs a destination with unit stride along the columns");
    }
    if (!p.n_rows && !can_m) return no("a bias along the rows needs a destination with unit stride along the rows");
  } else {
    if (!can_n && !can_m) return no("a destination with unit stride in neither dimension");
    p.n_rows = can_n;
  }
  p.d = p.n_rows ? dn : dm;
  p.d.batch_stride = batched ? ds[0] : 0;
  if (batched && ds[0] < p.d.ld * p.d.cols) return no("a destination whose batch stride overlaps its matrices");

  if (p.has_residual) {
    if (p.residual.dtype != o.out_dtype) {
      return no("a residual whose dtype differs from the destination's (cuBLASLt's C has the output dtype)");
    }
    std::int64_t rs[3] = {};  // initialised: g++ -O3 cannot see that strides_in_output fills it
    (void)strides_in_output(p.residual.shape, p.residual.strides, o.out_shape, rs);
    if (!lt_matrix_of(g.m, g.n, rs[1], rs[2], p.n_rows, p.c)) {
      return no("a residual whose strides differ in orientation from the destination's");
    }
    p.c.batch_stride = batched ? rs[0] : 0;
    // In place (C is D) is fine with an identical layout; any other overlap would race.
    const char* d0 = static_cast<const char*>(o.out_data);
    const char* c0 = static_cast<const char*>(p.residual.data);
    const std::int64_t span_d = (g.batch - 1) * ds[0] + (g.m - 1) * ds[1] + (g.n - 1) * ds[2] + 1;
    const std::int64_t span_c = (g.batch - 1) * rs[0] + (g.m - 1) * rs[1] + (g.n - 1) * rs[2] + 1;
    const bool disjoint = c0 >= d0 + span_d * o.out_elem_size || d0 >= c0 + span_c * o.out_elem_size;
    const bool same = c0 == d0 && p.c.ld == p.d.ld && p.c.batch_stride == p.d.batch_stride;
    if (!disjoint && !same) return no("a residual that overlaps the destination other than element for element");
  } else {
    p.c = p.d;
  }
  p.ok = true;
  p.why = "";
  return p;
}

}  // namespace fusex::detail
