#pragma once
// The region report as a JSON value, for report_json() to embed with its event-set description.
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "selfperf/region.hpp"

namespace selfperf::detail {

nlohmann::ordered_json regions_to_json(std::span<const std::string> events, std::span<const Region* const> regions);

}  // namespace selfperf::detail
