#pragma once
// Overflow sampling of this process's own threads, unwound in process.
//
// Every attached thread owns one sampling event (perf_event_open on itself). The kernel signals the thread
// whose counter overflowed (O_ASYNC + F_SETSIG + F_SETOWN_EX/F_OWNER_TID); the handler unwinds the
// interrupted context and stores the sample in that thread's preallocated single-producer/single-consumer
// buffer. A full buffer drops the sample and counts it in `lost`; nothing blocks.
//
//     selfperf::Sampler::Options options;
//     options.frequency = 1000;
//     selfperf::Sampler sampler(options);
//     sampler.start();
//     std::thread worker([&] { selfperf::Sampler::ThreadAttachment attach(sampler); work(); });
//     ...
//     sampler.drain([](const selfperf::Sample& s) { use(s.tid, s.frames); });
//     auto totals = sampler.stop();
//
// Threads started after start() are attached in one of three ways: at the top of the thread function
// (ThreadAttachment above), by wrapping the function (`std::thread t(sampler.attached(fn))`), or for every
// thread at once with Options::attach_new_threads, which needs selfperf's pthread_create hook linked in
// (CMake: `target_link_libraries(app PRIVATE selfperf::thread_hook)`; the preload library has it). A thread
// that exits while attached is detached by a thread_local destructor: its event is disabled and closed, its
// buffered samples stay available to drain().
//
// Interrupted system calls. The handler is installed with SA_RESTART, so read/write/wait and friends resume.
// Per signal(7), these are never restarted and fail with EINTR when a sample lands during them, whatever
// SA_RESTART says: poll, ppoll, select, pselect, epoll_wait, epoll_pwait; nanosleep, clock_nanosleep,
// usleep; pause, sigsuspend, sigtimedwait, sigwaitinfo; io_getevents; msgrcv, msgsnd, semop, semtimedop;
// accept/recv/recvfrom/recvmsg/recvmmsg on a socket with SO_RCVTIMEO and connect/send/sendto/sendmsg with
// SO_SNDTIMEO. sleep() returns early with the time left; std::this_thread::sleep_for retries by itself.
// Code that samples itself must retry these on EINTR.
//
// Handler cost and safety. The handler allocates nothing, takes no lock and makes no system call (except
// PERF_EVENT_IOC_REFRESH in Rearm::refresh); errno is saved and restored. Unwinder::libunwind is warmed at
// attach (per-thread cache, one trace from a normal frame and one from inside the signal handler); a later
// cache miss resolves through dl_iterate_phdr (the loader's recursive lock) — see selfperf/unwind.hpp.
// Handlers stay installed after stop(): a signal still queued for a closed event is ignored, never left to
// the default action (which would terminate the process).
//
// Fork. A child of fork() inherits copies of the parent's event descriptors: they are the parent's events,
// counting and signalling the parent's threads, so the child must never ioctl them; the ring buffers'
// mappings are not inherited at all. The first Sampler call in the child (any method, the destructor, a
// thread's exit hook) therefore drops what the child inherited without touching the parent's sampling: it
// closes the child's copies of the descriptors, forgets the mappings without unmapping, and discards the
// buffered samples and the counts, which are the parent's. From then on the Sampler is the child's own:
// drain() and stop() see only threads the child attaches (zero totals until it does), attach_this_thread()
// opens events for the child's threads (sampling at once if the parent had started the Sampler) and start()
// works as in any process; a Sampler stopped before the fork stays stopped. As with any lock across fork(),
// a child of a multithreaded parent may call the Sampler only if no other thread was inside a Sampler call
// at the fork; a child that only exec()s or _exit()s needs nothing (the descriptors are close-on-exec).
//
// The signal is a real-time one (queued, one per overflow); when the process's queue of pending signals is
// full the kernel sends SIGIO instead, which the sampler also handles (the signal's samples are not lost:
// the kernel ring buffer still holds them). An existing SIGIO handler is chained.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "selfperf/sample.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

namespace detail {
class SamplerCore;
}

class Sampler {
 public:
  // How the event is kept signalling after each overflow. Default ring_buffer: no ioctl per sample, and the
  // kernel's own time/period/loss/throttle records. bench_sampler measures all three side by side: refresh
  // adds one ioctl (~0.5 µs here) to every sample and the most whole-process overhead at 10 kHz; ring_buffer
  // and overflow_signal are within noise of each other. (REFRESH also hung some 6.16/6.17 kernels.)
  enum class Rearm {
    ring_buffer,      // a small kernel ring buffer woken on every sample; the handler moves data_tail. Gives
                      // the kernel's timestamp, period, throttle and loss records. No ioctl per sample.
    overflow_signal,  // no ring buffer: the kernel signals each overflow by itself. Cheapest; no throttle
                      // records, time from CLOCK_MONOTONIC (vDSO) in the handler, period as configured (0 in
                      // frequency mode). Signals merged while SIGIO stands in for a full queue go uncounted.
    refresh,          // PERF_EVENT_IOC_REFRESH(1) after every sample (one ioctl per sample; kept for comparison)
  };

