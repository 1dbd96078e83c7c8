// FrameLoop as RFC 4180 CSV: the per-event statistics report() prints, and the over-budget frames.
#include <string>

#include "output/report_format.hpp"
#include "selfperf/frame_loop.hpp"

namespace selfperf {

namespace {

// Statistics of one member; an empty histogram has none: empty fields, not zeros that read as measured.
std::string stats_fields(const Histogram& h) {
  std::string out = std::to_string(h.count());
  if (h.empty()) return out + ",,,,,,,,,,";
  out += ',' + std::to_string(h.min()) + ',' + std::to_string(h.max()) + ',' + detail::decimal(h.sum()) + ',' +
         detail::csv_number(h.mean()) + ',' + detail::csv_number(h.stddev());
  for (double p : {50.0, 90.0, 99.0, 99.9, 99.99}) out += ',' + std::to_string(h.percentile(p));
  return out;
}

}  // namespace

std::string FrameLoop::to_csv() const {
  // units_ is "" for counts, which a reader should not have to know: say "count".
  auto unit = [&](std::size_t i) { return units_[i].empty() ? std::string("count") : units_[i]; };
  std::string out = "event,unit,budget,not_counted,count,min,max,sum,mean,stddev,p50,p90,p99,p99.9,p99.99\r\n";
  out += "wall,ns," + std::to_string(wall_budget_ns_) + ",0," + stats_fields(histograms_[0]) + "\r\n";
  for (std::size_t i = 0; i < names_.size(); ++i)
    out += detail::csv_field(names_[i]) + ',' + detail::csv_field(unit(i)) + ',' + std::to_string(budgets_[i]) + ',' +
           std::to_string(not_counted_[i]) + ',' + stats_fields(histograms_[i + 1]) + "\r\n";
  return out;
}

std::string FrameLoop::over_budget_csv() const {
  auto unit = [&](std::size_t i) { return units_[i].empty() ? std::string("count") : units_[i]; };
  std::string out = "frame,event,unit,value,budget,over_budget\r\n";
  for (const FrameRecord& frame : over_budget_frames()) {
    const std::string index = std::to_string(frame.index);
    out += index + ",wall,ns," + std::to_string(frame.wall_ns) + ',' + std::to_string(wall_budget_ns_) + ',' +
           (frame.over_wall_budget() ? "1" : "0") + "\r\n";
    for (std::size_t i = 0; i < names_.size(); ++i)
      out += index + ',' + detail::csv_field(names_[i]) + ',' + detail::csv_field(unit(i)) + ',' +
             (frame.counted[i] ? std::to_string(frame.deltas[i]) : std::string()) + ',' +
             std::to_string(budgets_[i]) + ',' + (frame.over_event_budget(i) ? "1" : "0") + "\r\n";
  }
  return out;
}

}  // namespace selfperf
