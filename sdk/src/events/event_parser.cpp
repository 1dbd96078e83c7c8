// parse_event: tells the forms of perf's event syntax apart and hands each to its resolver.
//
//   pmu/terms/[mods]   any text with '/'                       -> pmu_event.cpp
//   name[:mods]        generic, hw-cache, raw rNNNN, or an alias -> event_names.cpp, pmu_event.cpp
//   subsys:name[:mods] a tracepoint                              -> tracepoint_lookup.cpp
//
// `x:y` is a modifier list when x is a known event name, or when y is made only of modifier letters and
// x is not a tracepoint subsystem; otherwise it is a tracepoint. So `cycles:u` is cycles with :u,
// `sched:sched_switch` is a tracepoint, and `sched:sched_switch:k` is that tracepoint counted in the
// kernel. Modifiers that exclude the kernel (`:u`, `:h`) are refused on tracepoints: a tracepoint fires
// in kernel context and would always read 0.
#include <optional>
#include <string>
#include <vector>

#include "events/event_breakpoint.hpp"
#include "events/event_modifiers.hpp"
#include "events/event_names.hpp"
#include "events/event_suggest.hpp"
#include "events/event_text.hpp"
#include "events/pmu_event.hpp"
#include "events/pmu_sysfs.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "events/tracepoint_lookup.hpp"

namespace selfperf {
namespace {

using namespace detail;

constexpr const char* kAcceptedForms =
    "accepted: hardware and software names (cycles, instructions, task-clock, page-faults, …; see "
    "selfperf::known_event_names()), hw-cache names (L1-dcache-load-misses, LLC-loads, dTLB-load-misses, …), "
    "raw rNNNN (hex), pmu/term=value,.../, PMU event aliases, tracepoints subsys:name, breakpoints "
    "mem:ADDR[/LEN][:rwx], each optionally "
    "followed by modifiers such as :u or :k";

// A bare name resolved to its event; modifiers come later.
struct NamedEvent {
  std::optional<GenericEvent> generic;  // hardware, software, hw-cache or raw
  std::string alias_pmu;                // otherwise: the PMU whose events/ has the alias
};

std::optional<GenericEvent> raw_event(std::string_view name, std::string_view text) {
  if (name.size() < 2 || name[0] != 'r' ||
      name.find_first_not_of("0123456789abcdefABCDEF", 1) != std::string_view::npos)
    return std::nullopt;
  auto value = parse_number("0x" + std::string(name.substr(1)));
  if (!value)
    throw Error("raw event " + quote_text(name) +
                (name.size() == text.size() ? "" : " in " + quote_text(text)) +
                " is wider than 64 bits: rNNNN takes at most 16 hex digits (max rffffffffffffffff)");
  return GenericEvent{PERF_TYPE_RAW, *value, "r" + hex(*value).substr(2), "cpu"};
}

std::optional<NamedEvent> find_named(std::string_view name, std::string_view text, const EventRoots& roots) {
  if (auto g = find_generic_event(name)) return NamedEvent{std::move(g), {}};
  if (auto c = decode_hw_cache_event(name)) return NamedEvent{std::move(c), {}};
  if (auto r = raw_event(name, text)) return NamedEvent{std::move(r), {}};
  if (!is_plain_name(name)) return std::nullopt;
  std::vector<std::string> pmus = pmus_with_alias(roots.pmus, name);
  if (pmus.empty()) return std::nullopt;
  for (const auto& p : pmus)
    if (p == "cpu") return NamedEvent{std::nullopt, p};  // the core PMU wins, as in perf
  if (pmus.size() > 1)
    throw Error("event alias " + quote_text(name) + " in " + quote_text(text) + " exists in several PMUs (" +
                join_names(pmus) + "): write pmu/" + std::string(name) + "/ to pick one, e.g. " + pmus[0] +
                "/" + std::string(name) + "/");
  return NamedEvent{std::nullopt, pmus[0]};
}

EventSpec finish(const NamedEvent& named, std::string_view name, const Modifiers& mods, std::string_view text,
                 const EventRoots& roots) {
  if (!named.generic) return pmu_alias_event(named.alias_pmu, name, mods, text, roots);
  EventSpec spec;
  spec.type = named.generic->type;
  spec.config = named.generic->config;
  spec.pmu = named.generic->pmu;
  apply_modifiers(mods, spec);
  std::string letters = modifier_letters(mods);
  spec.name = named.generic->canonical + (letters.empty() ? "" : ":" + letters);
  return spec;
}

std::vector<std::string> suggestion_candidates(const EventRoots& roots) {
  std::vector<std::string> names = known_event_names();
  std::vector<std::string> aliases = all_aliases(roots.pmus);
  names.insert(names.end(), aliases.begin(), aliases.end());
  return names;
}

[[noreturn]] void unknown_event(std::string_view name, std::string_view text, const EventRoots& roots) {
  std::string msg = (is_plain_name(name) ? "unknown event " : "malformed event name ") + quote_text(name);
  if (name.size() != text.size()) msg += " in " + quote_text(text);
  auto near = nearest_names(name, suggestion_candidates(roots));
  if (!near.empty()) msg += "; nearest known names: " + join_names(near);
  throw Error(msg + "; " + kAcceptedForms);
}

void check_characters(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c <= 0x20 || c >= 0x7f)
      throw Error("unexpected character " + quote_text(text.substr(i, 1)) + " at offset " +
                  std::to_string(i) + " of event " + quote_text(text) +
                  ": event names are printable ASCII without spaces; " + kAcceptedForms);
  }
  auto slash = text.find('/');
  std::string_view outside = text.substr(0, slash);
  if (outside.find_first_of(",{}") != std::string_view::npos)
    throw Error("event " + quote_text(text) +
                " names several events or a group: parse_event takes one event; split_event_groups() splits "
                "a list such as a,{b,c} (a CounterGroup takes a list of events)");
}

