#pragma once
// Stack profiles as flame graph tools take them: folded stacks (`root;caller;leaf count`, the format of
// FlameGraph's stackcollapse, inferno and speedscope), an SVG flame graph, and a top-N table.
#include <cstdint>
#include <iosfwd>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace selfperf {

class StackCounts {
 public:
  // A stack of function names, outermost caller first; `count` samples (or period) land on it.
  void add(std::span<const std::string> root_first, std::uint64_t count = 1);
  // The same, leaf first, as samples and Symbolizer::stack_names give it.
  void add_leaf_first(std::span<const std::string> leaf_first, std::uint64_t count = 1);

  std::uint64_t total() const noexcept { return total_; }
  bool empty() const noexcept { return folded_.empty(); }
  // "root;…;leaf" → count, sorted, as the folded format lists it.
  const std::map<std::string, std::uint64_t>& folded() const noexcept { return folded_; }

  // One `root;…;leaf count` line per distinct stack.
  void write_folded(std::ostream& out) const;
  // Reads folded lines (blank lines ignored); throws selfperf::Error naming the line for malformed input.
  static StackCounts read_folded(std::istream& in);

 private:
  std::map<std::string, std::uint64_t> folded_;
  std::uint64_t total_ = 0;
};

struct FlameGraphOptions {
  std::string title = "Flame Graph";
  std::string count_name = "samples";
  unsigned width = 1200;        // pixels
  unsigned frame_height = 16;   // pixels per stack level
  unsigned font_size = 12;
  double min_width = 0.1;       // frames narrower than this many pixels are left out
};

// A self-contained SVG: one rectangle per frame, width proportional to its count, warm colours by name,
// names truncated to fit, and a hover <title> with the count and percentage of the total. Opened in a browser
// it is interactive (an inline script, nothing fetched): click a frame to zoom to it, "Reset zoom", "Search"
// (a regular expression or text: matches highlighted, their share shown). Where scripts do not run (an <img>,
// an image viewer) it is the same picture without the controls.
void write_flame_graph_svg(const StackCounts& stacks, std::ostream& out, const FlameGraphOptions& options = {});

struct FunctionShare {
  std::string name;
  std::uint64_t self = 0;       // samples with the function as leaf
  std::uint64_t inclusive = 0;  // samples with the function anywhere on the stack (counted once per stack)
  double self_percent = 0;
  double inclusive_percent = 0;
};

// The `n` functions with the most self samples (ties broken by inclusive, then name).
std::vector<FunctionShare> top_functions(const StackCounts& stacks, std::size_t n);
// A text table of top_functions: "  Self%  Incl%  Samples  Function".
std::string format_top_table(const StackCounts& stacks, std::size_t n);

}  // namespace selfperf
