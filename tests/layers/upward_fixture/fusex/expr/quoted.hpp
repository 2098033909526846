#pragma once
// A fixture for `layers.catches_quoted_include` (never compiled): a relative include would bypass
// the layer table.
#include "../memory/allocator.hpp"
