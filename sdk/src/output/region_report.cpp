// Regions as JSON and CSV: every count exact, every double read back as written, each value with its unit.
#include "output/region_report.hpp"
#include "output/json_text.hpp"

#include "output/report_format.hpp"

namespace selfperf {

namespace {

std::vector<std::string> names_of(const CounterGroup& group) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < group.size(); ++i) names.push_back(group.event(i).name);
  return names;
}

bool has_counted_calls(const Region& region) { return region.calls() > region.not_counted(); }

}  // namespace

namespace detail {

nlohmann::ordered_json regions_to_json(std::span<const std::string> events, std::span<const Region* const> regions) {
  auto out = nlohmann::ordered_json::array();
  for (const Region* region : regions) {
    nlohmann::ordered_json r;
    r["name"] = region->name();
    r["depth"] = region->depth();
    r["parent"] = region->parent() ? nlohmann::ordered_json(region->parent()->name()) : nlohmann::ordered_json();
    r["calls"] = region->calls();
    r["not_counted"] = region->not_counted();
    auto& per_event = r["events"] = nlohmann::ordered_json::object();
    const bool counted = has_counted_calls(*region);
    for (std::size_t i = 0; i < events.size(); ++i) {
      const EventTotals& t = region->totals(i);
      // Without a counted call there is no mean or minimum: null, not a zero that reads as measured.
      per_event[events[i]] = {{"unit", event_unit(events[i])},
                              {"total", t.sum},
                              {"mean", counted ? nlohmann::ordered_json(region->mean(i)) : nlohmann::ordered_json()},
                              {"min", counted ? nlohmann::ordered_json(t.min) : nlohmann::ordered_json()},
                              {"max", t.max}};
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace detail

std::string regions_json(std::span<const std::string> events, std::span<const Region* const> regions) {
  nlohmann::ordered_json out;
  out["events"] = events;
  out["regions"] = detail::regions_to_json(events, regions);
  return detail::dump_json(out);
}

std::string regions_json(const CounterGroup& group, std::span<const Region* const> regions) {
  return regions_json(names_of(group), regions);
}

std::string regions_csv(std::span<const std::string> events, std::span<const Region* const> regions) {
  using detail::csv_field;
  using detail::csv_number;
  std::string out = "region,depth,parent,calls,not_counted,event,unit,total,mean,min,max\r\n";
  for (const Region* region : regions) {
    const bool counted = has_counted_calls(*region);
    for (std::size_t i = 0; i < events.size(); ++i) {
      const EventTotals& t = region->totals(i);
      out += csv_field(region->name()) + ',' + std::to_string(region->depth()) + ',' +
             (region->parent() ? csv_field(region->parent()->name()) : std::string()) + ',' +
             std::to_string(region->calls()) + ',' + std::to_string(region->not_counted()) + ',' +
             csv_field(events[i]) + ',' + detail::event_unit(events[i]) + ',' + csv_number(t.sum) + ',' +
             (counted ? csv_number(region->mean(i)) : "") + ',' + (counted ? csv_number(t.min) : "") + ',' +
             csv_number(t.max) + "\r\n";
    }
  }
  return out;
}

std::string regions_csv(const CounterGroup& group, std::span<const Region* const> regions) {
  return regions_csv(names_of(group), regions);
}

}  // namespace selfperf
