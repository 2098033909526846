#pragma once
/// \file
/// The definitions behind core/shape.hpp: broadcasting and its error text.
/// Included by <fusex/core/shape.hpp> where FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in
/// nvcc's device pass, and, under FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>

#include <string>

namespace fusex {

FUSEX_DECL shape_t broadcast_shapes(const shape_t& a, const shape_t& b, const char* context) {
  const int r = a.rank() > b.rank() ? a.rank() : b.rank();
  shape_t out = dims::filled(r, 1);
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const std::int64_t ea = ia >= 0 ? a[ia] : 1, eb = ib >= 0 ? b[ib] : 1;
    if (ea == eb || eb == 1) {
      out[i] = ea;
    } else if (ea == 1) {
      out[i] = eb;
    } else {
      std::string m = "fusex: shapes " + a.str() + " and " + b.str() + " cannot be broadcast";
      if (context) m += std::string(" in '") + context + "'";
      m += " (dimension " + std::to_string(i - r) + ": " + std::to_string(ea) + " vs " + std::to_string(eb) + ")";
      throw shape_error(m);
    }
  }
  return out;
}

FUSEX_DECL shape_error broadcast_error(const char* what, const shape_t& s, const shape_t& to) {
  return shape_error(std::string("fusex: ") + what + " of shape " + s.str() + " cannot be broadcast to " + to.str());
}

}  // namespace fusex
