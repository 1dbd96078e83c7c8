#include <doctest.h>
#include "selfperf/error.hpp"
TEST_CASE("error keeps errno") { selfperf::Error e("x", 5); CHECK(e.errno_value() == 5); }
