#include "selfperf/event_control.hpp"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "selfperf/error.hpp"

namespace selfperf {
namespace {

[[noreturn]] void fail(const char* request, int fd, int err, const char* hint = "") {
  throw Error(std::string(request) + " on perf event fd " + std::to_string(fd) + " failed: " +
                  std::strerror(err) + hint,
              err);
}

}  // namespace

void set_sample_period(int fd, std::uint64_t period) {
  if (period == 0) throw Error("PERF_EVENT_IOC_PERIOD: a period of 0 would stop sampling; disable the event instead", EINVAL);
  if (::ioctl(fd, PERF_EVENT_IOC_PERIOD, &period) != 0)
    fail("PERF_EVENT_IOC_PERIOD", fd, errno, errno == EINVAL ? " (a counting event has no period to change)" : "");
}

void pause_output(int fd, bool paused) {
  if (::ioctl(fd, PERF_EVENT_IOC_PAUSE_OUTPUT, paused ? 1 : 0) != 0)
    fail("PERF_EVENT_IOC_PAUSE_OUTPUT", fd, errno, errno == EINVAL ? " (the event has no ring buffer)" : "");
}

std::uint64_t event_id(int fd) {
  std::uint64_t id = 0;
  if (::ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) fail("PERF_EVENT_IOC_ID", fd, errno);
  return id;
}

void redirect_output(int fd, int target_fd) {
  if (::ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, target_fd) != 0)
    fail("PERF_EVENT_IOC_SET_OUTPUT", fd, errno,
         errno == EBUSY    ? " (the event has its own ring buffer mapped: redirect it before mapping one)"
         : errno == EINVAL ? " (the two events must be on the same task or CPU, with the same clock)"
                           : "");
}

void disable_process_events() {
  if (::prctl(PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0) != 0)
    throw Error(std::string("prctl(PR_TASK_PERF_EVENTS_DISABLE) failed: ") + std::strerror(errno), errno);
}

void enable_process_events() {
  if (::prctl(PR_TASK_PERF_EVENTS_ENABLE, 0, 0, 0, 0) != 0)
    throw Error(std::string("prctl(PR_TASK_PERF_EVENTS_ENABLE) failed: ") + std::strerror(errno), errno);
}

}  // namespace selfperf
