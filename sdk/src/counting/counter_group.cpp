#include "selfperf/counter_group.hpp"

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "counting/group_pages.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"

namespace selfperf {

double CounterValue::scaled() const noexcept {
  if (time_running == 0) return 0.0;
  if (time_running >= time_enabled) return static_cast<double>(value);
  return static_cast<double>(value) * static_cast<double>(time_enabled) / static_cast<double>(time_running);
}

double CounterDelta::scaled() const noexcept {
  if (time_running == 0) return 0.0;
  if (time_running >= time_enabled) return static_cast<double>(count);
  return static_cast<double>(count) * static_cast<double>(time_enabled) / static_cast<double>(time_running);
}

CounterDelta delta(const CounterValue& before, const CounterValue& after) noexcept {
  return {after.value - before.value, after.time_enabled - before.time_enabled,
          after.time_running - before.time_running};
}

namespace {

std::vector<EventSpec> parse_all(const auto& names) {
  std::vector<EventSpec> specs;
  for (const auto& name : names) specs.push_back(parse_event(name));
  return specs;
}

// Layout of read(2) on a leader opened with GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING|ID.
struct GroupReadBuffer {
  std::uint64_t nr;
  std::uint64_t time_enabled;
  std::uint64_t time_running;
  struct {
    std::uint64_t value;
    std::uint64_t id;
  } members[kMaxGroupMembers];
};

constexpr std::uint64_t kReadFormat =
    PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;

}  // namespace

struct CounterGroup::State {
  std::vector<EventSpec> specs;
  std::vector<detail::Fd> fds;
  std::vector<std::uint64_t> ids;
  detail::GroupPages pages;
  pthread_t owner_thread{};
  pid_t owner_tid = 0;
  bool user_only = false;
  bool consistent = false;
  std::vector<std::string> notes;
  std::string_view path = "none: not read yet";
  std::vector<double> overhead;

