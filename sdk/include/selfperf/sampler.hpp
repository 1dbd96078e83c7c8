#pragma once
// Overflow sampling of this process's own threads, unwound in process.
//
// Every attached thread owns one sampling event (perf_event_open on itself). The kernel signals the thread
// whose counter overflowed (O_ASYNC + F_SETSIG + F_SETOWN_EX/F_OWNER_TID); the handler unwinds the
// interrupted context and stores the sample in that thread's preallocated single-producer/single-consumer
// buffer. A full buffer drops the sample and counts it in `lost`; nothing blocks.
//
//     selfperf::Sampler sampler({.frequency = 1000});
//     sampler.start();
//     std::thread worker([&] { selfperf::Sampler::ThreadAttachment attach(sampler); work(); });
//     ...
//     sampler.drain([](const selfperf::Sample& s) { use(s.tid, s.frames); });
//     auto totals = sampler.stop();
//
// Threads started after start() are not attached by themselves: attach at the top of the thread function
// (ThreadAttachment above), or wrap the function with `sampler.attached(fn)`. A thread that exits while
// attached is detached by a thread_local destructor: its event is disabled and closed, its buffered samples
// stay available to drain().
//
// Interrupted system calls. The handler is installed with SA_RESTART, so read/write/wait and friends resume.
// Per signal(7), these are never restarted and fail with EINTR when a sample lands during them, whatever
// SA_RESTART says: poll, ppoll, select, pselect, epoll_wait, epoll_pwait; nanosleep, clock_nanosleep,
// usleep; pause, sigsuspend, sigtimedwait, sigwaitinfo; io_getevents; msgrcv, msgsnd, semop, semtimedop;
// accept/recv/recvfrom/recvmsg/recvmmsg on a socket with SO_RCVTIMEO and connect/send/sendto/sendmsg with
// SO_SNDTIMEO. sleep() returns early with the time left; std::this_thread::sleep_for retries by itself.
// Code that samples itself must retry these on EINTR.
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
  // How the event is kept signalling after each overflow.
  enum class Rearm {
    ring_buffer,      // a small kernel ring buffer woken on every sample; the handler moves data_tail. Gives
                      // the kernel's timestamp, period, throttle and loss records. No ioctl per sample.
    overflow_signal,  // no ring buffer: the kernel signals each overflow by itself. Cheapest; no throttle
                      // records, time from CLOCK_MONOTONIC in the handler, period as configured.
    refresh,          // PERF_EVENT_IOC_REFRESH(1) after every sample (one ioctl per sample; kept for comparison)
  };

  struct Options {
    std::string event;                 // any parse_event string; empty: cycles where a PMU exists, else cpu-clock
    std::uint64_t period = 0;          // events between samples, or
    std::uint64_t frequency = 0;       // samples per second per thread (exactly one of the two is non-zero)
    Unwinder unwinder = Unwinder::frame_pointer;
    std::size_t max_depth = 64;        // frames per sample, 1..1024
    int signal = 0;                    // 0: the first real-time signal from SIGRTMIN+4 with default disposition
    std::size_t buffer_capacity = 1024;  // samples buffered per thread before drain()
    Rearm rearm = Rearm::ring_buffer;
    std::size_t ring_pages = 2;        // data pages of the kernel ring buffer (power of two)
  };

  struct ThreadTotals {
    pid_t tid = 0;
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;
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
    std::uint64_t ignored = 0;         // our signal number, but not raised by the kernel for our events
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
  int signal_number() const noexcept;         // the signal chosen at start() (0 before)
  const std::string& event_name() const noexcept;

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
