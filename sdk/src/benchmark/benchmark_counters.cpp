#include "selfperf/benchmark.hpp"

#include <map>
#include <memory>
#include <string_view>

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

BenchmarkCounters::BenchmarkCounters(benchmark::State& state, const std::vector<std::string>& events)
    : state_(state), group_(&group_for(events)) {
  group_->read(before_);
}

BenchmarkCounters::~BenchmarkCounters() { stop(); }

void BenchmarkCounters::stop() {
  if (stopped_) return;
  stopped_ = true;
  GroupReading after;
  group_->read(after);
  const CounterGroup& g = *group_;
  std::vector<double> totals(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    CounterDelta d = delta(before_[i], after[i]);
    totals[i] = d.scaled();
    // "Not counted" must not read as a measured zero: report it under its own name.
    if (!d.counted()) state_.counters[g.event(i).name + " (not counted)"] = 1;
    else state_.counters[g.event(i).name] = benchmark::Counter(totals[i], benchmark::Counter::kAvgIterations);
  }
  auto ratio = [&](const char* name, int num, int den, double scale) {
    if (num >= 0 && den >= 0 && totals[static_cast<std::size_t>(den)] > 0)
      state_.counters[name] = scale * totals[static_cast<std::size_t>(num)] / totals[static_cast<std::size_t>(den)];
  };
  ratio("IPC", index_of(g, {"instructions"}), index_of(g, {"cycles", "cpu-cycles"}), 1.0);
  ratio("branch-miss%", index_of(g, {"branch-misses"}), index_of(g, {"branches", "branch-instructions"}), 100.0);
  ratio("cache-miss%", index_of(g, {"cache-misses"}), index_of(g, {"cache-references"}), 100.0);
}

}  // namespace selfperf
