#pragma once
// perf's event modifiers: the letters after `cycles:` or after a PMU event's closing slash.
#include <string>
#include <string_view>

#include "selfperf/event.hpp"

namespace selfperf::detail {

struct Modifiers {
  bool user = false, kernel = false, hv = false;  // u k h
  bool guest = false, host = false;               // G H
  bool no_idle = false;                           // I
  unsigned precise = 0;                           // p, pp, ppp

  bool names_privilege() const noexcept { return user || kernel || hv; }
  bool excludes_kernel() const noexcept { return names_privilege() && !kernel; }
  bool empty() const noexcept { return !names_privilege() && !guest && !host && !no_idle && precise == 0; }
};

// Throws selfperf::Error naming the bad character, `event_text` and the accepted letters. Each letter may
// appear once, 'p' up to three times, in any order.
Modifiers parse_modifiers(std::string_view letters, std::string_view event_text);

// perf's semantics: naming any of u/k/h excludes every privilege level not named (likewise G/H for
// guest/host).
void apply_modifiers(const Modifiers& mods, EventSpec& spec) noexcept;

// The letters in a fixed order (u k h, p…, G H I), for canonical names.
std::string modifier_letters(const Modifiers& mods);

}  // namespace selfperf::detail
