// selfperf report: what a perf.data file (ours or perf record's, file or pipe mode) says: the top functions by
// self and inclusive samples, per process with --sort comm, or the folded stacks / SVG flame graph.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "pprof.hpp"
#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_symbolizer.hpp"

namespace selfperf::tool {
namespace {

constexpr const char* kUsage =
    "usage: selfperf report [-i FILE] [-n N] [--sort sym|comm] [--comm] [--folded OUT] [--svg OUT]\n"
    "  Reads FILE (default perf.data; - for a pipe-mode stream on standard input), ours or perf record's.\n"
    "  -n N          rows of the table (default 20)\n"
    "  --sort comm   samples per process instead of per function\n"
    "  --comm        stacks rooted at their process name (in --folded and --svg)\n"
    "  --folded OUT  folded stacks (flamegraph.pl, speedscope, inferno); --svg OUT  SVG flame graph\n"
    "  --pprof OUT   gzipped profile.proto (go tool pprof, Pyroscope, Parca)\n";

void write_file(const std::string& path, const std::string& what, auto write) {
  std::ofstream out(path);
  if (!out) throw Error("cannot write " + what + " to " + path);
  write(out);
  if (!out) throw Error("writing " + what + " to " + path + " failed");
  std::fprintf(stderr, "selfperf report: %s in %s\n", what.c_str(), path.c_str());
}

}  // namespace

int report_main(int argc, char** argv) {
  std::string input = "perf.data", sort = "sym", folded, svg, pprof;
  std::size_t rows = 20;
  bool comm_root = false;
  Options o("report", kUsage, argc, argv);
  while (o.next()) {
    if (o.is("-i", "--input")) {
      input = o.value();
    } else if (o.is("-n")) {
      rows = o.positive_value();
    } else if (o.is("-s", "--sort")) {
      sort = o.value();
      if (sort != "sym" && sort != "comm") o.fail("--sort takes sym or comm, not '" + sort + "'");
    } else if (o.is("--comm")) {
      comm_root = true;
    } else if (o.is("--folded")) {
      folded = o.value();
    } else if (o.is("--svg")) {
      svg = o.value();
    } else if (o.is("--pprof")) {
      pprof = o.value();
    } else {
      o.unknown();
    }
  }
  if (const auto extra = o.rest(); !extra.empty()) o.fail("unexpected argument '" + extra[0] + "'");
  try {
    PerfDataReader reader{std::filesystem::path(input)};
    std::string event = reader.events().empty() ? "?" : reader.events()[0].name;
    if (sort == "comm") {
      std::map<std::string, std::uint64_t> per_comm;
      std::uint64_t total = 0;
      PerfDataSymbolizer symbolizer;
      for_each_record_in_time_order(reader, [&](const PerfRecord& rec) {
        if (rec.type != PERF_RECORD_SAMPLE) {
          symbolizer.observe(reader, rec);
          return;
        }
        auto s = reader.decode_sample(rec);
        ++per_comm[symbolizer.comm(s.pid) + " " + std::to_string(s.pid)];
        ++total;
      });
      std::printf("# %llu samples of %s in %s\n#   Share  Samples  Command Pid\n",
                  static_cast<unsigned long long>(total), event.c_str(), input.c_str());
      std::vector<std::pair<std::uint64_t, std::string>> by_count;
      for (const auto& [name, n] : per_comm) by_count.emplace_back(n, name);
      std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [n, name] : by_count)
        std::printf("  %6.2f%%  %7llu  %s\n", total ? 100.0 * static_cast<double>(n) / static_cast<double>(total) : 0.0,
                    static_cast<unsigned long long>(n), name.c_str());
      return 0;
    }
    StackCounts stacks = perf_data_stacks(reader, {.comm_root = comm_root});
    if (stacks.empty()) {
      std::fprintf(stderr, "selfperf report: %s has no samples\n", input.c_str());
      return 1;
    }
    std::printf("# %llu samples of %s in %s\n", static_cast<unsigned long long>(stacks.total()), event.c_str(),
                input.c_str());
    // The table counts functions, not processes: without --comm roots.
    StackCounts table = comm_root ? perf_data_stacks(reader) : stacks;
    std::fputs(format_top_table(table, rows).c_str(), stdout);
    if (!folded.empty()) write_file(folded, "folded stacks", [&](std::ostream& o) { stacks.write_folded(o); });
    if (!pprof.empty()) {
      PprofOptions po;
      const auto& attr = reader.events()[0].attr;
      // A clock event's period is nanoseconds: pprof then shows CPU time beside the samples.
      bool clock = attr.type == PERF_TYPE_SOFTWARE &&
                   (attr.config == PERF_COUNT_SW_CPU_CLOCK || attr.config == PERF_COUNT_SW_TASK_CLOCK);
      if (clock && attr.freq && attr.sample_freq) po.period_ns = 1'000'000'000ULL / attr.sample_freq;
      if (clock && !attr.freq) po.period_ns = attr.sample_period;
      write_file(pprof, "pprof profile", [&](std::ostream& o) { write_pprof(table, o, po); });
    }
    if (!svg.empty())
      write_file(svg, "flame graph", [&](std::ostream& o) {
        write_flame_graph_svg(stacks, o, {.title = "selfperf report " + input});
      });
  } catch (const Error& e) {
    std::fprintf(stderr, "selfperf report: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace selfperf::tool
