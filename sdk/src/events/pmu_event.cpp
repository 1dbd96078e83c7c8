#include "events/pmu_event.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "events/event_suggest.hpp"
#include "events/event_text.hpp"
#include "events/pmu_sysfs.hpp"
#include "selfperf/error.hpp"

namespace selfperf::detail {
namespace {

constexpr std::string_view kSyntax =
    "a PMU event is written pmu/term=value,term,.../ (e.g. cpu/event=0x3c,umask=0x0/)";

struct Term {
  std::string_view name;
  std::optional<std::uint64_t> value;  // none: bare term (1 for a format term) or an alias
  bool placeholder = false;            // `term=?` in an alias: the user must give the value
};

// Where a list of terms came from, for messages: the user's event or an alias file.
struct TermSource {
  std::string_view event_text;
  std::string where;  // "event 'cpu/…/'" or "alias 'mem-loads' of PMU 'cpu' (…/events/mem-loads)"
};

// perf's own settings written among a PMU's terms (`cpu/event=0x3c,period=1000,name=x/`). They are not bits
// of the event's config but options of perf's tools; selfperf takes them where it takes options.
constexpr std::pair<std::string_view, std::string_view> kPerfConfigTerms[] = {
    {"period", "CallchainSamplingOptions::period, or SELFPERF_FREQUENCY for the profiler"},
    {"freq", "CallchainSamplingOptions::frequency, or SELFPERF_FREQUENCY for the profiler"},
    {"name", "the name your program gives the event (Region, report labels)"},
    {"call-graph", "SELFPERF_UNWINDER (frame_pointer, libunwind, kernel) or the Profiler's unwinder option"},
    {"stack-size", "the unwinder options"},
    {"max-stack", "CallchainSamplingOptions::max_stack"},
    {"inherit", "the counting API (CounterGroup counts the calling thread)"},
    {"no-inherit", "the counting API (CounterGroup counts the calling thread)"},
    {"overwrite", "RingBuffer (selfperf reads rings forward)"},
    {"no-overwrite", "RingBuffer (selfperf reads rings forward)"},
    {"time", "the sampling options"},
    {"percore", "no equivalent: selfperf counts threads"},
    {"aux-output", "no equivalent"},
};

[[noreturn]] void perf_config_term(std::string_view name, const TermSource& source) {
  std::string_view instead;
  for (const auto& [term, where] : kPerfConfigTerms)
    if (term == name) instead = where;
  throw Error("term '" + std::string(name) + "' in " + source.where +
              " is one of perf's config terms (period, freq, name, call-graph, stack-size, max-stack, inherit, "
              "overwrite, time, …), which set perf's options rather than the event's encoding; selfperf does not "
              "take them inside pmu/…/: leave it out and use " + std::string(instead));
}

bool is_perf_config_term(std::string_view name) {
  for (const auto& entry : kPerfConfigTerms)
    if (entry.first == name) return true;
  return false;
}

std::vector<Term> split_terms(std::string_view body, const TermSource& source, bool allow_placeholder) {
  std::vector<Term> terms;
  if (body.empty()) return terms;
  while (true) {
    auto comma = body.find(',');
    std::string_view item = body.substr(0, comma);
    auto eq = item.find('=');
    Term t;
    t.name = item.substr(0, eq);
    if (t.name.empty())
      throw Error("empty term in " + source.where + ": " + std::string(kSyntax) +
                  ", terms separated by one ','");
    if (!is_plain_name(t.name))
      throw Error("malformed term " + quote_text(t.name) + " in " + source.where +
                  ": term names use letters, digits, '_', '-' and '.'; " + std::string(kSyntax));
    // Checked before the value, which for name= or call-graph= is not a number. A PMU whose format has a
    // term of the same name (none known) would be shadowed; source.where names the event either way.
    if (is_perf_config_term(t.name) && source.where.rfind("event ", 0) == 0) perf_config_term(t.name, source);
    if (eq != std::string_view::npos) {
      std::string_view value = item.substr(eq + 1);
      if (value == "?" && allow_placeholder) {
        t.placeholder = true;
      } else {
        t.value = parse_number(value);
        if (!t.value)
          throw Error("value " + quote_text(value) + " of term '" + std::string(t.name) + "' in " +
                      source.where + " is not a number: write a 64-bit decimal or 0x-prefixed hex value");
      }
    }
    terms.push_back(t);
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
  }
  return terms;
}

bool is_literal_word(std::string_view name) {
  return name == "config" || name == "config1" || name == "config2";
}

std::uint64_t& config_word(EventSpec& spec, unsigned word) {
  return word == 0 ? spec.config : word == 1 ? spec.config1 : spec.config2;
}

unsigned literal_index(std::string_view name) { return name == "config" ? 0 : name == "config1" ? 1 : 2; }

class PmuEventBuilder {
 public:
  PmuEventBuilder(const PmuDirectory& pmu, std::string_view event_text) : pmu_(pmu), text_(event_text) {}

