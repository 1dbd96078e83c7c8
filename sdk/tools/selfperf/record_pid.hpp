#pragma once
// selfperf record -p PID[,PID...]: samples running processes (ProcessWatcher) into a perf.data, with its
// folded stacks and flame graph, until Ctrl-C/SIGTERM, --duration, or every process has exited.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace selfperf::tool {

struct RecordPidArgs {
  std::vector<pid_t> pids;
  std::filesystem::path output = "perf.data";
  std::string frequency;   // empty: 999
  std::string event;       // empty: cpu-clock
  std::string call_graph;  // kernel (default) or fp: the kernel's frame-pointer walk; dwarf: stack copies
  std::size_t stack_copy = 0;  // dwarf: bytes of stack each sample copies; 0: kDefaultStackCopy
  double duration = 0;     // seconds; 0: until interrupted or every process exited
  bool quiet = false;
  bool inherit = true;     // follow the threads and processes started later (--no-inherit: false)
};

// Parses "PID[,PID...]"; false on anything else.
bool parse_pid_list(const std::string& text, std::vector<pid_t>& out);

int record_pids(const RecordPidArgs& args);

}  // namespace selfperf::tool
