// Checks drain() and stop() make on the threads' behalf, outside any signal handler: a thread whose samples
// wait in its ring and are never taken. With credits such a thread costs little (the kernel stops its event at
// 32 overflows) but it is not sampled, and the user must hear why, once per kind.
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "sampling/sampler_core.hpp"

namespace selfperf::detail {

namespace {

// A pending signal is delivered as soon as its thread runs; a second of no progress with records unread is
// not scheduling (a loaded two-core machine delays a thread by milliseconds, not seconds).
constexpr std::uint64_t kStallNs = 1'000'000'000;

bool first_time(bool& told) noexcept { return !std::exchange(told, true); }

}  // namespace

// /proc's hex masks, bit signo-1. Read into a buffer on the stack: give_signal_to_program may run in a signal
// handler of the program's.
ThreadSignalState thread_signal_state(pid_t tid, int signo) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", static_cast<int>(tid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char text[4096];  // ~1.5 KB on Linux 6
  std::size_t size = 0;
  for (ssize_t n; size < sizeof text - 1 && (n = ::read(fd, text + size, sizeof text - 1 - size)) > 0;)
    size += static_cast<std::size_t>(n);
  ::close(fd);
  text[size] = '\0';
  const auto has = [&](const char* field) {
    const char* at = std::strstr(text, field);
    if (at == nullptr) return false;
    const std::uint64_t mask = std::strtoull(at + std::strlen(field), nullptr, 16);
    return signo >= 1 && signo <= 64 && (mask >> (signo - 1) & 1) != 0;
  };
  return {has("SigBlk:"), has("SigPnd:")};
}

void SamplerCore::check_health() {
  if (signo.load() == 0 || !started.load()) return;
  const std::uint64_t now = monotonic_ns();
  for (auto& state : states_) {
    ThreadState& s = *state;
    const int sig = s.signal.load(std::memory_order_relaxed);
    if (s.detached || !s.ring || s.not_signalled || sig <= 0) continue;
    perf_event_mmap_page* page = s.ring->control();
    const std::uint64_t head = std::atomic_ref<__u64>(page->data_head).load(std::memory_order_acquire);
    const std::uint64_t tail = std::atomic_ref<__u64>(page->data_tail).load(std::memory_order_acquire);
    if (head == tail || head != s.checked_head) {
      s.checked_head = head;
      s.stalled_since_ns = 0;
      continue;
    }
    if (s.stalled_since_ns == 0) s.stalled_since_ns = now;
    if (now - s.stalled_since_ns < kStallNs) continue;
    // A thread inside our handler has the signal masked by the kernel; one whose signal is pending and not
    // blocked has not run since: both only wait for a CPU (seen with a thousand threads on two cores).
    const ThreadSignalState signal = thread_signal_state(s.tid, sig);
    if (s.in_handler.load(std::memory_order_relaxed) || (signal.pending && !signal.blocked)) {
      s.stalled_since_ns = now;
      continue;
    }
    s.not_signalled = true;
    ++not_signalled_;
    if (signal.blocked) {
      if (first_time(told_.blocked))
        std::fprintf(stderr,
                     "selfperf: thread %d blocks signal %d, which carries the sampler's samples: it is not sampled "
                     "while it does (others may too: Sampler::Totals::threads_not_signalled). Leave that signal "
                     "unblocked (pthread_sigmask) in threads you want profiled.\n",
                     static_cast<int>(s.tid), sig);
    } else if (!sample_handler_installed(sig)) {
      // Whatever handles the signal now is the program's: it gets none of ours from here on.
      for (auto& other : states_)
        if (!other->detached) ioctl(other->fd, PERF_EVENT_IOC_DISABLE, 0);
      if (first_time(told_.taken))
        std::fprintf(stderr,
                     "selfperf: the program ignored signal %d or installed its own handler for it, and the sampler "
                     "uses it: sampling stopped. Give the sampler a signal the program leaves alone "
                     "(Sampler::Options::signal).\n",
                     sig);
    } else if (first_time(told_.unhandled)) {
      std::fprintf(stderr,
                   "selfperf: thread %d has samples waiting that its signal handler never took (signal %d, taken "
                   "by sigwaitinfo or signalfd?): it is not sampled again.\n",
                   static_cast<int>(s.tid), sig);
    }
  }
}

}  // namespace selfperf::detail
