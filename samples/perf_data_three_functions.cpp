// Writes a perf.data profile of three functions with known shares (50/30/20 %), for checking that perf report,
// perf script and flame graph tools read selfperf's files.
//
// The deterministic counterpart of profile_three_functions (which runs the real Sampler): the "samples" are
// real stacks captured inside the functions in exact proportion to their shares, so what is checked is only
// that the file carries them the way perf expects.
//
//   perf_data_three_functions OUT.data [rounds]
// writes OUT.data, OUT.data.folded and OUT.data.svg and prints the top functions.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "selfperf/error.hpp"
#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/symbolizer.hpp"
#include "selfperf/unwind.hpp"

namespace {

constexpr std::uint64_t kPeriodNs = 1'000'000;  // what a 1 kHz cpu-clock sample stands for

struct Recorder {
  selfperf::PerfDataWriter& writer;
  selfperf::Symbolizer& symbolizer;
  selfperf::StackCounts& stacks;
  selfperf::StackBounds stack;

  [[gnu::noinline]] void capture() {
    // The stack as a sample interrupting our caller would see it: IP in the caller, then its callers by the
    // frame-pointer chain (never read outside this thread's stack).
    auto* frame = static_cast<std::uint64_t*>(__builtin_frame_address(0));
    selfperf::RegisterState regs;
    regs.ip = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    regs.fp = frame[0];
    regs.sp = reinterpret_cast<std::uintptr_t>(frame + 2);
    std::uint64_t frames[128];
    const std::size_t nframes = selfperf::unwind_frame_pointer(regs, stack, frames);
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    selfperf::Sample s;
    s.pid = ::getpid();
    s.tid = ::gettid();
    s.time = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
    s.period = kPeriodNs;
    int cpu = ::sched_getcpu();
    s.cpu = cpu < 0 ? 0 : static_cast<std::uint32_t>(cpu);
    s.frames = {frames, nframes};
    writer.write_sample(s);
    stacks.add_leaf_first(symbolizer.stack_names(s.frames));
  }
};

volatile std::uint64_t sink;

void spin(int iterations) {
  std::uint64_t x = sink;
  for (int i = 0; i < iterations; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  sink = x;
}

[[gnu::noinline, gnu::noipa]] void burn_alpha(Recorder& r, int samples) {
  for (int i = 0; i < samples; ++i) {
    spin(1000);
    r.capture();
  }
  spin(10);
}

[[gnu::noinline, gnu::noipa]] void burn_beta(Recorder& r, int samples) {
  for (int i = 0; i < samples; ++i) {
    spin(1100);
    r.capture();
  }
  spin(10);
}

[[gnu::noinline, gnu::noipa]] void burn_gamma(Recorder& r, int samples) {
  for (int i = 0; i < samples; ++i) {
    spin(1200);
    r.capture();
  }
  spin(10);
}

[[gnu::noinline]] void run_workload(Recorder& r, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    burn_alpha(r, 5);
    burn_beta(r, 3);
    burn_gamma(r, 2);
    r.writer.write_finished_round();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.data [rounds]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 100;
  try {
    selfperf::EventDescription ev;
    ev.name = "cpu-clock:u";
    ev.attr.type = PERF_TYPE_SOFTWARE;
    ev.attr.config = PERF_COUNT_SW_CPU_CLOCK;
    ev.attr.sample_period = kPeriodNs;
    ev.attr.exclude_kernel = 1;
    ev.attr.exclude_hv = 1;
    ev.attr.use_clockid = 1;
    ev.attr.clockid = CLOCK_MONOTONIC;
    selfperf::PerfDataWriter writer(out, {ev});
    selfperf::Symbolizer symbolizer;
    selfperf::StackCounts stacks;
    Recorder recorder{writer, symbolizer, stacks, selfperf::StackBounds::of_this_thread()};
    run_workload(recorder, rounds);
    writer.close();

    std::ofstream folded(out + ".folded");
    stacks.write_folded(folded);
    std::ofstream svg(out + ".svg");
    selfperf::FlameGraphOptions options;
    options.title = "selfperf: three functions";
    selfperf::write_flame_graph_svg(stacks, svg, options);
    if (!folded || !svg) throw selfperf::Error("cannot write " + out + ".folded / .svg");
    std::cout << "wrote " << out << " (" << writer.samples_written() << " samples), " << out << ".folded, " << out
              << ".svg\n"
              << selfperf::format_top_table(stacks, 8);
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "perf_data_three_functions: %s\n", e.what());
    return 1;
  }
  return 0;
}
