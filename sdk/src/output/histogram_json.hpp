#pragma once
// A histogram as a JSON value, for FrameLoop's report to embed.
#include <string>

#include <nlohmann/json.hpp>

#include "selfperf/histogram.hpp"

namespace selfperf::detail {

nlohmann::ordered_json histogram_to_json(const Histogram& histogram, const std::string& title, const std::string& unit);

}  // namespace selfperf::detail