  // Sets the term's bits (or the whole config word for a literal); throws if the term is not known.
  void apply(const Term& t, const TermSource& source, EventSpec& spec) const {
    if (is_literal_word(t.name)) {
      if (!t.value)
        throw Error("term '" + std::string(t.name) + "' in " + source.where + " needs a value, e.g. " +
                    std::string(t.name) + "=0x1234");
      config_word(spec, literal_index(t.name)) = *t.value;
      return;
    }
    auto field = pmu_.format(t.name, text_);
    if (!field && t.value && pmu_.alias(t.name, text_))
      throw Error("'" + std::string(t.name) + "' in " + source.where + " is an event alias of PMU '" +
                  pmu_.name() + "' and takes no value: write it bare, e.g. " + pmu_.name() + "/" +
                  std::string(t.name) + "/");
    if (!field) unknown_term(t, source);
    std::uint64_t value = t.value.value_or(1);
    if (!field->fits(value))
      throw Error("value " + hex(value) + " of term '" + std::string(t.name) + "' in " + source.where +
                  " is wider than its field: '" + std::string(t.name) + "' is " + field->text + ", " +
                  std::to_string(field->width()) + (field->width() == 1 ? " bit" : " bits") + " wide (max " +
                  hex(field->max_value()) + ")");
    std::uint64_t& word = config_word(spec, field->word);
    word = (word & ~field->mask) | field->deposit(value);
  }

  [[noreturn]] void unknown_term(const Term& t, const TermSource& source) const {
    std::vector<std::string> terms = pmu_.format_terms();
    std::vector<std::string> aliases = pmu_.aliases();
    std::string msg =
        "unknown term " + quote_text(t.name) + " in " + source.where + ": PMU '" + pmu_.name() + "' ";
    if (terms.empty())
      msg += "has no format terms, only the literal terms config, config1, config2";
    else
      msg += "has the format terms " + join_names(terms) + " and the literal terms config, config1, config2";
    if (!aliases.empty()) msg += "; its event aliases: " + join_names(aliases, 10);
    std::vector<std::string> candidates = terms;
    candidates.insert(candidates.end(), aliases.begin(), aliases.end());
    for (const char* w : {"config", "config1", "config2"}) candidates.emplace_back(w);
    auto near = nearest_names(t.name, candidates);
    if (!near.empty()) msg += "; nearest: " + join_names(near);
    throw Error(msg);
  }

