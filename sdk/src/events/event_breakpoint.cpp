#include "events/event_breakpoint.hpp"

#include <linux/hw_breakpoint.h>

#include <string>

#include "events/event_modifiers.hpp"
#include "events/event_text.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

constexpr const char* kSyntax =
    "a breakpoint is written mem:ADDR[/LEN][:ACCESS] as in perf: ADDR in hex (0x…) or decimal, LEN 1, 2, 4 or 8 "
    "bytes, ACCESS r, w, rw (a data watchpoint, default rw) or x (an instruction), optionally followed by "
    "modifiers such as :u";

[[noreturn]] void bad(std::string_view what, std::string_view text) {
  throw Error(std::string(what) + " in " + quote_text(text) + ": " + kSyntax);
}

// The access letters, or nothing when `part` is not made of them (then it is a modifier list).
std::optional<std::uint32_t> access_type(std::string_view part) {
  if (part.empty() || part.find_first_not_of("rwx") != std::string_view::npos) return std::nullopt;
  std::uint32_t type = 0;
  for (char c : part) {
    std::uint32_t bit = c == 'r' ? std::uint32_t{HW_BREAKPOINT_R}
                        : c == 'w' ? std::uint32_t{HW_BREAKPOINT_W}
                                   : std::uint32_t{HW_BREAKPOINT_X};
    if (type & bit) return std::nullopt;
    type |= bit;
  }
  return type;
}

}  // namespace

std::optional<EventSpec> parse_breakpoint(std::string_view text) {
  constexpr std::string_view kPrefix = "mem:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view rest = text.substr(kPrefix.size());
  auto colon = rest.find(':');
  std::string_view location = rest.substr(0, colon);
  std::string_view tail = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);

  auto slash = location.find('/');
  auto addr = parse_number(location.substr(0, slash));
  if (!addr) bad("address " + quote_text(location.substr(0, slash)) + " is not a number", text);

  std::uint32_t type = HW_BREAKPOINT_R | HW_BREAKPOINT_W;  // perf's default (HW_BREAKPOINT_RW)
  Modifiers mods;
  if (!tail.empty()) {
    auto next = tail.find(':');
    std::string_view first = tail.substr(0, next);
    if (auto access = access_type(first)) {
      type = *access;
      if (next != std::string_view::npos) mods = parse_modifiers(tail.substr(next + 1), text);
    } else {
      mods = parse_modifiers(tail, text);  // no access given: the letters are modifiers (`mem:0x10:u`)
    }
  }
  // The kernel takes an instruction breakpoint or a data watchpoint, not both in one event.
  if ((type & HW_BREAKPOINT_X) && type != HW_BREAKPOINT_X)
    bad("access 'x' cannot be combined with r or w", text);

  std::uint64_t len = type == HW_BREAKPOINT_X ? std::uint64_t{sizeof(long)} : std::uint64_t{HW_BREAKPOINT_LEN_4};  // perf's defaults
  if (slash != std::string_view::npos) {
    auto given = parse_number(location.substr(slash + 1));
    if (!given || (*given != 1 && *given != 2 && *given != 4 && *given != 8))
      bad("length " + quote_text(location.substr(slash + 1)) + " is not 1, 2, 4 or 8", text);
    len = *given;
  }
  if (*addr % len != 0) bad("address " + hex(*addr) + " is not aligned to its length " + std::to_string(len), text);

  EventSpec spec;
  spec.type = PERF_TYPE_BREAKPOINT;
  spec.pmu = "breakpoint";
  spec.bp_type = type;
  spec.config1 = *addr;  // attr.bp_addr shares config1's place in perf_event_attr
  spec.config2 = len;    // attr.bp_len shares config2's
  apply_modifiers(mods, spec);
  std::string access = std::string(type & HW_BREAKPOINT_R ? "r" : "") + (type & HW_BREAKPOINT_W ? "w" : "") +
                       (type & HW_BREAKPOINT_X ? "x" : "");
  std::string letters = modifier_letters(mods);
  spec.name = "mem:" + hex(*addr) + "/" + std::to_string(len) + ":" + access + (letters.empty() ? "" : ":" + letters);
  return spec;
}

}  // namespace selfperf::detail
