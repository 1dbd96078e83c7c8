#pragma once
// A PMU format term (`<pmu>/format/<term>`, e.g. "config:0-7,32-35"): which config word its bits live in
// and how a value is spread over them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace selfperf::detail {

struct FormatField {
  unsigned word = 0;       // 0: config, 1: config1, 2: config2
  std::uint64_t mask = 0;  // the bits of that word the term owns
  std::string text;        // the format file's content, for messages

  unsigned width() const noexcept;
  // Largest value the field holds.
  std::uint64_t max_value() const noexcept;
  bool fits(std::uint64_t value) const noexcept { return value <= max_value(); }
  // Value bit i goes to the i-th lowest bit of the mask, as perf and the kernel's format strings mean it.
  std::uint64_t deposit(std::uint64_t value) const noexcept;
};

// "config:0-7", "config1:0-15", "config:23", "config:0-7,32-35". nullopt when malformed or for a config
// word EventSpec does not carry (config3).
std::optional<FormatField> parse_format_field(std::string_view text);

}  // namespace selfperf::detail
