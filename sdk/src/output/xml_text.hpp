#pragma once
// Text placed in SVG (flame graphs, histograms): the one XML escaper both use.
#include <string>

namespace selfperf::detail {

// &, <, > and " as entities; control characters (not allowed in XML 1.0) as spaces.
std::string xml_escape(const std::string& text);

}  // namespace selfperf::detail
