// Checks drain() and stop() make on the threads' behalf, outside any signal handler: a thread whose signals
// are not handled (blocked, ignored, taken over by the program's own handler) and a thread whose rate was
// lowered are counted and reported once per sampler, with what to do about it.
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <sys/ioctl.h>

#include "perf_syscall.hpp"
#include "sampler_core.hpp"

namespace selfperf::detail {

namespace {

// Once per sampler per kind: a program with a thousand threads that block the signal gets one line.
bool first_time(bool& told) noexcept { return !std::exchange(told, true); }

// Whether /proc says `tid` blocks `signo` (SigBlk is a hex mask, bit signo-1).
bool blocks_signal(pid_t tid, int signo) {
  std::string status;
  try {
    status = read_text_file("/proc/self/task/" + std::to_string(tid) + "/status");
  } catch (const std::exception&) {
    return false;
  }
  const std::size_t at = status.find("SigBlk:");
  if (at == std::string::npos) return false;
  const std::uint64_t mask = std::strtoull(status.c_str() + at + 7, nullptr, 16);
  return signo >= 1 && signo <= 64 && (mask >> (signo - 1) & 1) != 0;
}

std::string rate_text(const ThreadState& s, std::uint64_t rate) {
  return s.frequency_mode ? std::to_string(rate) + " Hz" : "a period of " + std::to_string(rate);
}

}  // namespace

// A thread is "not signalled" when its ring holds records its handler has not taken and nothing new arrived
// since the previous check: with credits, the kernel has stopped the event and waits for the handler.
void SamplerCore::check_health() {
  const int sig = signo.load();
  for (auto& state : states_) {
    ThreadState& s = *state;
    const std::uint64_t lowered = s.rate_lowered.load(std::memory_order_relaxed);
    if (lowered > 0 && first_time(told_.rate)) {
      const std::uint64_t wanted = options.frequency ? options.frequency : options.period;
      std::fprintf(stderr,
                   "selfperf: thread %d could not keep up with sampling at %s: signals arrived faster than its "
                   "handler finished them, so its rate was lowered to %s (more threads may follow; see "
                   "Sampler::Totals::rate_lowered). Sample less often to keep the rate you ask for.\n",
                   static_cast<int>(s.tid), rate_text(s, wanted).c_str(),
                   rate_text(s, s.current_rate.load(std::memory_order_relaxed)).c_str());
    }
    if (s.detached || !s.ring || s.credits == 0 || s.not_signalled || sig == 0) continue;
    perf_event_mmap_page* page = s.ring->control();
    const std::uint64_t head = std::atomic_ref<__u64>(page->data_head).load(std::memory_order_acquire);
    const std::uint64_t tail = std::atomic_ref<__u64>(page->data_tail).load(std::memory_order_acquire);
    const bool stalled = head != tail && head == s.checked_head;
    s.checked_head = head;
    if (!stalled) continue;
    s.not_signalled = true;
    ++not_signalled_;
    if (blocks_signal(s.tid, sig)) {
      if (first_time(told_.blocked))
        std::fprintf(stderr,
                     "selfperf: thread %d blocks signal %d, which carries the sampler's samples: it is not "
                     "sampled while it does (others may too; counted in Sampler::Totals::threads_not_signalled). "
                     "Leave that signal unblocked (pthread_sigmask) in threads you want profiled.\n",
                     static_cast<int>(s.tid), sig);
    } else if (!sample_handler_installed(sig)) {
      // Whatever now handles the signal is the program's: it gets none of ours from here on.
      for (auto& other : states_)
        if (!other->detached) ioctl(other->fd, PERF_EVENT_IOC_DISABLE, 0);
      if (first_time(told_.taken))
        std::fprintf(stderr,
                     "selfperf: the program ignored signal %d or installed its own handler for it, which the "
                     "sampler uses: sampling stopped there. Give the sampler a signal the program leaves "
                     "alone (Sampler::Options::signal).\n",
                     sig);
    } else if (first_time(told_.unhandled)) {
      std::fprintf(stderr,
                   "selfperf: thread %d has samples waiting that its signal handler never took (signal %d); "
                   "it is not sampled until it handles them.\n",
                   static_cast<int>(s.tid), sig);
    }
  }
}

}  // namespace selfperf::detail
