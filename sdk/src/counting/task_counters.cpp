// TaskCounters: per-event, per-task counters with inherit, read with read(2) (another task's counters have
// no user-space read path: rdpmc only reads the calling thread's).
#include "selfperf/task_counters.hpp"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <utility>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

constexpr std::uint64_t kReadFormat = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;

std::string task_error(int err, const perf_event_attr& attr, const std::string& event, pid_t tid) {
  if (err == ESRCH) return "event '" + event + "' on task " + std::to_string(tid) + ": no such task (it exited?)";
  std::string msg = detail::open_error_message(err, attr, event) + " (on task " + std::to_string(tid) + ")";
  if (err == EACCES || err == EPERM)
    msg += "; counting another user's process needs CAP_PERFMON (or root), and ptrace access to it";
  return msg;
}

void close_all(std::vector<int> fds) {
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

}  // namespace

double TaskCount::scaled() const noexcept {
  if (time_running == 0) return 0;
  if (time_running >= time_enabled) return static_cast<double>(raw);
  return static_cast<double>(raw) * static_cast<double>(time_enabled) / static_cast<double>(time_running);
}

double TaskCount::running_percent() const noexcept {
  if (time_enabled == 0) return 0;
  return 100.0 * static_cast<double>(std::min(time_running, time_enabled)) / static_cast<double>(time_enabled);
}

TaskCounters::TaskCounters(const std::vector<std::string>& events, const std::vector<pid_t>& tids,
                           TaskCounterOptions options)
    : events_(events) {
  if (events.empty()) throw Error("TaskCounters needs at least one event");
  if (tids.empty()) throw Error("TaskCounters needs at least one task");
  const bool kernel_allowed = detail::kernel_counting_allowed();
  try {
    for (const auto& text : events) {
      EventSpec spec = parse_event(text);
      if (options.user_only_if_needed && !spec.explicit_privilege && !kernel_allowed && !spec.exclude_kernel) {
        spec.exclude_kernel = spec.exclude_hv = true;
        user_only_ = true;
      }
      for (pid_t tid : tids) {
        perf_event_attr attr = to_attr(spec);
        attr.read_format = kReadFormat;
        attr.inherit = 1;  // threads and processes the task starts later count into this event
        attr.disabled = 1;
        attr.enable_on_exec = options.enable_on_exec ? 1 : 0;
        int fd = detail::perf_event_open(attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
          int err = errno;
          throw Error(task_error(err, attr, text, tid), err);
        }
        opened_.push_back({text, tid, fd});
      }
    }
  } catch (...) {
    std::vector<int> fds;
    for (const auto& o : opened_) fds.push_back(o.fd);
    opened_.clear();
    close_all(std::move(fds));
    throw;
  }
}

TaskCounters::TaskCounters(TaskCounters&& other) noexcept
    : opened_(std::exchange(other.opened_, {})), events_(std::move(other.events_)), user_only_(other.user_only_) {}

TaskCounters& TaskCounters::operator=(TaskCounters&& other) noexcept {
  if (this != &other) {
    for (const auto& o : opened_) ::close(o.fd);
    opened_ = std::exchange(other.opened_, {});
    events_ = std::move(other.events_);
    user_only_ = other.user_only_;
  }
  return *this;
}

TaskCounters::~TaskCounters() {
  for (const auto& o : opened_) ::close(o.fd);
}

void TaskCounters::enable() {
  for (const auto& o : opened_)
    if (::ioctl(o.fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
      throw Error("cannot enable '" + o.event + "' on task " + std::to_string(o.tid) + ": " + std::strerror(errno), errno);
}

void TaskCounters::disable() {
  for (const auto& o : opened_) ::ioctl(o.fd, PERF_EVENT_IOC_DISABLE, 0);
}

std::vector<TaskCount> TaskCounters::read() const {
  std::vector<TaskCount> out;
  out.reserve(opened_.size());
  for (const auto& o : opened_) {
    std::uint64_t v[3] = {0, 0, 0};
    ssize_t n;
    do n = ::read(o.fd, v, sizeof v);
    while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof v))
      throw Error("reading '" + o.event + "' on task " + std::to_string(o.tid) + " failed: " +
                  (n < 0 ? std::strerror(errno) : "short read"));
    out.push_back({o.event, o.tid, v[0], v[1], v[2]});
  }
  return out;
}

std::vector<TaskCount> TaskCounters::read_totals() const {
  std::vector<TaskCount> totals;
  for (const auto& e : events_) totals.push_back({e, 0, 0, 0, 0});
  for (const auto& c : read()) {
    auto it = std::find_if(totals.begin(), totals.end(), [&](const TaskCount& t) { return t.event == c.event; });
    it->raw += c.raw;
    it->time_enabled += c.time_enabled;
    it->time_running += c.time_running;
  }
  return totals;
}

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string name = entry.path().filename().string();
    pid_t tid = 0;
    auto [ptr, err] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (err == std::errc() && ptr == name.data() + name.size()) tids.push_back(tid);
  }
  if (ec || tids.empty())
    throw Error("process " + std::to_string(pid) + ": no such process (/proc/" + std::to_string(pid) +
                    "/task cannot be read" + (ec ? ": " + ec.message() : std::string()) + ")",
                ESRCH);
  std::sort(tids.begin(), tids.end());
  return tids;
}

}  // namespace selfperf
