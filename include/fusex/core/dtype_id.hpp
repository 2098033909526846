#pragma once
/// \file
/// fusex::dtype_id: an element type as a value, for the host planners (they compare and print
/// dtypes without the CUDA half/bfloat16 headers that <fusex/core/dtype.hpp> needs).

namespace fusex {

/// An element type as a value: what plans compare and print (`user` for any other type).
enum class dtype_id : unsigned char { float32, float64, float16, bfloat16, int8, uint8, int32, int64, boolean, user };

/// The name of an element type, as the plan printer and error messages show it.
constexpr const char* dtype_name(dtype_id d) {
  switch (d) {
    case dtype_id::float32: return "float32";
    case dtype_id::float64: return "float64";
    case dtype_id::float16: return "float16";
    case dtype_id::bfloat16: return "bfloat16";
    case dtype_id::int8: return "int8";
    case dtype_id::uint8: return "uint8";
    case dtype_id::int32: return "int32";
    case dtype_id::int64: return "int64";
    case dtype_id::boolean: return "bool";
    case dtype_id::user: break;
  }
  return "user type";
}

}  // namespace fusex
