#pragma once
// The one place that calls perf_event_open(2) and turns its errno into advice a user can act on.
#include <string>
#include <string_view>
#include <initializer_list>
#include <vector>

#include <linux/perf_event.h>
#include <sys/types.h>

#include "selfperf/event.hpp"

namespace selfperf::detail {

// Owns one file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const noexcept { return fd_; }
  int release() noexcept { int fd = fd_; fd_ = -1; return fd; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

pid_t current_tid() noexcept;

// Raw system call: returns the fd or -1 with errno set.
int perf_event_open(perf_event_attr& attr, pid_t pid, int cpu, int group_fd, unsigned long flags) noexcept;

// Opens the event or throws selfperf::Error naming `event_name` and what to do about the errno.
Fd open_event(perf_event_attr attr, std::string_view event_name, pid_t pid, int cpu, int group_fd,
              unsigned long flags = PERF_FLAG_FD_CLOEXEC);

std::string open_error_message(int err, const perf_event_attr& attr, std::string_view event_name);

// /proc/sys/kernel/perf_event_paranoid, or 2 (the common default) when unreadable.
int perf_event_paranoid() noexcept;
// Capability number `cap` (linux/capability.h) in this thread's effective set.
bool has_capability(int cap) noexcept;
// CAP_PERFMON or CAP_SYS_ADMIN in the effective set: paranoid limits do not apply.
bool has_perf_privilege() noexcept;
// Whether an event that does not exclude the kernel may be opened by this process.
bool kernel_counting_allowed() noexcept;

// Whether `cycles:u` opens on this thread: the one test for "is there a hardware PMU" that picks default
// events (sampler, scopes) and gates hardware-only tests. Sets errno to the open's error when it does not.
bool hardware_cycles_available() noexcept;

// The events of `names` (perf's generic names) that open user-only on this thread, in their order; the others
// go to `left_out`. A PMU need not count every generic event: QEMU's PMUv3 has cycles and
// instructions only (ENOENT for branches, branch-misses, the hw-cache events), and a hypervisor may expose a
// few. Default event sets are filtered through this, so that one missing event does not fail the whole group.
std::vector<std::string> events_that_open(std::initializer_list<std::string_view> names,
                                          std::vector<std::string>& left_out);

// Reads a small text file (sysfs, procfs); empty string when it does not exist.
std::string read_text_file(const std::string& path);

}  // namespace selfperf::detail
