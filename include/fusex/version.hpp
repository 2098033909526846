#pragma once
/// \file
/// The library version, defined once here; CMake and conanfile.py read it from this file.

#define FUSEX_VERSION_MAJOR 0
#define FUSEX_VERSION_MINOR 1
#define FUSEX_VERSION_PATCH 0

/// Single integer for preprocessor comparisons: MAJOR * 10000 + MINOR * 100 + PATCH.
#define FUSEX_VERSION (FUSEX_VERSION_MAJOR * 10000 + FUSEX_VERSION_MINOR * 100 + FUSEX_VERSION_PATCH)

namespace fusex {
/// The version as a string, "MAJOR.MINOR.PATCH".
inline constexpr const char* version_string = "0.1.0";
}  // namespace fusex
