#pragma once
// Catch2 v2/v3 compatibility for the fusex tests.
#if defined(FUSEX_CATCH2_V3)
#include <catch2/catch_approx.hpp>
#include <catch2/catch_template_test_macros.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#else
#include <catch2/catch.hpp>
#endif
