// FrameLoop as JSON: per-event histograms with units and budgets, and the over-budget frames with their deltas.
#include <nlohmann/json.hpp>

#include "output/histogram_json.hpp"
#include "output/json_text.hpp"
#include "selfperf/frame_loop.hpp"

namespace selfperf {

std::string FrameLoop::to_json() const {
  // event_unit() is "" for counts, which a reader should not have to know: say "count".
  auto unit = [&](std::size_t i) { return units_[i].empty() ? std::string("count") : units_[i]; };
  nlohmann::ordered_json out;
  out["frames"] = frames_;
  out["wall_budget_ns"] = wall_budget_ns_;
  out["wall"] = detail::histogram_to_json(histograms_[0], "wall", "ns");
  auto& events = out["events"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < names_.size(); ++i)
    events.push_back({{"name", names_[i]},
                      {"unit", unit(i)},
                      {"budget", budgets_[i]},
                      {"not_counted", not_counted_[i]},
                      {"histogram", detail::histogram_to_json(histograms_[i + 1], names_[i], unit(i))}});
  out["over_budget_count"] = over_budget_total_;
  out["over_budget_dropped"] = over_budget_dropped();
  auto& frames = out["over_budget_frames"] = nlohmann::ordered_json::array();
  for (const FrameRecord& frame : over_budget_frames()) {
    nlohmann::ordered_json f;
    f["index"] = frame.index;
    f["wall_ns"] = frame.wall_ns;
    auto& deltas = f["deltas"] = nlohmann::ordered_json::object();
    auto& exceeded = f["exceeded"] = nlohmann::ordered_json::array();
    if (frame.over_wall_budget()) exceeded.push_back("wall");
    for (std::size_t i = 0; i < names_.size(); ++i) {
      // A member not counted during the frame has no delta: null, not 0.
      deltas[names_[i]] = frame.counted[i] ? nlohmann::ordered_json(frame.deltas[i]) : nlohmann::ordered_json();
      if (frame.over_event_budget(i)) exceeded.push_back(names_[i]);
    }
    frames.push_back(std::move(f));
  }
  return detail::dump_json(out);
}

}  // namespace selfperf
