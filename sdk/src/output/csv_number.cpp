// csv_number alone in its file: std::to_chars(double) brings libstdc++'s floating_to_chars and with it libm
// (fegetround), which the preload library, linking libstdc++ in, would then load into every profiled process
// (0.3 ms of a short one's CPU) though it never writes a CSV.
#include "output/report_format.hpp"

#include <charconv>
#include <cmath>

namespace selfperf::detail {

std::string csv_number(double value) {
  if (!std::isfinite(value)) return "";
  char buf[32];
  // Plain notation for integral values below 2^53 ("1310295847", not "1.310295847e+09"); shortest round-trip
  // otherwise.
  const bool integral = value == std::floor(value) && std::fabs(value) < 9007199254740992.0;
  auto result = integral ? std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, 0)
                         : std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

}  // namespace selfperf::detail
