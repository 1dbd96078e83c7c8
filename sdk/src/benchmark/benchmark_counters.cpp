#include "selfperf/benchmark.hpp"

#include <map>
#include <memory>
#include <string_view>

#include "selfperf/error.hpp"
#include "selfperf/histogram.hpp"
#include "selfperf/instrument.hpp"

namespace selfperf {

namespace {

// Google Benchmark calls a benchmark function several times (to pick the iteration count, then for each
// repetition): the group is opened once per thread and event set, not per call.
CounterGroup& group_for(const std::vector<std::string>& events) {
  thread_local std::map<std::vector<std::string>, std::unique_ptr<CounterGroup>> groups;
  auto& group = groups[events];
  if (!group) {
    group = std::make_unique<CounterGroup>(events);
    group->enable();
  }
  return *group;
}

std::string_view base_name(std::string_view name) { return name.substr(0, name.find(':')); }

int index_of(const CounterGroup& group, std::initializer_list<std::string_view> names) {
  for (std::size_t i = 0; i < group.size(); ++i)
    for (auto n : names)
      if (base_name(group.event(i).name) == n) return static_cast<int>(i);
  return -1;
}

}  // namespace

BenchmarkCounters::BenchmarkCounters(benchmark::State& state) : BenchmarkCounters(state, default_events()) {}

BenchmarkCounters::BenchmarkCounters(benchmark::State& state, const std::vector<std::string>& events,
                                     BenchmarkCounterOptions options)
    : state_(state), per_iteration_(options.per_iteration) {
  try {
    group_ = &group_for(events);
  } catch (const std::exception& e) {
    // Google Benchmark's way to fail one benchmark: the run is reported with this message and the next
    // benchmark runs. An exception would leave the benchmark function and end the whole program.
    state.SkipWithError(e.what());
    return;
  }
  if (options.per_iteration) histograms_ = std::make_unique<Histogram[]>(group_->size());
  group_->read(before_);
}

BenchmarkCounters::Iteration BenchmarkCounters::iteration() {
  if (!per_iteration_)
    throw Error("BenchmarkCounters::iteration() needs the per-iteration mode: construct with "
                "BenchmarkCounterOptions{.per_iteration = true}");
  return Iteration(*this);
}

BenchmarkCounters::Iteration::Iteration(BenchmarkCounters& counters) : counters_(counters) {
  if (counters_.group_) counters_.group_->read(before_);
}

BenchmarkCounters::Iteration::~Iteration() {
  if (!counters_.group_) return;  // skipped: the events did not open
  GroupReading after;
  counters_.group_->read(after);
  for (std::size_t i = 0; i < counters_.group_->size(); ++i) {
    CounterDelta d = delta(before_[i], after[i]);
    if (d.counted()) counters_.histograms_[i].record(static_cast<std::uint64_t>(d.scaled() + 0.5));
  }
}

BenchmarkCounters::~BenchmarkCounters() { stop(); }

// Flags, so that a benchmark run with ->Threads(N) reports what one thread reports. Google Benchmark sums every
// counter over the threads; kAvgIterations then divides by the iterations of all threads together, which makes
// event totals per iteration (and per thread). Percentiles, maxima and ratios are already per iteration: only
// the thread sum is undone (kAvgThreads: the mean over threads of each thread's value).
const benchmark::Counter::Flags kPerIteration = benchmark::Counter::kAvgIterations;
const benchmark::Counter::Flags kPerThread = benchmark::Counter::kAvgThreads;

void BenchmarkCounters::stop() {
  if (stopped_ || !group_) return;
  stopped_ = true;
  GroupReading after;
  group_->read(after);
  const CounterGroup& g = *group_;
  std::vector<double> totals(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    CounterDelta d = delta(before_[i], after[i]);
    totals[i] = d.scaled();
    // "Not counted" must not read as a measured zero: report it under its own name (the fraction of threads).
    if (!d.counted()) state_.counters[g.event(i).name + "_not_counted"] = benchmark::Counter(1, kPerThread);
    else state_.counters[g.event(i).name] = benchmark::Counter(totals[i], kPerIteration);
  }
  if (histograms_)
    for (std::size_t i = 0; i < g.size(); ++i) {
      const Histogram& h = histograms_[i];
      if (h.empty()) continue;
      state_.counters[g.event(i).name + "_p50"] = benchmark::Counter(static_cast<double>(h.p50()), kPerThread);
      state_.counters[g.event(i).name + "_p99"] = benchmark::Counter(static_cast<double>(h.p99()), kPerThread);
      state_.counters[g.event(i).name + "_max"] = benchmark::Counter(static_cast<double>(h.max()), kPerThread);
    }
  auto ratio = [&](const char* name, int num, int den, double scale) {
    if (num >= 0 && den >= 0 && totals[static_cast<std::size_t>(den)] > 0)
      state_.counters[name] = benchmark::Counter(
          scale * totals[static_cast<std::size_t>(num)] / totals[static_cast<std::size_t>(den)], kPerThread);
  };
  ratio("IPC", index_of(g, {"instructions"}), index_of(g, {"cycles", "cpu-cycles"}), 1.0);
  ratio("branch_miss%", index_of(g, {"branch-misses"}), index_of(g, {"branches", "branch-instructions"}), 100.0);
  ratio("cache_miss%", index_of(g, {"cache-misses"}), index_of(g, {"cache-references"}), 100.0);
}

}  // namespace selfperf
