#include "selfperf/instrument.hpp"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "sampling/fork_guard.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "events/perf_syscall.hpp"
#include "output/json_text.hpp"
#include "output/region_report.hpp"

namespace selfperf {

namespace {

struct ThreadRegions;

// Process-wide state; touched only when a site, a thread or the event set first appears, and by reports.
struct Registry {
  std::mutex mutex;
  std::deque<std::string> site_names;  // deque: names stay where they are while sites are added
  std::unordered_map<std::string, std::uint32_t> site_ids;
  bool events_resolved = false;
  std::vector<std::string> events;
  std::string events_reason;
  std::string error;  // why scopes measure nothing (bad event set, open failure); reported, never hidden
  std::vector<std::string> notes;
  std::vector<ThreadRegions*> live;
  std::vector<std::unique_ptr<Region>> retired;  // finished threads, merged, by site id
  std::vector<std::int64_t> parent_site;         // by site id, -1 for top level
};

Registry& registry() {
  static Registry* r = [] {
    auto* created = new Registry;  // never destroyed: threads may retire during static destruction
    // A thread meeting its first scope while another forks must not leave the child's registry locked.
    detail::fork_waits_for(created->mutex, detail::ForkLockRank::leaf);
    return created;
  }();
  return *r;
}

// SELFPERF_EVENTS in perf's -e syntax. The scopes count one group per thread, so `{a,b}` braces are
// accepted and every event lands in that one group.
std::vector<std::string> flatten_event_list(std::string_view list) {
  std::vector<std::string> out;
  for (auto& group : split_event_groups(list))
    for (auto& e : group) out.push_back(std::move(e));
  return out;
}

// Caller holds the mutex.
void resolve_events(Registry& r) {
  if (r.events_resolved) return;
  r.events_resolved = true;
  if (const char* env = std::getenv("SELFPERF_EVENTS"); env && *env) {
    r.events_reason = "from SELFPERF_EVENTS";
    try {
      r.events = flatten_event_list(env);
    } catch (const Error& e) {
      r.error = std::string("event set ") + r.events_reason + " is unusable: " + e.what();
      return;
    }
  } else if (detail::hardware_cycles_available()) {
    std::vector<std::string> left_out;
    r.events = detail::events_that_open({"cycles", "instructions", "branch-misses"}, left_out);
    r.events_reason = "defaults for a machine with a hardware PMU";
    for (std::size_t i = 0; i < left_out.size(); ++i)
      r.events_reason += (i ? ", " : "; left out, this PMU does not count them: ") + left_out[i];
  } else {
    r.events = {"task-clock", "page-faults", "context-switches"};
    r.events_reason = "software defaults: no hardware PMU here (cycles does not open)";
  }
  try {
    for (const auto& e : r.events) (void)parse_event(e);
  } catch (const Error& e) {
    r.error = std::string("event set ") + r.events_reason + " is unusable: " + e.what();
  }
}

struct ThreadRegions {
  std::optional<CounterGroup> group;
  bool tried = false;
  std::vector<std::unique_ptr<Region>> regions;  // by site id

  ThreadRegions() {
    std::lock_guard lock(registry().mutex);
    registry().live.push_back(this);
  }
  ~ThreadRegions();

  CounterGroup* open_group() {
    if (tried) return group ? &*group : nullptr;
    tried = true;
    Registry& r = registry();
    std::vector<std::string> events;
    {
      std::lock_guard lock(r.mutex);
      resolve_events(r);
      if (!r.error.empty()) return nullptr;
      events = r.events;
    }
    try {
      group.emplace(events);
      group->enable();
      std::lock_guard lock(r.mutex);
      if (r.notes.empty()) r.notes = group->notes();
    } catch (const Error& e) {
      group.reset();
      std::lock_guard lock(r.mutex);
      if (r.error.empty()) {
        r.error = std::string("cannot open the scope event set: ") + e.what();
        std::fprintf(stderr, "selfperf: %s; SELFPERF_SCOPE regions are not measured\n", r.error.c_str());
      }
    }
    return group ? &*group : nullptr;
  }

