// selfperf: the command line, simpleperf-style: one program, one command per job.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"

namespace {

constexpr const char* kUsage =
    "usage: selfperf COMMAND [ARGS]\n"
    "  record   profile a command and every process it starts, or running processes (-p PID), into one perf.data\n"
    "  list     the events that open here, by group\n"
    "  stat     count a command or a running process (-p PID), as perf stat\n"
    "  report   top functions, folded stacks or a flame graph of a perf.data (ours or perf's)\n"
    "  dump     every record of a perf.data, as perf report -D\n"
    "selfperf COMMAND --help tells more.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "record") return selfperf::tool::record_main(argc - 2, argv + 2);
  if (command == "stat") return selfperf::tool::stat_main(argc - 2, argv + 2);
  if (command == "list") return selfperf::tool::list_main(argc - 2, argv + 2);
  if (command == "report") return selfperf::tool::report_main(argc - 2, argv + 2);
  if (command == "dump") return selfperf::tool::dump_main(argc - 2, argv + 2);
  std::fprintf(stderr, "selfperf: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
