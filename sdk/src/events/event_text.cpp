#include "events/event_text.hpp"

#include <cstdio>

namespace selfperf::detail {

std::string quote_text(std::string_view text) {
  // Messages stay readable even when someone passes a megabyte or binary garbage.
  constexpr std::size_t kShown = 200;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  out += "'";
  if (text.size() > kShown) out += " (" + std::to_string(text.size()) + " bytes, shortened)";
  return out;
}

bool is_plain_name(std::string_view name) noexcept {
  if (name.empty() || name.front() == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::optional<std::uint64_t> parse_number(std::string_view text) noexcept {
  unsigned base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    unsigned digit;
    if (c >= '0' && c <= '9')
      digit = static_cast<unsigned>(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f')
      digit = static_cast<unsigned>(c - 'a' + 10);
    else if (base == 16 && c >= 'A' && c <= 'F')
      digit = static_cast<unsigned>(c - 'A' + 10);
    else
      return std::nullopt;
    if (value > (UINT64_MAX - digit) / base) return std::nullopt;
    value = value * base + digit;
  }
  return value;
}

std::string hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string join_names(const std::vector<std::string>& names, std::size_t max_items) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < max_items; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > max_items) out += " and " + std::to_string(names.size() - max_items) + " more";
  return out;
}

std::string_view trim(std::string_view text) noexcept {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace selfperf::detail