EventSpec tracepoint(std::string_view head, std::string_view rest, std::string_view text,
                     const EventRoots& roots) {
  auto colon = rest.find(':');
  std::string_view name = rest.substr(0, colon);
  Modifiers mods;
  if (colon != std::string_view::npos) mods = parse_modifiers(rest.substr(colon + 1), text);
  try {
    return tracepoint_event(head, name, mods, text, roots);
  } catch (const Error& e) {
    // `cylces:x` is more likely a typo than a tracepoint: say so next to the tracefs answer.
    if (tracepoint_subsystem_exists(head, roots)) throw;
    auto near = nearest_names(head, suggestion_candidates(roots));
    if (near.empty()) throw;
    throw Error(std::string(e.what()) + "; if " + quote_text(head) +
                    " was meant as an event name, did you mean " + join_names(near) + "?",
                e.errno_value());
  }
}

}  // namespace

EventSpec parse_event(std::string_view text) {
  // Built once: constructing the default paths costs more than parsing a generic name.
  static const EventRoots kSystemRoots;
  return parse_event(text, kSystemRoots);
}

EventSpec parse_event(std::string_view input, const EventRoots& roots) {
  if (input.size() > kMaxEventText)
    throw Error("event text of " + std::to_string(input.size()) + " bytes is too long (at most " +
                std::to_string(kMaxEventText) + "): " + quote_text(input));
  std::string_view text = trim(input);
  if (text.empty()) throw Error("empty event name; " + std::string(kAcceptedForms));
  check_characters(text);
  if (auto breakpoint = parse_breakpoint(text)) return *breakpoint;
  if (text.find('/') != std::string_view::npos) return parse_pmu_event(text, roots);

  auto colon = text.find(':');
  std::string_view head = text.substr(0, colon);
  if (head.empty())
    throw Error("event " + quote_text(text) + " has nothing before ':'; " + std::string(kAcceptedForms));
  auto named = find_named(head, text, roots);
  if (colon == std::string_view::npos) {
    if (!named) unknown_event(head, text, roots);
    return finish(*named, head, Modifiers{}, text, roots);
  }
  std::string_view rest = text.substr(colon + 1);
  if (named) return finish(*named, head, parse_modifiers(rest, text), text, roots);
  bool looks_like_modifiers = !rest.empty() && rest.find_first_not_of("ukhpGHI") == std::string_view::npos;
  if (rest.empty() || (looks_like_modifiers && !tracepoint_subsystem_exists(head, roots)))
    unknown_event(head, text, roots);
  return tracepoint(head, rest, text, roots);
}

}  // namespace selfperf
