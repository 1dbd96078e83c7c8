// selfperf stat: counts a command (forked, held until the counters are open, counted from its exec on, as
// perf stat does) or a running process (-p, until it exits or Ctrl-C), and prints perf stat's table.
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/task_counters.hpp"

namespace selfperf::tool {
namespace {

constexpr const char* kUsage =
    "usage: selfperf stat [-e EVENT[,EVENT...]] [--per-thread] [-x SEP] (-p PID | [--] CMD [ARG...])\n"
    "  Counts CMD (from its exec on, children and threads included) or the running process PID (its threads,\n"
    "  and those it starts, until it exits or Ctrl-C), and prints the counts as perf stat does.\n"
    "  -e EVENTS      events as perf writes them (default: task-clock, context-switches, cpu-migrations,\n"
    "                 page-faults, and cycles, instructions, branches, branch-misses where a PMU has them)\n"
    "  -p PID         attach to a running process instead of starting CMD\n"
    "  --per-thread   one line per thread and event (with -p)\n"
    "  -x SEP         CSV-like output: value, unit, event, running time, percentage, as perf stat -x\n";

struct StatArgs {
  std::vector<std::string> events;
  pid_t pid = 0;
  bool per_thread = false;
  std::string separator;
  std::vector<std::string> command;
  std::vector<std::string> not_supported;  // default hardware events this PMU does not count
};

StatArgs parse(int argc, char** argv) {
  StatArgs a;
  Options o("stat", kUsage, argc, argv);
  while (o.next()) {
    if (o.is("-e", "--event")) {
      for (auto& group : split_event_groups(o.value()))
        for (auto& e : group) a.events.push_back(e);
    } else if (o.is("-p", "--pid")) {
      a.pid = static_cast<pid_t>(o.positive_value());
    } else if (o.is("--per-thread")) {
      a.per_thread = true;
    } else if (o.is("-x", "--field-separator")) {
      a.separator = o.value();
    } else if (o.arg().rfind("-x", 0) == 0) {  // perf's -x, form
      a.separator = o.arg().substr(2);
    } else {
      o.unknown();
    }
  }
  a.command = o.rest();
  if (a.pid != 0 && !a.command.empty()) o.fail("give either -p PID or a command, not both");
  if (a.pid == 0 && a.command.empty()) o.fail("no command to count (and no -p PID)");
  if (a.events.empty()) {
    a.events = {"task-clock", "context-switches", "cpu-migrations", "page-faults"};
    // Only the hardware events this PMU counts: perf stat prints <not supported> for the others; ours would
    // fail the command on the first (QEMU's PMUv3 has cycles and instructions only).
    if (detail::hardware_cycles_available())
      for (auto& e : detail::events_that_open({"cycles", "instructions", "branches", "branch-misses"},
                                              a.not_supported))
        a.events.push_back(std::move(e));
  }
  return a;
}

std::string with_commas(std::uint64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool is_clock(const std::string& event) { return event.rfind("task-clock", 0) == 0 || event.rfind("cpu-clock", 0) == 0; }

void print_line(const TaskCount& c, const std::string& separator, const std::string& prefix) {
  if (!separator.empty()) {
    // perf stat -x: value, unit, event, run time, percentage running.
    std::string value = !c.counted() ? "<not counted>"
                        : is_clock(c.event) ? std::to_string(c.scaled() / 1e6)
                                            : std::to_string(static_cast<std::uint64_t>(c.scaled() + 0.5));
    std::printf("%s%s%s%s%s%s%s%llu%s%.2f\n", prefix.c_str(), value.c_str(), separator.c_str(),
                is_clock(c.event) && c.counted() ? "msec" : "", separator.c_str(), c.event.c_str(),
                separator.c_str(), static_cast<unsigned long long>(c.time_running), separator.c_str(),
                c.running_percent());
    return;
  }
  std::string value;
  if (!c.counted())
    value = "<not counted>";
  else if (is_clock(c.event)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f msec", c.scaled() / 1e6);
    value = buf;
  } else {
    value = with_commas(static_cast<std::uint64_t>(c.scaled() + 0.5));
  }
  std::printf("%s%18s      %-30s", prefix.c_str(), value.c_str(), c.event.c_str());
  if (c.counted() && c.running_percent() < 99.995) std::printf("  (%.2f%%)", c.running_percent());
  std::printf("\n");
}

// Holds a forked child before its exec until the counters are open; reports an exec failure through a
// close-on-exec pipe (EOF on it means the exec happened).
struct HeldChild {
  pid_t pid = -1;
  int go = -1;
  int exec_error = -1;
};

HeldChild fork_held(const std::vector<std::string>& command) {
  int go[2], err[2];
  if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    throw Error(std::string("selfperf stat: pipe: ") + std::strerror(errno), errno);
  std::vector<char*> argv;
  for (const auto& s : command) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("selfperf stat: fork: ") + std::strerror(errno), errno);
  if (pid == 0) {
    ::close(go[1]);
    ::close(err[0]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(127);  // the parent gave up (an event did not open)
    ::execvp(argv[0], argv.data());
    int e = errno;
    ssize_t ignored = ::write(err[1], &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  ::close(go[0]);
  ::close(err[1]);
  return {pid, go[1], err[0]};
}

volatile std::sig_atomic_t interrupted = 0;
void on_sigint(int) { interrupted = 1; }

// Waits until `pid` exits (it is not our child: a pidfd tells) or Ctrl-C.
void wait_for_exit_or_interrupt(pid_t pid) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  while (!interrupted) {
    if (pidfd < 0) {  // kernels before 5.3: poll the process's existence
      if (::kill(pid, 0) != 0 && errno == ESRCH) break;
      ::poll(nullptr, 0, 100);
      continue;
    }
    pollfd p{pidfd, POLLIN, 0};
    int n = ::poll(&p, 1, -1);
    if (n > 0) break;
  }
  if (pidfd >= 0) ::close(pidfd);
}

}  // namespace

int stat_main(int argc, char** argv) {
  StatArgs args = parse(argc, argv);
  int status_out = 0;
  std::string what;
  try {
    auto started = std::chrono::steady_clock::now();
    std::vector<TaskCount> counts;
    if (args.pid != 0) {
      what = "process id '" + std::to_string(args.pid) + "'";
      TaskCounters counters(args.events, threads_of(args.pid));
      counters.enable();
      wait_for_exit_or_interrupt(args.pid);
      counters.disable();
      counts = args.per_thread ? counters.read() : counters.read_totals();
    } else {
      what = "'";
      for (std::size_t i = 0; i < args.command.size(); ++i) what += (i ? " " : "") + args.command[i];
      what += "'";
      HeldChild child = fork_held(args.command);
      std::optional<TaskCounters> counters;
      try {
        counters.emplace(args.events, std::vector<pid_t>{child.pid}, TaskCounterOptions{.enable_on_exec = true});
      } catch (...) {
        ::close(child.go);  // the child reads EOF and exits without running the command
        ::waitpid(child.pid, nullptr, 0);
        throw;
      }
      // SIGINT goes to the whole foreground group: the command decides, we report what was counted.
      std::signal(SIGINT, SIG_IGN);
      started = std::chrono::steady_clock::now();
      if (::write(child.go, "x", 1) != 1) throw Error("selfperf stat: cannot start the command");
      ::close(child.go);
      int exec_errno = 0;
      bool exec_failed = ::read(child.exec_error, &exec_errno, sizeof exec_errno) == sizeof exec_errno;
      ::close(child.exec_error);
      int status = 0;
      while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (exec_failed) {
        std::fprintf(stderr, "selfperf stat: cannot run %s: %s\n", args.command[0].c_str(), std::strerror(exec_errno));
        return 127;
      }
      status_out = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      counts = counters->read_totals();
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (args.separator.empty()) std::printf("\n Performance counter stats for %s:\n\n", what.c_str());
    for (const auto& c : counts)
      print_line(c, args.separator, args.per_thread ? std::to_string(c.tid) + " " : std::string());
    // As perf stat shows a default event the PMU does not count.
    for (const auto& e : args.not_supported) {
      if (args.separator.empty()) std::printf("%18s      %s\n", "<not supported>", e.c_str());
      else std::printf("<not supported>%s%s%s\n", args.separator.c_str(), args.separator.c_str(), e.c_str());
    }
    if (args.separator.empty()) std::printf("\n %14.9f seconds time elapsed\n\n", seconds);
  } catch (const Error& e) {
    std::fprintf(stderr, "selfperf stat: %s\n", e.what());
    return 1;
  }
  return status_out;
}

}  // namespace selfperf::tool
