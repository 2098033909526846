#pragma once
// A fixture for `layers.catches_missing_header` (never compiled).
#include <fusex/core/no_such_header.hpp>
