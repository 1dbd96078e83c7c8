#pragma once
// The script that makes selfperf's SVG flame graph interactive (click to zoom, search, reset), kept apart from
// the drawing so that the picture stays what it is where scripts do not run.
#include <string>

namespace selfperf::detail {

// A <script> element for the end of the SVG. It reads everything it needs from the frames the writer drew
// (<g id="frames">: one <g> per frame in pre-order, its <title> "name (count …", its <rect>, an optional
// <text>, and data-x, the frame's offset in counts, where a left-out sibling before it breaks the running sum).
std::string flame_graph_svg_script(unsigned width, unsigned font_size, unsigned frame_height,
                                   const std::string& count_name);

}  // namespace selfperf::detail
