#pragma once
/// \file
/// The row kernel's register cache: which leaf of an expression fills its type's registers and
/// which leaves read them. One algorithm, used twice: by the planner on the real operands (at run
/// time) and on the roles an expression's structure predicts (at compile time, so that the
/// common case runs a kernel whose roles are constants).

#include <cstdint>

namespace fusex::detail {

/// Cache roles of a leaf (two bits per leaf in visit order, in row_params::cache_modes).
/// leaf_prefetch reads memory too, but asks for its line into L1 when the owners fill, so that
/// the epilogue's read after the passes does not wait a second memory round trip.
enum : int { leaf_uncached = 0, leaf_cache_reader = 1, leaf_cache_owner = 2, leaf_prefetch = 3 };

/// The cached row keeps one vector set per leaf type. Per type, the operand written most often
/// among leaves 0..min(n, 32)-1 owns it (ties: the first visited); its other occurrences read the
/// same registers, operands of the same type that differ read memory. `usable(i)`: leaf i may use
/// the registers at all; `same_type(a, b)` and `same_operand(a, b)` for two usable leaves.
/// Returns two bits per leaf (leaves past 31 read memory) and counts the leaves answered from
/// registers.
template <class Usable, class SameType, class SameOperand>
constexpr std::uint64_t cache_roles(int n, const Usable& usable, const SameType& same_type,
                                    const SameOperand& same_operand, int& cached_leaves) {
  const int m = n < 32 ? n : 32;
  std::uint64_t modes = 0;
  cached_leaves = 0;
  for (int i = 0; i < m; ++i) {
    if (!usable(i)) continue;
    bool type_seen = false;
    for (int j = 0; j < i && !type_seen; ++j) type_seen = usable(j) && same_type(i, j);
    if (type_seen) continue;
    int owner = -1, best = 0;
    for (int j = i; j < m; ++j) {
      if (!usable(j) || !same_type(i, j)) continue;
      int count = 0;
      for (int t = i; t < m; ++t) count += usable(t) && same_operand(j, t) ? 1 : 0;
      if (count > best) {
        best = count;
        owner = j;
      }
    }
    for (int t = i; t < m; ++t) {
      if (!usable(t) || !same_operand(owner, t)) continue;
      modes |= static_cast<std::uint64_t>(t == owner ? leaf_cache_owner : leaf_cache_reader) << (2 * t);
      ++cached_leaves;
    }
  }
  return modes;
}

}  // namespace fusex::detail
