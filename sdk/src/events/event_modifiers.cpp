#include "events/event_modifiers.hpp"

#include "events/event_text.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {
constexpr const char* kAccepted =
    "accepted modifiers: u (user), k (kernel), h (hypervisor), p/pp/ppp (precise), G (guest), H (host), "
    "I (exclude idle), each at most once, e.g. 'cycles:u' or 'cpu/event=0x3c/uk'";

[[noreturn]] void fail(std::string_view what, std::string_view letters, std::string_view event_text) {
  throw Error("malformed modifier in event " + quote_text(event_text) + ": " + std::string(what) + " in " +
              quote_text(letters) + "; " + kAccepted);
}
}  // namespace

Modifiers parse_modifiers(std::string_view letters, std::string_view event_text) {
  if (letters.empty()) fail("nothing after ':'", letters, event_text);
  Modifiers m;
  for (char c : letters) {
    bool* flag = nullptr;
    switch (c) {
      case 'u': flag = &m.user; break;
      case 'k': flag = &m.kernel; break;
      case 'h': flag = &m.hv; break;
      case 'G': flag = &m.guest; break;
      case 'H': flag = &m.host; break;
      case 'I': flag = &m.no_idle; break;
      case 'p':
        if (++m.precise > 3) fail("more than three 'p' (precise_ip is at most 3)", letters, event_text);
        continue;
      default: {
        std::string bad = quote_text(std::string_view(&c, 1));
        fail("unknown modifier character " + bad, letters, event_text);
      }
    }
    if (*flag) fail(std::string("modifier '") + c + "' given twice", letters, event_text);
    *flag = true;
  }
  return m;
}

void apply_modifiers(const Modifiers& mods, EventSpec& spec) noexcept {
  if (mods.names_privilege()) {
    spec.exclude_user = !mods.user;
    spec.exclude_kernel = !mods.kernel;
    spec.exclude_hv = !mods.hv;
    spec.explicit_privilege = true;
  }
  if (mods.guest || mods.host) {
    spec.exclude_guest = !mods.guest;
    spec.exclude_host = !mods.host;
  }
  if (mods.no_idle) spec.exclude_idle = true;
  spec.precise_ip = static_cast<std::uint8_t>(mods.precise);
}

std::string modifier_letters(const Modifiers& mods) {
  std::string out;
  if (mods.user) out += 'u';
  if (mods.kernel) out += 'k';
  if (mods.hv) out += 'h';
  out.append(mods.precise, 'p');
  if (mods.guest) out += 'G';
  if (mods.host) out += 'H';
  if (mods.no_idle) out += 'I';
  return out;
}

}  // namespace selfperf::detail
