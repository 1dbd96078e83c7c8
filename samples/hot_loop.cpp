// Counting a hot loop with a CounterGroup: the events a perf user would name, the read path, and why.
#include <cstdio>
#include <vector>

#include <selfperf/selfperf.hpp>

namespace {

[[gnu::noinline]] double hot_loop(std::vector<double>& data, int rounds) {
  double sum = 0;
  for (int r = 0; r < rounds; ++r)
    for (double& x : data) {
      x = x * 1.0000001 + 0.5;
      sum += x;
    }
  return sum;
}

}  // namespace

int main() {
  auto caps = selfperf::probe();
  std::vector<std::string> events = caps.hardware_events
                                        ? std::vector<std::string>{"cycles", "instructions", "branch-misses"}
                                        : std::vector<std::string>{"task-clock", "page-faults", "context-switches"};
  std::printf("counting %s events: ", caps.hardware_events ? "hardware" : "software (no hardware PMU here)");
  for (const auto& e : events) std::printf("%s ", e.c_str());
  std::printf("\n");

  selfperf::CounterGroup group(events);
  for (const auto& note : group.notes()) std::printf("note: %s\n", note.c_str());
  group.enable();
  auto before = group.read();
  std::vector<double> data(1 << 20, 1.0);  // 8 MiB: its first touch shows up as page faults
  double sum = hot_loop(data, 20);
  auto after = group.read();
  group.disable();

  std::printf("\n%-20s %16s %14s %8s\n", "event", "count", "scaled", "running");
  for (std::size_t i = 0; i < group.size(); ++i) {
    auto d = selfperf::delta(before[i], after[i]);
    std::printf("%-20s %16llu %14.0f %7.1f%%\n", group.event(i).name.c_str(),
                static_cast<unsigned long long>(d.count), d.scaled(),
                d.time_enabled ? 100.0 * static_cast<double>(d.time_running) / static_cast<double>(d.time_enabled) : 0.0);
  }
  std::printf("\nread path: %.*s\n", static_cast<int>(group.read_path().size()), group.read_path().data());
  std::printf("(checksum %.1f)\n", sum);
  return 0;
}