  Region& region(const RegionSite& site) {
    if (site.id() >= regions.size()) regions.resize(site.id() + 1);
    auto& slot = regions[site.id()];
    if (!slot) slot = std::make_unique<Region>(site.name());
    return *slot;
  }

};

using Regions = std::vector<std::unique_ptr<Region>>;

// Caller holds the mutex. Folds regions (by site id) into `into`, remembering which site encloses which.
void merge_regions(Registry& r, const Regions& from, Regions& into) {
  if (into.size() < from.size()) into.resize(from.size());
  if (r.parent_site.size() < r.site_names.size()) r.parent_site.resize(r.site_names.size(), -1);
  for (std::size_t id = 0; id < from.size(); ++id) {
    const Region* region = from[id].get();
    if (!region) continue;
    if (!into[id]) into[id] = std::make_unique<Region>(region->name());
    into[id]->merge(*region);
    if (!region->parent() || r.parent_site[id] >= 0) continue;
    for (std::size_t p = 0; p < from.size(); ++p)
      if (from[p].get() == region->parent()) r.parent_site[id] = static_cast<std::int64_t>(p);
  }
}

ThreadRegions::~ThreadRegions() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  merge_regions(r, regions, r.retired);
  std::erase(r.live, this);
}

ThreadRegions& this_thread_regions() {
  thread_local ThreadRegions regions;
  return regions;
}

struct Snapshot {
  std::vector<std::string> events;
  std::string reason, error;
  std::vector<std::string> notes;
  Regions merged;
  std::vector<const Region*> ordered;  // depth-first: every region right after the one that encloses it
};

Snapshot snapshot() {
  Registry& r = registry();
  Snapshot s;
  std::lock_guard lock(r.mutex);
  resolve_events(r);
  s.events = r.events;
  s.reason = r.events_reason;
  s.error = r.error;
  s.notes = r.notes;
  merge_regions(r, r.retired, s.merged);
  for (const ThreadRegions* t : r.live) merge_regions(r, t->regions, s.merged);
  for (std::size_t id = 0; id < s.merged.size(); ++id)
    if (s.merged[id] && r.parent_site[id] >= 0 && s.merged[static_cast<std::size_t>(r.parent_site[id])])
      s.merged[id]->set_parent(s.merged[static_cast<std::size_t>(r.parent_site[id])].get());
  auto visit = [&](auto&& self, const Region* parent) -> void {
    for (const auto& region : s.merged)
      if (region && region->parent() == parent) {
        s.ordered.push_back(region.get());
        self(self, region.get());
      }
  };
  visit(visit, nullptr);
  return s;
}

}  // namespace

RegionSite::RegionSite(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto [it, inserted] = r.site_ids.try_emplace(std::string(name), static_cast<std::uint32_t>(r.site_names.size()));
  if (inserted) r.site_names.emplace_back(name);
  id_ = it->second;
  name_ = &r.site_names[id_];
}

const std::string& RegionSite::name() const noexcept { return *name_; }

ScopedRegion::ScopedRegion(const RegionSite& site) {
  ThreadRegions& t = this_thread_regions();
  if (CounterGroup* group = t.open_group()) scope_.emplace(*group, t.region(site));
}

ScopedRegion::~ScopedRegion() = default;

ScopedRegion scope(std::string_view name) {
  thread_local std::unordered_map<std::string, std::unique_ptr<RegionSite>> sites;
  auto& site = sites[std::string(name)];
  if (!site) site = std::make_unique<RegionSite>(name);
  return ScopedRegion(*site);
}

void set_default_events(std::vector<std::string> events) {
  for (const auto& e : events) (void)parse_event(e);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.events = std::move(events);
  r.events_reason = "set by set_default_events()";
  r.events_resolved = true;
  r.error.clear();
}

std::vector<std::string> default_events() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  resolve_events(r);
  return r.events;
}

std::string default_events_reason() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  resolve_events(r);
  return r.events_reason;
}

void report(std::ostream& out) {
  Snapshot s = snapshot();
  out << "selfperf regions — events:";
  for (const auto& e : s.events) out << ' ' << e;
  out << " (" << s.reason << ")\n";
  if (!s.error.empty()) out << "error: " << s.error << " — regions were not measured\n";
  for (const auto& note : s.notes) out << "note: " << note << '\n';
  print_regions(out, s.events, s.ordered);
}

void report() { report(std::cout); }

std::string report_json() {
  Snapshot s = snapshot();
  nlohmann::ordered_json out;
  out["events"] = s.events;
  out["source"] = s.reason;
  out["error"] = s.error;
  out["notes"] = s.notes;
  out["regions"] = detail::regions_to_json(s.events, s.ordered);
  return detail::dump_json(out);
}

std::string report_csv() {
  Snapshot s = snapshot();
  return regions_csv(s.events, s.ordered);
}

void reset_regions() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.retired.clear();
  for (ThreadRegions* t : r.live)
    for (auto& region : t->regions)
      if (region) region->reset();
}

}  // namespace selfperf