  struct Options {
    std::string event;                 // any parse_event string; empty: cycles where a PMU exists, else cpu-clock
    std::uint64_t period = 0;          // events between samples, or
    std::uint64_t frequency = 0;       // samples per second per thread (exactly one of the two is non-zero)
    Unwinder unwinder = Unwinder::frame_pointer;
    std::size_t max_depth = 64;        // frames per sample, 1..1024
    int signal = 0;                    // 0: the first real-time signal from SIGRTMIN+4 with default disposition
    // Samples of 32 frames buffered per thread before drain() (deeper ones take more room, shallower less).
    // The memory is mapped, not filled: a thread pays for the pages its samples touched, ~300 B a sample.
    std::size_t buffer_capacity = 1024;
    Rearm rearm = Rearm::ring_buffer;
    std::size_t ring_pages = 2;        // data pages of the kernel ring buffer (power of two)
    // Attach every thread created after start() (pthread_create, std::thread) before its function runs.
    // Needs selfperf's pthread_create hook in the program: link selfperf::thread_hook (or run under the
    // preload library); start() throws saying so when it is missing.
    bool attach_new_threads = false;
    // Unwinder::libunwind: leave libunwind's process set-up (its first trace, ~2 ms of CPU on a VM) to a later
    // prepare_libunwind_process() (selfperf/unwind.hpp), so that a short process that takes no sample never
    // pays it; the profiler makes it once samples come. Until then a sample that needs libunwind keeps the
    // frames the DWARF walk found (Totals::unwound_partially).
    bool defer_libunwind_setup = false;
  };

  struct ThreadTotals {
    pid_t tid = 0;
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;
    // The rate the thread ended with: Options::frequency (Hz) or Options::period, unless lowered (below).
    std::uint64_t rate = 0;
  };

  struct Totals {
    std::uint64_t samples = 0;    // stored for drain()
    std::uint64_t lost = 0;       // buffer full + kernel-reported loss + overflows whose stack was gone
    std::uint64_t lost_buffer_full = 0;
    std::uint64_t lost_kernel = 0;     // PERF_RECORD_LOST in the ring buffer
    std::uint64_t lost_coalesced = 0;  // several overflows behind one signal: only the newest has a stack
    std::uint64_t throttled = 0;       // PERF_RECORD_THROTTLE (kernel sample-rate limit hit)
    std::uint64_t signals = 0;         // handler runs for one of our events
    std::uint64_t sigio = 0;           // SIGIO fallbacks (real-time signal queue full)
    std::uint64_t ignored = 0;         // our signal number, not raised by the kernel for our events (process-wide)
    std::uint64_t attach_failed = 0;   // new threads attach_new_threads could not attach (reason on stderr)
    std::uint64_t unwound_by_libunwind = 0;  // Unwinder::libunwind samples the DWARF walk handed to unw_backtrace
    // Unwinder::libunwind samples kept with the frames the DWARF walk found, without libunwind's: its share of
    // the thread's time is capped at a tenth (its slow path can outlast a short sampling period), and it is not
    // set up yet where Options::defer_libunwind_setup put that off.
    std::uint64_t unwound_partially = 0;
    // Halvings of a thread's rate because taking its samples cost it more than half its time (a period
    // shorter than what one overflow costs the machine: tens of µs on a VM). Said once on stderr too.
    std::uint64_t rate_lowered = 0;
    // Threads found with samples waiting that their handler never took for a second or more: the thread
    // blocks the signal, takes it itself (sigwaitinfo, signalfd), or the program ignored it or installed its own
    // handler. Each kind is said once on stderr, with what to do.
    std::uint64_t threads_not_signalled = 0;
    std::vector<ThreadTotals> threads;
  };

  // Validates the options and resolves the event; throws selfperf::Error naming the bad option.
  explicit Sampler(Options options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Installs the handlers and enables every attached thread's event; later attaches sample at once.
  void start();
  // Opens this thread's sampling event (enabled if started). Idempotent for an attached thread.
  void attach_this_thread();
  // Disables and closes this thread's event; its buffered samples remain for drain(). No-op if not attached.
  void detach_this_thread();

  // Calls fn(const Sample&) for every buffered sample, oldest first per thread; returns how many. Any thread.
  template <typename Fn>
  std::size_t drain(Fn&& fn) {
    return drain_impl([](void* f, const Sample& s) { (*static_cast<std::remove_reference_t<Fn>*>(f))(s); },
                      static_cast<void*>(&fn));
  }

  // Disables every event, waits for handlers in flight, closes the events and returns the totals.
  // Samples still buffered stay available to drain(). Idempotent.
  Totals stop();

  bool running() const noexcept;
  // The signal chosen at start() (0 before); where the samples went if the program took it since (the preload
  // library's sigaction/signal/sigset move them: docs/sampling.md), -1 when no signal was left for them.
  int signal_number() const noexcept;
  const std::string& event_name() const noexcept;
  // Whether the event counts kernel time too: an event that names no privilege level does where the caller
  // may (root, CAP_PERFMON, perf_event_paranoid < 2). An overflow in the kernel is delivered, and its stack
  // unwound, on the return to user space: the sample is the system call's or page fault's user stack.
  bool samples_kernel() const noexcept;

  // Attaches the constructing thread, detaches it on destruction.
  class ThreadAttachment {
   public:
    explicit ThreadAttachment(Sampler& sampler) : sampler_(&sampler) { sampler.attach_this_thread(); }
    ~ThreadAttachment() { sampler_->detach_this_thread(); }
    ThreadAttachment(const ThreadAttachment&) = delete;
    ThreadAttachment& operator=(const ThreadAttachment&) = delete;

   private:
    Sampler* sampler_;
  };

  // fn wrapped so that the thread running it is attached for its duration: std::thread t(s.attached(fn)).
  template <typename Fn>
  auto attached(Fn fn) {
    return [this, fn = std::move(fn)](auto&&... args) mutable {
      ThreadAttachment attachment(*this);
      return fn(std::forward<decltype(args)>(args)...);
    };
  }

 private:
  std::size_t drain_impl(void (*call)(void*, const Sample&), void* fn);
  std::shared_ptr<detail::SamplerCore> core_;
};

}  // namespace selfperf
