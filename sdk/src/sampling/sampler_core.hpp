#pragma once
// Sampler internals shared by the public methods (sampler.cpp) and the signal handlers (sampler_signal.cpp).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <linux/perf_event.h>
#include <signal.h>

#include "events/perf_syscall.hpp"
#include "sampling/sampler_buffer.hpp"
#include "sampling/sampler_governor.hpp"
#include "selfperf/record.hpp"
#include "selfperf/ring_buffer.hpp"
#include "selfperf/sampler.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf::detail {

// libunwind's slow path (its cursor loop, on a cache miss) takes tens of µs: longer than a short sampling
// period, and a thread whose every sample needs it would never leave its handler. So it gets a tenth of the
// thread's time at most: a fallback that took t (TSC ticks) is followed by none for 9t.
struct LibunwindBudget {
  std::uint64_t not_before = 0;
  bool allows(std::uint64_t now) const noexcept { return now >= not_before; }
  void spent(std::uint64_t begin, std::uint64_t end) noexcept { not_before = end + 9 * (end - begin); }
};

// One attached thread's event. Everything the handler reads is set before the state is published in the
// fd table and never changes while it is there.
struct ThreadState {
  ThreadState(std::size_t capacity, std::size_t max_depth) : buffer(capacity, max_depth) {}
  ~ThreadState();

  int fd = -1;
  pid_t tid = 0;
  pid_t pid = 0;  // the process that opened the event (a forked child's table holds its parent's for a while)
  // The signal the event raises: the sampler's, or where it went when the program took that one
  // (give_signal_to_program; -1: nowhere, the event disabled).
  std::atomic<int> signal{0};
  const void* thread_marker = nullptr;  // this_thread_marker() of the owner
  StackBounds stack;
  const CodeMap* code = nullptr;       // the frame-pointer walk's leaf recovery; the DWARF walk's .eh_frame tables
  Unwinder unwinder = Unwinder::frame_pointer;
  Sampler::Rearm rearm = Sampler::Rearm::ring_buffer;
  std::uint64_t period = 0;             // configured period (0 in frequency mode)
  std::optional<RingBuffer> ring;       // Rearm::ring_buffer only; read by the owner's handler alone
  SampleFormat format;
  SampleBuffer buffer;

  std::atomic<std::uint64_t> samples{0};
  std::atomic<std::uint64_t> lost_buffer_full{0};
  std::atomic<std::uint64_t> lost_kernel{0};  // from the ring's stats, at detach
  std::atomic<std::uint64_t> lost_coalesced{0};
  std::atomic<std::uint64_t> throttled{0};    // from the ring's stats, at detach
  std::atomic<std::uint64_t> signals{0};
  std::atomic<std::uint64_t> sigio{0};
  std::atomic<std::uint64_t> unwound_by_libunwind{0};
  std::atomic<std::uint64_t> unwound_partially{0};
  LibunwindBudget libunwind_budget;  // the owner's handlers only
  bool libunwind_cache_made = false;  // at attach (LibunwindSetup::per_thread): unwind_libunwind may run here

  // The rate in force (sample_freq in frequency mode, else sample_period), which the governor lowers when
  // sampling takes more than half the thread's time (sampler_governor.hpp).
  SamplingGovernor governor;  // the owner's handlers only
  bool frequency_mode = false;  // Options::frequency; `rate` is in Hz unless the kernel made it a period:
  // cpu-clock and task-clock turn a frequency into a fixed period at open (perf_swevent_init_hrtimer clears
  // attr.freq), after which PERF_EVENT_IOC_PERIOD takes nanoseconds there, not Hz.
  bool rate_is_period = true;
  std::uint64_t rate = 0;                      // the owner's handlers only once published
  std::atomic<std::uint64_t> current_rate{0};  // in the user's unit (Hz in frequency mode), for other threads
  std::atomic<std::uint64_t> rate_lowered{0};

  // Credits bound the overflows a thread can have outstanding, i.e. signals queued for it, whether or not its
  // handler runs: the kernel stops the event after event_limit overflows (armed by PERF_EVENT_IOC_REFRESH,
  // two batches at enable) until the handler has seen a batch and grants the next. Without them a thread that
  // blocks the signal, or whose handler a sanitizer defers (TSan runs it at its next interceptor), queues one
  // real-time signal per overflow into the user's RLIMIT_SIGPENDING; and where delivering one costs more than
  // the period (a VM) the thread, never reaching the handler, never gets out of delivering them. Ring mode
  // only (the ring counts overflows exactly, lost ones included); 0: no limit.
  std::uint32_t credits = 0;
  std::uint64_t credit_used = 0;  // overflows seen since the last grant; the owner's handlers only

  bool detached = false;  // guarded by SamplerCore::mutex
  bool told_corrupt = false;  // drain() said that `buffer` became unreadable; guarded by drain_mutex_
  // check_health's view (guarded by SamplerCore::mutex): the ring head it last saw and since when it has
  // not moved with records unread.
  std::uint64_t checked_head = 0;
  std::uint64_t stalled_since_ns = 0;
  bool not_signalled = false;
  // Set while the owner's handler runs. The kernel masks the signal during it, so a thread preempted there for
  // a second (a thousand runnable threads on two cores) looked to check_health like one that blocks it.
  std::atomic<bool> in_handler{false};
};

