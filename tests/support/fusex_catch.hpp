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

#include <string>

/// Sets a run-time switch (a tuning field) to `value` for a scope and restores its old value on
/// the way out, also when the test throws.
template <class T>
class scoped_setting {
 public:
  scoped_setting(T& field, T value) : field_(field), old_(field) { field_ = value; }
  ~scoped_setting() { field_ = old_; }
  scoped_setting(const scoped_setting&) = delete;
  scoped_setting& operator=(const scoped_setting&) = delete;

 private:
  T& field_;
  T old_;
};

/// The message of the exception of type E that f throws (a test failure when none is thrown).
template <class E, class F>
std::string thrown_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("no exception of the expected type");
  return {};
}
