#pragma once
// The signal-delivery designs bench_delivery compares, behind one small interface, so that the overhead rows
// and the behaviour probes start, attach and count them the same way.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

#include <sys/types.h>

#include "selfperf/sampler.hpp"
#include "sigtrap_sampler.hpp"

namespace selfperf_bench {

enum class Design { plain, ours_ring, ours_signal, sigtrap };

// Counter and column names: ring = Sampler's default (Rearm::ring_buffer), no_ring = Rearm::overflow_signal.
const char* design_name(Design d);

// Both designs sample this event (the kernel's hrtimer clock of the thread; period in ns).
inline constexpr const char* kDeliveryEvent = "cpu-clock";

// One design sampling this process: started, the constructing thread attached.
class RunningDesign {
 public:
  struct Options {
    Design design = Design::ours_ring;
    std::uint64_t hz = 1000;
    selfperf::Unwinder unwinder = selfperf::Unwinder::frame_pointer;
    std::size_t buffer_capacity = 256;
    std::size_t max_threads = 64;     // sigtrap: slots
    bool attach_new_threads = false;  // ours: the pthread_create hook
    bool inherit_thread = true;       // sigtrap: false lets fork() children inherit the event
    int signal = 0;                   // ours: 0 picks a free real-time signal
  };
  struct Result {
    std::map<pid_t, std::uint64_t> samples;  // per thread
    std::uint64_t total = 0;
    std::uint64_t lost = 0;     // ours: buffer full, kernel-reported, coalesced; sigtrap: buffer full, no slot
    std::uint64_t late = 0;     // sigtrap: TRAP_PERF_FLAG_ASYNC
    std::uint64_t signals = 0;  // handler runs for the design's events
    std::uint64_t ignored = 0;  // ours: signals that met another thread's event
  };

  // Throws selfperf::Error when the design cannot start (Design::plain is not one).
  explicit RunningDesign(const Options& o);
  void attach();  // this thread (sigtrap: its slot; the event is inherited already)
  void detach();
  int signal() const;
  // Stops sampling, drains the buffers, returns the counts.
  Result stop();

 private:
  std::optional<selfperf::Sampler> ours_;
  std::optional<SigtrapSampler> trap_;
};

}  // namespace selfperf_bench
