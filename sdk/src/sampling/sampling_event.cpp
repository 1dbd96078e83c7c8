#include "selfperf/sampling_event.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include <sys/ioctl.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

// An event that did not name its privilege level is narrowed to user space where paranoid forbids kernel
// sampling; returns whether the kernel is excluded in the end.
bool apply_privilege(const EventSpec& event, perf_event_attr& attr) noexcept {
  if (!event.explicit_privilege && !attr.exclude_kernel && !detail::kernel_counting_allowed()) {
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
  }
  return attr.exclude_kernel != 0;
}

RingBuffer map_ring(int fd, std::size_t data_pages) {
  try {
    return RingBuffer(fd, data_pages);
  } catch (...) {
    ::close(fd);
    throw;
  }
}

std::string needs_hardware(std::string_view event, const std::string& detail) {
  return "memory-access sampling with '" + std::string(event) +
         "' needs a hardware PMU with precise sampling (PEBS on Intel, IBS on AMD)" + detail +
         ". Virtual machines and containers usually expose none; run on bare metal (or a VM with PMU "
         "passthrough), or use callchain sampling on cpu-clock instead.";
}

}  // namespace

perf_event_attr callchain_sampling_attr(const EventSpec& event, const CallchainSamplingOptions& options) {
  if ((options.period == 0) == (options.frequency == 0))
    throw Error("callchain sampling on '" + event.name + "': set exactly one of period (" +
                    std::to_string(options.period) + ") and frequency (" + std::to_string(options.frequency) +
                    ")",
                EINVAL);
  perf_event_attr attr = to_attr(event);
  if (options.frequency) {
    attr.freq = 1;
    attr.sample_freq = options.frequency;
  } else {
    attr.sample_period = options.period;
  }
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |
                     PERF_SAMPLE_CALLCHAIN;
  // LOST/THROTTLE records then carry tid and time too.
  attr.sample_id_all = 1;
  attr.wakeup_events = std::max<std::uint32_t>(options.wakeup_events, 1);
  attr.sample_max_stack = options.max_stack;
  const bool user_only = apply_privilege(event, attr);
  switch (options.kernel_frames) {
    case KernelFrames::automatic:
      // A user-only event is sampled in user mode, so its chains have no kernel part anyway; saying so
      // keeps the open within what paranoid 2 allows everywhere (6.18 accepts either here).
      attr.exclude_callchain_kernel = user_only || !detail::kernel_counting_allowed();
      break;
    case KernelFrames::include:
      attr.exclude_callchain_kernel = 0;
      break;
    case KernelFrames::exclude:
      attr.exclude_callchain_kernel = 1;
      break;
  }
  return attr;
}

perf_event_attr memory_sampling_attr(const EventSpec& event, const MemorySamplingOptions& options) {
  if (options.period == 0)
    throw Error("memory-access sampling on '" + event.name + "': period must be non-zero", EINVAL);
  perf_event_attr attr = to_attr(event);
  attr.sample_period = options.period;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
                     PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT;
  if (options.phys_addr) attr.sample_type |= PERF_SAMPLE_PHYS_ADDR;
  attr.sample_id_all = 1;
  attr.wakeup_events = std::max<std::uint32_t>(options.wakeup_events, 1);
  // Only precise (PEBS/IBS) samples carry the data address and source; the IP is then the exact one.
  attr.precise_ip = std::min<unsigned>(3, std::max<unsigned>({1u, options.precise_ip, event.precise_ip}));
  apply_privilege(event, attr);
  return attr;
}

bool has_precise_memory_pmu() noexcept {
  std::error_code ec;
  const std::filesystem::path root = "/sys/bus/event_source/devices";
  for (const char* pmu : {"cpu", "cpu_core", "cpu_atom", "ibs_op"})
    if (std::filesystem::exists(root / pmu, ec)) return true;
  return false;
}

SamplingEvent::SamplingEvent(const perf_event_attr& attr, std::string_view name, pid_t tid,
                             std::size_t data_pages)
    : fd_(detail::open_event(attr, name, tid, -1, -1).release()),
      attr_(attr),
      format_(SampleFormat::from_attr(attr)),
      name_(name),
      ring_(map_ring(fd_, data_pages)) {}

SamplingEvent::SamplingEvent(SamplingEvent&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      attr_(other.attr_),
      format_(other.format_),
      name_(std::move(other.name_)),
      ring_(std::move(other.ring_)),
      undecodable_(other.undecodable_),
      last_decode_error_(other.last_decode_error_) {}

SamplingEvent& SamplingEvent::operator=(SamplingEvent&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    attr_ = other.attr_;
    format_ = other.format_;
    name_ = std::move(other.name_);
    ring_ = std::move(other.ring_);
    undecodable_ = other.undecodable_;
    last_decode_error_ = other.last_decode_error_;
  }
  return *this;
}

SamplingEvent::~SamplingEvent() {
  if (fd_ >= 0) ::close(fd_);  // the mapping (ring_) keeps the event alive until it is unmapped
}

void SamplingEvent::enable() {
  if (::ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    int err = errno;
    throw Error("cannot enable sampling event '" + name_ + "': " + std::strerror(err), err);
  }
}

void SamplingEvent::disable() {
  if (::ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0) != 0) {
    int err = errno;
    throw Error("cannot disable sampling event '" + name_ + "': " + std::strerror(err), err);
  }
}

SamplingEvent open_callchain_sampling(std::string_view event, const CallchainSamplingOptions& options,
                                      pid_t tid, std::size_t data_pages) {
  EventSpec spec = parse_event(event);
  return SamplingEvent(callchain_sampling_attr(spec, options), spec.name, tid, data_pages);
}

SamplingEvent open_memory_sampling(std::string_view event, const MemorySamplingOptions& options, pid_t tid,
                                   std::size_t data_pages) {
  if (!has_precise_memory_pmu())
    throw Error(needs_hardware(event, ": this machine has no core PMU in /sys/bus/event_source/devices "
                                      "(no cpu, cpu_core or ibs_op)"),
                ENOENT);
  EventSpec spec;
  try {
    spec = parse_event(event);
  } catch (const Error& e) {
    throw Error("memory-access sampling event '" + std::string(event) + "': " + e.what(), e.errno_value());
  }
  if (!spec.needs_hardware_pmu())
    throw Error(needs_hardware(event, ": '" + spec.name + "' is a software event, which has no data source"),
                EINVAL);
  perf_event_attr attr = memory_sampling_attr(spec, options);
  try {
    return SamplingEvent(attr, spec.name, tid, data_pages);
  } catch (const Error& e) {
    const int err = e.errno_value();
    if (err == ENOENT || err == EOPNOTSUPP || err == ENODEV || err == EINVAL)
      throw Error(needs_hardware(event, std::string(" (") + e.what() + ")"), err);
    throw;
  }
}

}  // namespace selfperf