  void open(GroupOptions options);
  void ioctl_group(unsigned long request, const char* what);
};

void CounterGroup::State::open(GroupOptions options) {
  if (specs.empty()) throw Error("CounterGroup needs at least one event");
  if (specs.size() > kMaxGroupMembers)
    throw Error("CounterGroup of " + std::to_string(specs.size()) + " events: at most " +
                std::to_string(kMaxGroupMembers) + " fit one group; split it into several groups");
  consistent = options.consistent;
  owner_thread = pthread_self();
  owner_tid = detail::current_tid();
  const bool kernel_allowed = detail::kernel_counting_allowed();

  for (std::size_t i = 0; i < specs.size(); ++i) {
    EventSpec& spec = specs[i];
    // perf_event_paranoid 2 without CAP_PERFMON: the kernel refuses exclude_kernel=0 with EACCES.
    if (!spec.explicit_privilege && !kernel_allowed && !spec.exclude_kernel) {
      spec.exclude_kernel = true;
      spec.exclude_hv = true;
      user_only = true;
    }
    perf_event_attr attr = to_attr(spec);
    attr.read_format = kReadFormat;
    attr.disabled = i == 0 ? 1 : 0;  // members follow the leader's enable state
    int group_fd = i == 0 ? -1 : fds[0].get();
    attr.size = sizeof attr;
    int fd = detail::perf_event_open(attr, 0, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && !spec.explicit_privilege && !attr.exclude_kernel) {
      // Privilege checks can be stricter than the sysctl suggests (LSMs): fall back as perf does.
      spec.exclude_kernel = true;
      spec.exclude_hv = true;
      attr.exclude_kernel = attr.exclude_hv = 1;
      user_only = true;
      fd = detail::perf_event_open(attr, 0, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0) {
      int err = errno;
      std::string msg = detail::open_error_message(err, attr, spec.name);
      if (i > 0 && (err == EINVAL || err == ENOSPC || err == EMSGSIZE))
        msg += " As member " + std::to_string(i + 1) + " of " + std::to_string(specs.size()) +
               " in one group: the group cannot be scheduled together on this PMU (too many counters or "
               "incompatible PMUs); split it into smaller groups.";
      throw Error(msg, err);
    }
    fds.emplace_back(fd);
    std::uint64_t id = 0;
    if (::ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) id = 0;
    ids.push_back(id);
    if (spec.exclude_kernel && spec.counts_in_kernel_only())
      notes.push_back("'" + spec.name + "' is counted in kernel context; opened user-only it always reads 0 " +
                      "(perf_event_paranoid=" + std::to_string(detail::perf_event_paranoid()) +
                      "; run with CAP_PERFMON or sysctl kernel.perf_event_paranoid=1 to count it)");
  }
  if (user_only)
    notes.insert(notes.begin(),
                 "opened user-only (exclude_kernel): perf_event_paranoid=" +
                     std::to_string(detail::perf_event_paranoid()) +
                     " forbids kernel counting without CAP_PERFMON; kernel time and events are not counted");
  pages.map(fds, specs);
}

void CounterGroup::State::ioctl_group(unsigned long request, const char* what) {
  if (::ioctl(fds[0].get(), request, PERF_IOC_FLAG_GROUP) != 0) {
    int err = errno;
    throw Error(std::string("CounterGroup ") + what + " failed: " + std::strerror(err), err);
  }
}

CounterGroup::CounterGroup(std::initializer_list<std::string_view> events, GroupOptions options)
    : CounterGroup(parse_all(events), options) {}

CounterGroup::CounterGroup(const std::vector<std::string>& events, GroupOptions options)
    : CounterGroup(parse_all(events), options) {}

CounterGroup::CounterGroup(std::vector<EventSpec> events, GroupOptions options) : state_(new State) {
  state_->specs = std::move(events);
  try {
    state_->open(options);
    if (options.subtract_overhead) calibrate();
  } catch (...) {
    delete state_;
    throw;
  }
}

CounterGroup::CounterGroup(CounterGroup&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}

CounterGroup& CounterGroup::operator=(CounterGroup&& other) noexcept {
  if (this != &other) {
    delete state_;
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

CounterGroup::~CounterGroup() { delete state_; }

std::size_t CounterGroup::size() const noexcept { return state_ ? state_->specs.size() : 0; }
const EventSpec& CounterGroup::event(std::size_t i) const { return state_->specs.at(i); }
void CounterGroup::enable() {
  // Not PERF_IOC_FLAG_GROUP: on Linux 6.18 (likely since the per-PMU contexts of 6.2, where enabling an event
  // reschedules only its own PMU) that left a member on another PMU than the leader's (page-faults under
  // task-clock) off until the thread's next context switch. Members first, while the leader is off, so none
  // of them is scheduled alone; the leader last, whose scheduling puts the whole group on at once.
  State& s = *state_;
  for (std::size_t i = s.fds.size(); i-- > 0;)
    if (::ioctl(s.fds[i].get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
      int err = errno;
      throw Error("CounterGroup enable of '" + s.specs[i].name + "' failed: " + std::strerror(err), err);
    }
}
void CounterGroup::disable() { state_->ioctl_group(PERF_EVENT_IOC_DISABLE, "disable"); }
void CounterGroup::reset() { state_->ioctl_group(PERF_EVENT_IOC_RESET, "reset"); }

GroupReading CounterGroup::read() {
  GroupReading out;
  read(out);
  return out;
}

void CounterGroup::read(GroupReading& out) {
  State& s = *state_;
  const std::size_t n = s.specs.size();
  out.resize(n);
  if (!s.consistent && s.pages.usable()) {
    // rdpmc reads the counter of the CPU we run on, which holds only the owner thread's counts.
    if (pthread_equal(pthread_self(), s.owner_thread)) {
      if (s.pages.read(out)) {
        for (std::size_t i = 0; i < n; ++i) out[i].id = s.ids[i];
        s.path = "rdpmc";
        return;
      }
      s.path = s.pages.last_refusal();
    } else {
      s.path = "syscall: other thread (rdpmc would read the calling thread's counter)";
    }
  } else {
    s.path = s.consistent ? std::string_view("syscall: consistent group read requested") : s.pages.refusal();
  }
  GroupReadBuffer buf;
  ssize_t got = ::read(s.fds[0].get(), &buf, sizeof buf);
  if (got < static_cast<ssize_t>(3 * sizeof(std::uint64_t))) {
    int err = got < 0 ? errno : EIO;
    throw Error(std::string("CounterGroup read of '") + s.specs[0].name + "' failed: " + std::strerror(err), err);
  }
  for (std::size_t i = 0; i < n && i < buf.nr; ++i) {
    out[i].value = buf.members[i].value;
    out[i].id = buf.members[i].id;
    out[i].time_enabled = buf.time_enabled;
    out[i].time_running = buf.time_running;
  }
}

void CounterGroup::calibrate() {
  // The minimum, not the mean: the cheapest empty region is the cost the reads themselves add; anything
  // above it is interference (interrupts, preemption) that real regions suffer too.
  constexpr int kPairs = 256;
  State& s = *state_;
  s.overhead.assign(s.specs.size(), std::numeric_limits<double>::infinity());
  enable();
  GroupReading before, after;
  for (int pair = 0; pair < kPairs; ++pair) {
    read(before);
    read(after);
    for (std::size_t i = 0; i < s.specs.size(); ++i) {
      CounterDelta d = delta(before[i], after[i]);
      if (d.counted()) s.overhead[i] = std::min(s.overhead[i], d.scaled());
    }
  }
  disable();
  reset();
  for (double& o : s.overhead)
    if (o == std::numeric_limits<double>::infinity()) o = 0;
  s.path = "none: not read yet";
}

void detail::CounterGroupTestAccess::use_synthetic_pages(CounterGroup& group,
                                                         std::vector<const volatile perf_event_mmap_page*> pages,
                                                         std::uint64_t (*read_pmc)(std::uint32_t),
                                                         std::uint64_t (*read_timestamp)()) {
  group.state_->pages.use_synthetic(std::move(pages), read_pmc, read_timestamp);
}

std::span<const double> CounterGroup::overhead() const noexcept { return state_->overhead; }

std::string_view CounterGroup::read_path() const noexcept { return state_->path; }
bool CounterGroup::user_only() const noexcept { return state_->user_only; }
const std::vector<std::string>& CounterGroup::notes() const noexcept { return state_->notes; }
pid_t CounterGroup::owner_tid() const noexcept { return state_->owner_tid; }
int CounterGroup::leader_fd() const noexcept { return state_->fds[0].get(); }
int CounterGroup::fd(std::size_t i) const { return state_->fds.at(i).get(); }

}  // namespace selfperf