class SamplerCore : public std::enable_shared_from_this<SamplerCore> {
 public:
  explicit SamplerCore(Sampler::Options options);
  ~SamplerCore();

  void start();
  void attach_this_thread();
  void detach_this_thread();
  std::size_t drain(void (*call)(void*, const Sample&), void* fn);
  Sampler::Totals stop();
  // Called by the pthread_create hook on a new thread (attach_new_threads); failures are counted and
  // reported on stderr, never thrown into the thread.
  void attach_new_thread() noexcept;

  Sampler::Options options;
  perf_event_attr attr{};
  std::string event_name;
  std::atomic<int> signo{0};
  std::atomic<bool> started{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> attach_failed{0};

 private:
  void detach(ThreadState& state);  // caller holds mutex_
  // In a forked child, drops everything inherited from the parent; a no-op in the process that created the
  // events. Every public entry calls it first, holding mutex_.
  void adopt_after_fork();
  void add_totals(Sampler::Totals& totals, const ThreadState& state) const;
  // Says once per sampler, on stderr, that a thread's rate was lowered. Caller holds mutex_.
  void report_lowered_rate();
  // Finds threads whose signals go unhandled (blocked, taken with sigwaitinfo, the handler replaced or the
  // signal ignored by the program) and reports each kind once (sampler_health.cpp). Caller holds mutex_.
  void check_health();

  std::mutex mutex_;
  std::vector<std::shared_ptr<ThreadState>> states_;  // attached, and detached with samples not yet drained
  Sampler::Totals finished_;                          // states already drained and freed
  std::uint64_t ignored_at_start_ = 0;
  bool told_lowered_rate_ = false;
  std::uint64_t not_signalled_ = 0;
  struct Told {
    bool blocked = false, taken = false, unhandled = false;
  } told_;  // what check_health has reported
  std::mutex drain_mutex_;  // drain() runs one consumer at a time per buffer
  pid_t pid_ = 0;  // the process whose threads the events in states_ belong to
};

// ---- signal side (sampler_signal.cpp) ----

// CLOCK_MONOTONIC in ns, usable in a handler: the handlers' and the health checks' clock.
std::uint64_t monotonic_ns() noexcept;
// Unique per live thread, readable from a handler without a system call.
const void* this_thread_marker() noexcept;
// Installs the sample handler on `requested` (0: pick a free real-time signal) and the SIGIO fallback;
// returns the signal. Handlers stay installed for the life of the process: a late queued signal for a closed
// event must never meet the default action (which terminates).
int install_signal_handlers(int requested);
// Routes `state`'s event to `signo` (or where the program's taking it moved its events), aimed at its thread,
// sets state.signal and publishes the event for the handlers; returns the signal. Throws selfperf::Error.
int route_event(ThreadState& state, int signo);
// `signo`, or the signal its events moved to when the program took it (-1: none was free).
int current_signal(int signo) noexcept;
// Before the program sets its own action for `signo`: if samples come on it, moves every event of this process
// to another free real-time signal (or disables them when none is), waits (bounded) for the signals already
// queued under the old number, and says so once on stderr. The preload library calls it from its sigaction,
// signal and sigset (through selfperf_program_sets_signal, which passes over our own installations); a no-op
// for signals that never carried samples.
void give_signal_to_program(int signo) noexcept;
// Whether `signo` is blocked and pending for thread `tid` (/proc/self/task/TID/status).
struct ThreadSignalState {
  bool blocked = false;
  bool pending = false;  // queued for the thread (SigPnd), not yet delivered
};
ThreadSignalState thread_signal_state(pid_t tid, int signo) noexcept;
// Makes fork() wait for the locks a thread takes while it attaches (signal installation, the thread registry,
// the code map; fork_guard.hpp). Once per process; call with no lock held.
void sampling_locks_wait_for_fork();
// Publishes / withdraws an event for the handlers. unpublish_event returns once no handler uses `state`.
void publish_event(int fd, ThreadState* state);
void unpublish_event(int fd, const ThreadState* state) noexcept;
// In a forked child: withdraws an event inherited from the parent without waiting for handlers (those that
// were running at the fork ran on the parent's other threads, which the child does not have).
void withdraw_inherited_event(int fd, const ThreadState* state) noexcept;
constexpr int kMaxEventFd = 1 << 16;
// Whether `signo` still carries the sample handler (a program may have ignored it or installed its own).
bool sample_handler_installed(int signo) noexcept;
// Signals with our number that were not ours (si_code <= 0, unknown fd, another thread's event).
std::uint64_t ignored_signal_count() noexcept;
// Runs the unwinder once from inside a handler on this thread (fills libunwind's cache for handler and
// trampoline frames).
void warm_up_from_signal(int signo, ThreadState& state) noexcept;

}  // namespace selfperf::detail
