#pragma once
// TaskCounters: `perf stat` for another task. Counts events on a process (or each thread of one) with
// inherit, so threads and children it starts later are counted too, each event on its own (not a group:
// the kernel cannot read an inherited group in one read), scaled by time_enabled/time_running when the PMU
// multiplexed them, as perf stat does.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "selfperf/event.hpp"

namespace selfperf {

struct TaskCount {
  std::string event;               // as the user wrote it, e.g. "page-faults:u"
  pid_t tid = 0;                   // the task it was opened on
  std::uint64_t raw = 0;           // the counter as read
  std::uint64_t time_enabled = 0;  // ns
  std::uint64_t time_running = 0;  // ns
  // raw scaled to the whole enabled time; equal to raw when the event ran all along.
  double scaled() const noexcept;
  // Percentage of the enabled time the event was counting (100 unless multiplexed; 0 if never enabled).
  double running_percent() const noexcept;
  bool counted() const noexcept { return time_running > 0; }
};

struct TaskCounterOptions {
  // Start counting at the task's next execve (a child forked and held before exec, as perf stat does) rather
  // than at once.
  bool enable_on_exec = false;
  // Events that do not name a privilege level are made user-only where perf_event_paranoid requires it.
  bool user_only_if_needed = true;
};

class TaskCounters {
 public:
  // Opens every event on each of `tids` (a process's threads: read /proc/PID/task). Throws selfperf::Error
  // naming the event and the task (ESRCH: no such task; EACCES: another user's task without CAP_PERFMON).
  TaskCounters(const std::vector<std::string>& events, const std::vector<pid_t>& tids, TaskCounterOptions options = {});
  TaskCounters(TaskCounters&&) noexcept;
  TaskCounters& operator=(TaskCounters&&) noexcept;
  TaskCounters(const TaskCounters&) = delete;
  TaskCounters& operator=(const TaskCounters&) = delete;
  ~TaskCounters();

  void enable();
  void disable();
  // One entry per event per task, in the order given.
  std::vector<TaskCount> read() const;
  // Per event, summed over the tasks (what perf stat prints without --per-thread).
  std::vector<TaskCount> read_totals() const;
  // Whether events were narrowed to user-only (paranoid), for the report.
  bool user_only() const noexcept { return user_only_; }

 private:
  struct Opened {
    std::string event;
    pid_t tid;
    int fd;
  };
  std::vector<Opened> opened_;
  std::vector<std::string> events_;
  bool user_only_ = false;
};

// The thread ids of `pid` from /proc/PID/task; throws selfperf::Error (ESRCH) when the process is gone.
std::vector<pid_t> threads_of(pid_t pid);

}  // namespace selfperf