 private:
  const PmuDirectory& pmu_;
  std::string_view text_;
};

[[noreturn]] void unknown_pmu(std::string_view name, std::string_view text, const EventRoots& roots) {
  std::vector<std::string> present = list_pmus(roots.pmus);
  std::string msg = "unknown PMU " + quote_text(name) + " in event " + quote_text(text) + ": no " +
                    (roots.pmus / std::string(name)).string() + "; ";
  if (present.empty()) {
    msg += "no PMUs found under " + roots.pmus.string();
  } else {
    msg += "PMUs present: " + join_names(present);
    auto near = nearest_names(name, present);
    if (!near.empty()) msg += "; did you mean " + join_names(near) + "?";
  }
  if (name == "cpu" && std::find(present.begin(), present.end(), "cpu") == present.end())
    msg += " (no 'cpu' PMU usually means no hardware PMU, e.g. in a virtual machine)";
  throw Error(msg, ENOENT);
}

EventSpec build(std::string_view pmu_name, std::string_view body, const Modifiers& mods,
                std::string_view text, const EventRoots& roots) {
  PmuDirectory pmu(roots.pmus, pmu_name);
  if (!pmu.exists()) unknown_pmu(pmu_name, text, roots);
  EventSpec spec;
  spec.type = pmu.type(text);
  spec.pmu = std::string(pmu_name);

  TermSource explicit_source{text, "event " + quote_text(text)};
  std::vector<Term> terms = split_terms(body, explicit_source, false);
  if (terms.empty())
    throw Error("no terms between the slashes of " + quote_text(text) + ": " + std::string(kSyntax) +
                ", naming format terms of " + (roots.pmus / std::string(pmu_name) / "format").string() +
                " or an alias from its events/ directory");

  PmuEventBuilder builder(pmu, text);
  // A bare term that is neither a literal nor a format term is an alias; its terms go in first so that
  // the terms the user wrote override them, whatever the order.
  std::optional<std::size_t> alias_at;
  std::string alias_text;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    if (t.value || is_literal_word(t.name) || pmu.format(t.name, text)) continue;
    auto content = pmu.alias(t.name, text);
    if (!content) builder.unknown_term(t, explicit_source);
    if (alias_at)
      throw Error("event " + quote_text(text) + " names two aliases, '" + std::string(terms[*alias_at].name) +
                  "' and '" + std::string(t.name) + "': one alias per event, other settings as term=value");
    alias_at = i;
    alias_text = *content;
  }
  std::vector<std::string_view> placeholders;
  if (alias_at) {
    std::string_view alias_name = terms[*alias_at].name;
    TermSource alias_source{text, "alias '" + std::string(alias_name) + "' of PMU '" + spec.pmu + "' (" +
                                      (roots.pmus / spec.pmu / "events" / std::string(alias_name)).string() +
                                      " = " + quote_text(alias_text) + ")"};
    std::vector<Term> alias_terms = split_terms(alias_text, alias_source, true);
    if (alias_terms.empty())
      throw Error(alias_source.where + " is empty, so event " + quote_text(text) + " has no encoding");
    for (const Term& t : alias_terms) {
      if (t.placeholder)
        placeholders.push_back(t.name);
      else
        builder.apply(t, alias_source, spec);
    }
  }

  std::string canonical = spec.pmu + "/";
  std::vector<std::string_view> seen;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const Term& t = terms[i];
    if (i) canonical += ",";
    canonical += t.name;
    if (alias_at && i == *alias_at) continue;
    if (std::find(seen.begin(), seen.end(), t.name) != seen.end())
      throw Error("term '" + std::string(t.name) + "' given twice in event " + quote_text(text) +
                  ": give each term once");
    seen.push_back(t.name);
    builder.apply(t, explicit_source, spec);
    if (t.value) canonical += "=" + hex(*t.value);
  }
  for (std::string_view p : placeholders) {
    if (std::find(seen.begin(), seen.end(), p) == seen.end())
      throw Error("event " + quote_text(text) + ": alias '" + std::string(terms[*alias_at].name) +
                  "' of PMU '" + spec.pmu + "' needs a value for '" + std::string(p) + "'; write " +
                  spec.pmu + "/" + std::string(terms[*alias_at].name) + "," + std::string(p) + "=N/");
  }
  apply_modifiers(mods, spec);
  spec.name = canonical + "/" + modifier_letters(mods);
  return spec;
}

}  // namespace

EventSpec parse_pmu_event(std::string_view text, const EventRoots& roots) {
  auto open = text.find('/');
  std::string_view pmu_name = text.substr(0, open);
  if (pmu_name.empty())
    throw Error("event " + quote_text(text) + " has no PMU name before '/': " + std::string(kSyntax) +
                "; PMUs present: " + join_names(list_pmus(roots.pmus)));
  if (!is_plain_name(pmu_name))
    throw Error("malformed PMU name " + quote_text(pmu_name) + " in event " + quote_text(text) +
                ": PMU names use letters, digits, '_', '-' and '.'; PMUs present: " +
                join_names(list_pmus(roots.pmus)));
  std::string_view rest = text.substr(open + 1);
  auto close = rest.find('/');
  if (close == std::string_view::npos)
    throw Error("unterminated PMU event " + quote_text(text) + ": missing the closing '/'; " +
                std::string(kSyntax));
  std::string_view body = rest.substr(0, close);
  std::string_view after = rest.substr(close + 1);
  if (after.find('/') != std::string_view::npos)
    throw Error("unexpected '/' after the closing '/' of " + quote_text(text) + ": " + std::string(kSyntax) +
                ", optionally followed by modifiers such as u or :u");
  Modifiers mods;
  if (!after.empty()) {
    if (after.front() == ':') after.remove_prefix(1);
    mods = parse_modifiers(after, text);
  }
  return build(pmu_name, body, mods, text, roots);
}

EventSpec pmu_alias_event(std::string_view pmu, std::string_view alias, const Modifiers& mods,
                          std::string_view text, const EventRoots& roots) {
  return build(pmu, alias, mods, text, roots);
}

}  // namespace selfperf::detail
