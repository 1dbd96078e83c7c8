#include "selfperf/region.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string_view>
#include <vector>

#include "counting/timeline_state.hpp"
#include "output/report_format.hpp"

namespace selfperf {

namespace {
thread_local Scope* current_scope = nullptr;
}  // namespace

double Region::mean(std::size_t event) const noexcept {
  const std::uint64_t counted = calls_ - not_counted_;
  return counted ? totals_[event].sum / static_cast<double>(counted) : 0.0;
}

int Region::depth() const noexcept {
  int d = 0;
  for (const Region* r = parent_; r; r = r->parent_) ++d;
  return d;
}

void Region::record(const GroupReading& before, const GroupReading& after, std::span<const double> overhead) noexcept {
  const std::size_t n = std::min(before.size(), after.size());
  events_ = n;
  ++calls_;
  for (std::size_t i = 0; i < n; ++i)
    if (!delta(before[i], after[i]).counted()) {
      ++not_counted_;
      return;
    }
  for (std::size_t i = 0; i < n; ++i) {
    double v = delta(before[i], after[i]).scaled();
    if (i < overhead.size()) v = std::max(0.0, v - overhead[i]);
    EventTotals& t = totals_[i];
    t.sum += v;
    t.min = std::min(t.min, v);
    t.max = std::max(t.max, v);
  }
}

void Region::reset() noexcept {
  calls_ = not_counted_ = 0;
  totals_.fill(EventTotals{});
}

void Region::merge(const Region& other) noexcept {
  calls_ += other.calls_;
  not_counted_ += other.not_counted_;
  events_ = std::max(events_, other.events_);
  for (std::size_t i = 0; i < other.events_; ++i) {
    totals_[i].sum += other.totals_[i].sum;
    totals_[i].min = std::min(totals_[i].min, other.totals_[i].min);
    totals_[i].max = std::max(totals_[i].max, other.totals_[i].max);
  }
}

Scope::Scope(CounterGroup& group, Region& region)
    : group_(group), region_(region), outer_(current_scope),
      begin_ns_(detail::timeline_attached() ? detail::timeline_now_ns() : 0) {
  if (outer_ && !region_.parent_ && &outer_->region_ != &region_) region_.parent_ = &outer_->region_;
  current_scope = this;
  group_.read(before_);
}

Scope::~Scope() {
  GroupReading after;
  group_.read(after);
  region_.record(before_, after, group_.overhead());
  // The clock after the read and before it in the constructor: an enclosed scope's span lies inside this one's.
  if (begin_ns_ != 0)
    detail::timeline_record_scope(region_.name(), before_, after, group_.overhead(), begin_ns_,
                                  detail::timeline_now_ns());
  current_scope = outer_;
}

namespace {

std::string_view base_name(std::string_view name) { return name.substr(0, name.find(':')); }

int find_event(std::span<const std::string> events, std::initializer_list<std::string_view> names) {
  for (std::size_t i = 0; i < events.size(); ++i)
    for (auto n : names)
      if (base_name(events[i]) == n) return static_cast<int>(i);
  return -1;
}

struct Ratio {
  std::string label;
  int numerator;
  int denominator;
  double scale;
};

// Ratios the members allow: IPC and "<x>-misses" over "<x>s" (or the generic names perf pairs).
std::vector<Ratio> derived_ratios(std::span<const std::string> events) {
  std::vector<Ratio> ratios;
  int cycles = find_event(events, {"cycles", "cpu-cycles"});
  int instructions = find_event(events, {"instructions"});
  if (cycles >= 0 && instructions >= 0) ratios.push_back({"IPC", instructions, cycles, 1.0});
  for (std::size_t i = 0; i < events.size(); ++i) {
    std::string name(base_name(events[i]));
    constexpr std::string_view suffix = "-misses";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    std::string stem = name.substr(0, name.size() - suffix.size());
    int total = -1;
    if (stem == "branch") total = find_event(events, {"branches", "branch-instructions"});
    else if (stem == "cache") total = find_event(events, {"cache-references"});
    else total = find_event(events, {stem + "s"});
    if (total >= 0) ratios.push_back({stem + " miss %", static_cast<int>(i), total, 100.0});
  }
  return ratios;
}

}  // namespace

void print_regions(std::ostream& out, const CounterGroup& group, std::span<const Region* const> regions) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < group.size(); ++i) names.push_back(group.event(i).name);
  print_regions(out, names, regions);
}

void print_regions(std::ostream& out, std::span<const std::string> events, std::span<const Region* const> regions) {
  const auto ratios = derived_ratios(events);
  char cell[64];
  auto put = [&](const char* fmt, auto... args) {
    std::snprintf(cell, sizeof cell, fmt, args...);
    out << cell;
  };
  put("%-28s %10s", "region", "calls");
  std::vector<int> widths;  // each event's total column fits its heading
  for (const auto& head : events) {
    // Every column says its unit: the clocks count ns, other events count occurrences.
    const std::string unit = " [" + detail::event_unit(head) + "]";
    const std::string total = head + " total" + unit;
    widths.push_back(std::max(18, static_cast<int>(total.size())));
    put(" %*s %14s", widths.back(), total.c_str(), ("mean" + unit).c_str());
  }
  for (const auto& r : ratios) put(" %14s", r.label.c_str());
  out << '\n';
  for (const Region* region : regions) {
    std::string name = std::string(static_cast<std::size_t>(2 * region->depth()), ' ') + region->name();
    put("%-28s %10llu", name.c_str(), static_cast<unsigned long long>(region->calls()));
    for (std::size_t i = 0; i < events.size(); ++i)
      put(" %*.0f %14.1f", widths[i], region->totals(i).sum, region->mean(i));
    for (const auto& r : ratios) {
      double den = region->totals(static_cast<std::size_t>(r.denominator)).sum;
      double num = region->totals(static_cast<std::size_t>(r.numerator)).sum;
      put(" %14.3f", den > 0 ? r.scale * num / den : 0.0);
    }
    if (region->not_counted()) put("   (%llu calls not counted)", static_cast<unsigned long long>(region->not_counted()));
    out << '\n';
  }
}

}  // namespace selfperf
