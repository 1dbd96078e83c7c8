#include "events/pmu_format.hpp"

#include <bit>

#include "events/event_text.hpp"

namespace selfperf::detail {

unsigned FormatField::width() const noexcept { return static_cast<unsigned>(std::popcount(mask)); }

std::uint64_t FormatField::max_value() const noexcept {
  unsigned w = width();
  return w >= 64 ? UINT64_MAX : (std::uint64_t{1} << w) - 1;
}

std::uint64_t FormatField::deposit(std::uint64_t value) const noexcept {
  std::uint64_t out = 0;
  unsigned next = 0;
  for (unsigned bit = 0; bit < 64; ++bit) {
    if (!((mask >> bit) & 1u)) continue;
    if ((value >> next) & 1u) out |= std::uint64_t{1} << bit;
    ++next;
  }
  return out;
}

std::optional<FormatField> parse_format_field(std::string_view text) {
  FormatField f;
  f.text = std::string(text);
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view word = text.substr(0, colon);
  if (word == "config")
    f.word = 0;
  else if (word == "config1")
    f.word = 1;
  else if (word == "config2")
    f.word = 2;
  else
    return std::nullopt;
  std::string_view ranges = text.substr(colon + 1);
  if (ranges.empty()) return std::nullopt;
  while (true) {
    auto comma = ranges.find(',');
    std::string_view range = ranges.substr(0, comma);
    auto dash = range.find('-');
    // Bit numbers are plain decimal here; parse_number would also take hex, which sysfs never writes.
    auto decimal = [](std::string_view s) -> std::optional<std::uint64_t> {
      if (s.empty() || s.size() > 2 || s.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
      return parse_number(s);
    };
    auto lo = decimal(range.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : decimal(range.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > 63) return std::nullopt;
    for (std::uint64_t b = *lo; b <= *hi; ++b) f.mask |= std::uint64_t{1} << b;
    if (comma == std::string_view::npos) break;
    ranges.remove_prefix(comma + 1);
  }
  return f;
}

}  // namespace selfperf::detail
