// check_flame_svg_zoom.sh's input: an SVG flame graph of a folded-stacks file it makes up (frames left out as too
// narrow among the ones it zooms, which perf_data_three_functions's profile never has).
//   flame_svg_from_folded IN.folded OUT.svg
#include <cstdio>
#include <fstream>

#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.folded OUT.svg\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw selfperf::Error(std::string("cannot read ") + argv[1]);
    const auto stacks = selfperf::StackCounts::read_folded(in);
    std::ofstream out(argv[2]);
    selfperf::write_flame_graph_svg(stacks, out);
    if (!out) throw selfperf::Error(std::string("cannot write ") + argv[2]);
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "flame_svg_from_folded: %s\n", e.what());
    return 1;
  }
  return 0;
}
