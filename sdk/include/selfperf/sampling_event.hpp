#pragma once
// Sampling events whose samples the kernel writes to a ring buffer: the kernel-callchain mode (the kernel
// walks the user stack by frame pointers: PERF_SAMPLE_CALLCHAIN, no unwinding in the process) and the
// memory-access mode (PERF_SAMPLE_ADDR | DATA_SRC | WEIGHT with precise_ip, as `perf mem` samples PEBS
// loads `cpu/mem-loads,ldlat=30/P` or AMD IBS ops).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <linux/perf_event.h>
#include <sys/types.h>

#include "selfperf/event.hpp"
#include "selfperf/record.hpp"
#include "selfperf/ring_buffer.hpp"

namespace selfperf {

enum class KernelFrames : std::uint8_t {
  automatic,  // kernel frames when this process may see kernel space (perf_event_paranoid < 2 or CAP_PERFMON)
  include,    // ask for them (a user-only event still gets none: it is only sampled in user mode)
  exclude,    // user frames only (exclude_callchain_kernel)
};

struct CallchainSamplingOptions {
  std::uint64_t period = 0;     // events (ns for cpu-clock/task-clock) per sample; or
  std::uint64_t frequency = 0;  // samples per second (exactly one of the two non-zero)
  KernelFrames kernel_frames = KernelFrames::automatic;
  std::uint16_t max_stack = 0;      // sample_max_stack; 0: the kernel's perf_event_max_stack (127)
  std::uint32_t wakeup_events = 1;  // POLLIN (and the O_ASYNC signal) every this many samples
};

struct MemorySamplingOptions {
  std::uint64_t period = 1000;  // sampled accesses: one every `period` qualifying loads/stores
  std::uint8_t precise_ip = 2;  // at least 1 (PEBS/IBS); raised to the event's own :p level if higher
  bool phys_addr = false;       // PERF_SAMPLE_PHYS_ADDR (needs CAP_PERFMON / CAP_SYS_ADMIN)
  std::uint32_t wakeup_events = 1;
};

// The attribute (disabled; enable() starts it) for each mode. The event's privilege level is kept when the
// spec named one; otherwise the event is made user-only where paranoid forbids kernel sampling, and then
// the kernel part of callchains is excluded too (exclude_callchain_kernel).
// Throws selfperf::Error on inconsistent options (no period nor frequency, or both).
perf_event_attr callchain_sampling_attr(const EventSpec& event, const CallchainSamplingOptions& options);
perf_event_attr memory_sampling_attr(const EventSpec& event, const MemorySamplingOptions& options);

// One opened sampling event on one thread (or process) with its ring buffer and its record format.
class SamplingEvent {
 public:
  // Opens `attr` on `tid` (0: the calling thread; cpu -1) and maps 1 + data_pages pages.
  // Throws selfperf::Error with perf_event_open's / mmap's advice.
  SamplingEvent(const perf_event_attr& attr, std::string_view name, pid_t tid, std::size_t data_pages);
  SamplingEvent(SamplingEvent&& other) noexcept;
  SamplingEvent& operator=(SamplingEvent&& other) noexcept;
  SamplingEvent(const SamplingEvent&) = delete;
  SamplingEvent& operator=(const SamplingEvent&) = delete;
  ~SamplingEvent();

  void enable();
  void disable();

  int fd() const noexcept { return fd_; }
  RingBuffer& ring() noexcept { return ring_; }
  const RingBuffer& ring() const noexcept { return ring_; }
  const SampleFormat& format() const noexcept { return format_; }
  const perf_event_attr& attr() const noexcept { return attr_; }
  const std::string& name() const noexcept { return name_; }
  // Samples that did not decode with this event's format (should stay 0; counted, never dropped silently).
  std::uint64_t undecodable() const noexcept { return undecodable_; }
  DecodeStatus last_decode_error() const noexcept { return last_decode_error_; }

  // Reads the ring and calls on_sample(const SampleRecord&) for each decoded PERF_RECORD_SAMPLE; other
  // records only update ring().stats(). Returns the number of samples delivered. No allocation.
  template <class F>
  std::size_t read_samples(F&& on_sample) {
    std::size_t delivered = 0;
    ring_.read([&](const RecordView& record) {
      if (record.type() != PERF_RECORD_SAMPLE) return;
      SampleRecord sample;
      DecodeStatus status = decode_sample(record, format_, sample);
      if (status != DecodeStatus::ok) {
        ++undecodable_;
        last_decode_error_ = status;
        return;
      }
      ++delivered;
      on_sample(static_cast<const SampleRecord&>(sample));
    });
    return delivered;
  }

 private:
  int fd_ = -1;
  perf_event_attr attr_{};
  SampleFormat format_{};
  std::string name_;
  RingBuffer ring_;
  std::uint64_t undecodable_ = 0;
  DecodeStatus last_decode_error_ = DecodeStatus::ok;
};

// `event` parsed with parse_event (default: cpu-clock, which every Linux has), options as above.
SamplingEvent open_callchain_sampling(std::string_view event, const CallchainSamplingOptions& options,
                                      pid_t tid = 0, std::size_t data_pages = 8);
// Throws selfperf::Error "… needs a hardware PMU with precise sampling (PEBS/IBS) …" (errno ENOENT or the
// open's errno) where the machine has none — VMs and containers usually — or the event cannot be precise.
SamplingEvent open_memory_sampling(std::string_view event = "cpu/mem-loads,ldlat=30/P",
                                   const MemorySamplingOptions& options = {}, pid_t tid = 0,
                                   std::size_t data_pages = 8);

// Whether this machine exposes a PMU that can do precise memory sampling (Intel `cpu`/`cpu_core` with PEBS,
// AMD `ibs_op`). A cheap sysfs check, not a guarantee that a particular event opens.
bool has_precise_memory_pmu() noexcept;

}  // namespace selfperf
