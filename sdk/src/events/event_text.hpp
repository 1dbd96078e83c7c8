#pragma once
// Small text helpers shared by the event parser: quoting user input in messages, names, numbers.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace selfperf::detail {

// Longest event text the parser looks at; anything longer is refused before any work is done.
inline constexpr std::size_t kMaxEventText = 4096;

// 'text' for an error message: non-printable bytes escaped as \xNN, very long input shortened.
std::string quote_text(std::string_view text);

// A PMU, format term, alias or tracepoint name: [A-Za-z0-9_.-]+, not starting with '.', so that it can
// never step outside the directory it is looked up in.
bool is_plain_name(std::string_view name) noexcept;

// Decimal or 0x-prefixed hex, the whole string, no sign, no overflow.
std::optional<std::uint64_t> parse_number(std::string_view text) noexcept;

std::string hex(std::uint64_t value);

// "a, b, c" with at most `max_items` shown and "and N more" after them.
std::string join_names(const std::vector<std::string>& names, std::size_t max_items = 30);

std::string_view trim(std::string_view text) noexcept;

}  // namespace selfperf::detail
