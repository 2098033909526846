#pragma once
// A fixture for the `layers.catches_upward_include` test (never compiled).
#include <fusex/config.hpp>
