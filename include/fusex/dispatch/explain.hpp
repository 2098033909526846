#pragma once
/// \file
/// The plan printer behind fusex::explain: the index space, access and index widths, the strategy
/// (elementwise, row kernel or materialised reductions) and the expression tree with each leaf's
/// layout. Plans exactly as dispatch does; launches nothing.

#include <fusex/dispatch/elementwise.hpp>
#include <fusex/dispatch/plan_text.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fusex::detail {

// --- the plan printer ----------------------------------------------------------------------------
inline void indent(std::string& out, int depth) { out.append(static_cast<std::size_t>(depth) * 2, ' '); }

/// Prints an expression tree, one node per line indented by its depth (a visit_tree visitor). With
/// `leaf` pointing at the planned operands (in visit order), leaves show their planned layout and
/// whether they broadcast to `full`; without, their own view. Terminals of other layers (matmul)
/// describe themselves through an overload of describe_terminal(node, const tree_printer&) (found
/// by argument-dependent lookup through the printer). A value computed once for several uses
/// (expr/detail/share.hpp, `shares`) is printed once, with its number of uses; its later uses are
/// one line each. The context is the depth, negative below such a line (nothing printed).
struct tree_printer {
  std::string& out;
  const operand_layout* leaf = nullptr;
  const shape_t* full = nullptr;
  const share_entry* shares = nullptr;
  int n_shares = 0;

  // The node's line, and the depth for its children.
  int line(int depth, const void* node, const std::string& text) {
    if (depth < 0) return depth;
    indent(out, depth);
    for (int i = 0; i < n_shares; ++i) {
      const share_entry& x = shares[i];
      if (x.node != node) continue;
      if (x.role == share_reuse) {
        out += text + (x.reduction ? " (the same reduction as above: computed once)\n"
                                   : " (the shared value above, not computed again)\n");
        return -1;
      }
      if (x.role == share_store) {
        out += text + " [shared: computed once, " + std::to_string(x.uses) + " uses]\n";
        return depth + 1;
      }
    }
    out += text + '\n';
    return depth + 1;
  }

  template <class T>
  void operator()(const leaf_node<T>& n, int depth) {
    std::string text;
    if (leaf != nullptr) {
      const operand_layout& o = *leaf++;
      text = "view " + operand_text(o);
      if (full != nullptr && o.shape != *full) text += " (broadcast)";
    } else {
      text = std::string("view ") + dtype_name<typename leaf_node<T>::value_type>() + " " + n.v.shape().str() +
             " strides " + n.v.strides().str();
    }
    line(depth, &n, text);
  }
  void operator()(const index_node& n, int depth) {
    // (The node knows its kind; operand_text guesses it from the strides.)
    std::string text = n.axis < 0 ? std::string("linear index") : "index along axis " + std::to_string(n.axis);
    if (leaf != nullptr) {
      const operand_layout& o = *leaf++;
      text += " of " + o.shape.str() + " (int64, computed)";
      if (full != nullptr && o.shape != *full) text += " (broadcast)";
    } else {
      text += " of " + n.extent.str() + " (int64, computed)";
    }
    line(depth, &n, text);
  }
  template <class T>
  void operator()(const scalar_node<T>& n, int depth) {
    line(depth, &n, std::string("scalar ") + dtype_name<T>() + " " + std::to_string(static_cast<double>(n.value)));
  }
  template <class Op, class... A>
  int operator()(const map_node<Op, A...>& n, int depth) {
    return line(depth, &n, std::string(Op::name) + " -> " + dtype_name<typename map_node<Op, A...>::value_type>());
  }
  template <class C>
  int operator()(const shared_node<C>& n, int depth) {
    return line(depth, &n, std::string("share -> ") + dtype_name<typename C::value_type>());
  }
  template <class Op, class C>
  int operator()(const reduce_node<Op, C>& n, int depth) {
    std::string text = std::string(Op::name) + " over axes [";
    bool first = true;
    for (int d = 0; d < max_rank; ++d)
      if (n.mask & (1u << d)) {
        text += (first ? "" : ", ") + std::to_string(d);
        first = false;
      }
    text += std::string("]") + (n.keep ? " keepdim" : "") + " -> " +
            dtype_name<typename reduce_node<Op, C>::value_type>();
    return line(depth, &n, text);
  }
  template <class N>
  void operator()(const N& n, int depth) {
    line(depth, &n, describe_terminal(n, *this));
  }
};
/// Appends the tree of `e` to `out` at indentation `depth`; returns the planned leaves after its own.
template <class E>
const operand_layout* describe_tree(const E& e, std::string& out, int depth,
                                    const operand_layout* planned_leaves = nullptr, const shape_t* full = nullptr) {
  const share_table<E> shares = share_roles(e);
  tree_printer p{out, planned_leaves, full, shares.e.data(), shares.size};
  visit_tree(e, p, depth);
  return p.leaf;
}

template <class... T, class... E>
std::string explain_reduce(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  std::vector<reduction_info> reds;
  (collect_reductions(exprs, reds), ...);
  std::string why = "several destinations";
  if constexpr (sizeof...(T) == 1) {
    const auto& dst = std::get<0>(dsts);
    const auto& e = std::get<0>(std::forward_as_tuple(exprs...));
    using Ev = evaluator_t<std::decay_t<decltype(e)>, std::int64_t>;
    auto ro = gather_row_operands(dst, e);
    constexpr int V = vector_width_of<std::tuple<view<T>...>, E...>::value;
    const int n_ops = static_cast<int>(ro.ops.size());
    const row_layout R = plan_rows(ro.ops.data(), ro.inside.data(), n_ops, reds, V);
    if (R.ok) {
      // (The launch's test: the shared values' lazy form on the evaluator tree, as launch_rows builds it.)
      leaf_strides_source<std::int64_t> src{ro.ops.data() + 1, 0, 0};
      (void)build_evaluator(e, src);
      const bool static_path = R.cached && src.shares_lazy &&
                               row_static_path(R, ro.ops.data(), n_ops, predicted_cache_modes<Ev>::value);
      std::string out = row_plan_text(R, ro.ops.data(), n_ops, reds.size(), reduction_depth<Ev>::value, static_path);
      describe_tree(e, out, 2, ro.ops.data() + 1, &R.full);
      return out;
    }
    why = R.why_not;
  }
  return generic_plan_text(reds, why);
}

template <class... T, class... E>
std::string explain_impl(const std::tuple<view<T>...>& dsts, const E&... exprs) {
  if constexpr ((0 + ... + E::reduce_count) > 0) return explain_reduce(dsts, exprs...);
  const auto pe = prepare(dsts, exprs...);
  const elementwise_layout& L = pe.layout;
  const std::size_t pieces =
      L.numel > 0 && L.index64 ? split_index32(L, pe.ops.data(), static_cast<int>(pe.ops.size())).size() : 1;
  std::string out = elementwise_plan_text(L, pieces, sizeof...(T));
  if (L.numel == 0) return out;
  const operand_layout* leaf = pe.ops.data() + sizeof...(T);
  int i = 0;
  auto one = [&](const auto& e) {
    out += "  destination " + std::to_string(i) + ": " + operand_text(pe.ops[static_cast<std::size_t>(i)]) + " <-\n";
    leaf = describe_tree(e, out, 2, leaf, &L.shape);
    ++i;
  };
  (one(exprs), ...);
  return out;
}

}  // namespace fusex::detail
