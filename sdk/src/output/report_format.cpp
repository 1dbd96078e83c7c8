#include "output/report_format.hpp"

#include <charconv>
#include <cmath>

namespace selfperf::detail {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

std::string decimal(unsigned __int128 value) {
  if (value == 0) return "0";
  std::string digits;
  for (; value != 0; value /= 10) digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(value % 10)));
  return digits;
}

std::string event_unit(std::string_view event) {
  const std::string_view base = event.substr(0, event.find(':'));
  return base == "task-clock" || base == "cpu-clock" ? "ns" : "count";
}

}  // namespace selfperf::detail
