// SVG flame graph: stacks merged into a tree, root at the bottom, siblings in name order (as FlameGraph does).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>

#include "selfperf/flame_graph.hpp"
#include "output/flame_graph_svg_script.hpp"
#include "output/xml_text.hpp"

namespace selfperf {
namespace {

struct Node {
  std::uint64_t count = 0;
  std::map<std::string, std::unique_ptr<Node>> children;
};

std::size_t build_tree(const StackCounts& stacks, Node& root) {
  std::size_t max_depth = 0;
  for (const auto& [line, count] : stacks.folded()) {
    Node* node = &root;
    root.count += count;
    std::size_t depth = 0, start = 0;
    while (start <= line.size()) {
      auto end = line.find(';', start);
      if (end == std::string::npos) end = line.size();
      auto& child = node->children[line.substr(start, end - start)];
      if (!child) child = std::make_unique<Node>();
      child->count += count;
      node = child.get();
      ++depth;
      start = end + 1;
    }
    max_depth = std::max(max_depth, depth);
  }
  return max_depth;
}

// Warm colours seeded by the name, so a function keeps its colour across graphs.
std::string colour(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  auto part = [&](int shift) { return static_cast<double>((h >> shift) & 0xff) / 255.0; };
  char buf[32];
  std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 205 + static_cast<int>(50 * part(0)),
                static_cast<int>(230 * part(8)), static_cast<int>(55 * part(16)));
  return buf;
}

struct Layout {
  const FlameGraphOptions& opt;
  std::ostream& out;
  double total;
  double pixels_per_count;
  unsigned height;
  unsigned pad_top;

  // `at` is the frame's offset in counts; the script needs it (data-x) only where a sibling before it was left
  // out, since everywhere else it is its parent's offset plus the counts of the siblings drawn before it.
  // Returns whether the frame was drawn.
  bool frame(const std::string& name, const Node& node, double x, std::uint64_t at, bool after_gap,
             std::size_t depth) {
    const double width = static_cast<double>(node.count) * pixels_per_count;
    if (width < opt.min_width) return false;
    const double y = height - static_cast<double>((depth + 1) * opt.frame_height) - 10;
    char buf[256];
    const double percent = total > 0 ? 100.0 * static_cast<double>(node.count) / total : 0;
    std::snprintf(buf, sizeof buf, " (%llu %s, %.2f%%)", static_cast<unsigned long long>(node.count),
                  opt.count_name.c_str(), percent);
    if (after_gap) out << "<g data-x=\"" << at << "\">";
    else out << "<g>";
    out << "<title>" << detail::xml_escape(name) << detail::xml_escape(buf) << "</title>";
    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%u\" fill=\"", x, y, width,
                  opt.frame_height - 1);
    out << buf << colour(name) << "\" rx=\"2\" ry=\"2\"/>";
    // Average glyph width of a proportional sans font is about 0.59 of its size (FlameGraph's estimate).
    const auto fits = static_cast<std::size_t>(width / (opt.font_size * 0.59));
    if (fits >= 3) {
      std::string label = name.size() <= fits ? name : name.substr(0, fits - 2) + "..";
      std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + opt.frame_height - 5);
      out << buf << detail::xml_escape(label) << "</text>";
    }
    out << "</g>\n";
    double child_x = x;
    std::uint64_t child_at = at;
    bool gap = false;
    for (const auto& [child_name, child] : node.children) {
      if (!frame(child_name, *child, child_x, child_at, gap, depth + 1)) gap = true;
      child_x += static_cast<double>(child->count) * pixels_per_count;
      child_at += child->count;
    }
    return true;
  }
};

}  // namespace

void write_flame_graph_svg(const StackCounts& stacks, std::ostream& out, const FlameGraphOptions& options) {
  Node root;
  const std::size_t depth = build_tree(stacks, root);
  const unsigned pad_top = 40, pad_side = 10;
  const unsigned height = pad_top + static_cast<unsigned>(depth + 1) * options.frame_height + 20;
  const double usable = options.width > 2 * pad_side ? options.width - 2 * pad_side : 1;
  out << "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      << "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << options.width << "\" height=\""
      << height << "\" viewBox=\"0 0 " << options.width << ' ' << height << "\">\n"
      << "<style>text { font-family: Verdana, sans-serif; font-size: " << options.font_size
      << "px; fill: rgb(0,0,0); pointer-events: none; } rect:hover { stroke: black; stroke-width: 0.5; }</style>\n"
      << "<rect x=\"0\" y=\"0\" width=\"" << options.width << "\" height=\"" << height
      << "\" fill=\"rgb(248,248,248)\"/>\n"
      << "<text x=\"" << options.width / 2 << "\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">"
      << detail::xml_escape(options.title) << "</text>\n";
  if (root.count == 0) {
    out << "<text x=\"" << options.width / 2 << "\" y=\"" << height / 2
        << "\" text-anchor=\"middle\">no samples</text>\n</svg>\n";
    return;
  }
  Layout layout{options, out, static_cast<double>(root.count), usable / static_cast<double>(root.count), height,
                pad_top};
  out << "<g id=\"frames\">\n";
  layout.frame("all", root, pad_side, 0, false, 0);
  out << "</g>\n";
  out << detail::flame_graph_svg_script(options.width, options.font_size, options.frame_height, options.count_name);
  out << "</svg>\n";
}

}  // namespace selfperf
