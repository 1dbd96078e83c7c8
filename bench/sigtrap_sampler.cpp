#include "sigtrap_sampler.hpp"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <mutex>
#include <span>
#include <string>

#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace selfperf_bench {
namespace {

using Slot = SigtrapSampler::Slot;

// glibc 2.36 knows neither TRAP_PERF nor si_perf_*: the kernel's values (asm-generic/siginfo.h), whose
// _sigfault._perf {unsigned long data; u32 type; u32 flags} follows si_addr.
constexpr int kTrapPerf = 6;
constexpr std::uint32_t kTrapPerfFlagAsync = 1u << 0;
constexpr std::size_t kPerfFieldsAt = offsetof(siginfo_t, si_addr) + sizeof(void*);
static_assert(kPerfFieldsAt + 16 <= sizeof(siginfo_t));

struct PerfFields {
  std::uint64_t data = 0;
  std::uint32_t type = 0;
  std::uint32_t flags = 0;
};
PerfFields perf_fields(const siginfo_t& info) noexcept {
  PerfFields f;
  const char* at = reinterpret_cast<const char*>(&info) + kPerfFieldsAt;
  std::memcpy(&f.data, at, 8);
  std::memcpy(&f.type, at + 8, 4);
  std::memcpy(&f.flags, at + 12, 4);
  return f;
}

// sig_data of our events: a fixed top half, so that a TRAP_PERF still pending from an earlier sampler is
// recognised (and dropped) rather than handed to the program's handler or the default action (core dump).
constexpr std::uint64_t kTagPrefix = 0x5e1f'7a90'0000'0000ull;
constexpr std::uint64_t kTagMask = 0xffff'ffff'0000'0000ull;

// The live sampler's state, for the handler. g_tag is 0 while none runs.
std::atomic<std::uint64_t> g_tag{0};
std::uint64_t g_generation = 0;
Slot* const* g_slots = nullptr;
std::size_t g_slot_count = 0;
std::atomic<std::size_t> g_next_slot{0};
std::atomic<std::uint32_t> g_claiming{0};  // handlers taking a slot (stop() waits for them)
selfperf::Unwinder g_unwinder = selfperf::Unwinder::frame_pointer;
std::uint64_t g_period = 0;
std::atomic<std::uint64_t> g_chained{0}, g_stale{0}, g_no_slot{0}, g_set_up_in_handler{0};

std::mutex g_install_mutex;
bool g_installed = false;
struct sigaction g_previous {};

[[gnu::tls_model("initial-exec")]] thread_local Slot* t_slot = nullptr;
[[gnu::tls_model("initial-exec")]] thread_local std::uint64_t t_slot_tag = 0;  // the sampler t_slot is of

// Written by the slot's own thread only (its handler never nests: SIGTRAP is masked while it runs).
void bump(std::atomic<std::uint64_t>& counter) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool parse_hex(const char*& p, const char* end, std::uint64_t& out) noexcept {
  out = 0;
  const char* begin = p;
  for (; p < end; ++p) {
    const char c = *p;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    out = out * 16 + static_cast<std::uint64_t>(digit);
  }
  return p != begin;
}

// The /proc/self/maps line whose range holds sp, with open/read/close only (async-signal-safe): a thread
// the program started without us has no other signal-safe source for its stack bounds. {} when not found.
selfperf::StackBounds stack_mapping_of(std::uint64_t sp) noexcept {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  std::size_t held = 0;
  selfperf::StackBounds found;
  for (bool done = false; !done;) {
    const ssize_t got = ::read(fd, buf + held, sizeof buf - held);
    if (got <= 0) break;
    held += static_cast<std::size_t>(got);
    std::size_t line = 0;
    for (std::size_t i = 0; i < held && !done; ++i) {
      if (buf[i] != '\n') continue;
      const char* p = buf + line;
      const char* end = buf + i;
      std::uint64_t low = 0, high = 0;
      if (parse_hex(p, end, low) && p < end && *p++ == '-' && parse_hex(p, end, high) && low <= sp && sp < high) {
        found = {low, high};
        done = true;
      }
      line = i + 1;
    }
    if (line == 0 && held == sizeof buf) break;  // a line longer than the buffer
    std::memmove(buf, buf + line, held - line);
    held -= line;
  }
  ::close(fd);
  return found;
}

// This thread's slot for the sampler tagged `tag`; a thread without one takes the next free slot here.
Slot* this_thread_slot(std::uint64_t tag, const ucontext_t& uc) noexcept {
  if (t_slot_tag == tag) return t_slot;
  // seq_cst pairs with stop(): either it sees our claim in flight and waits, or we see its cleared tag.
  g_claiming.fetch_add(1, std::memory_order_seq_cst);
  Slot* slot = nullptr;
  if (g_tag.load(std::memory_order_seq_cst) == tag) {
    const std::size_t i = g_next_slot.fetch_add(1, std::memory_order_relaxed);
    if (i < g_slot_count) {
      slot = g_slots[i];
      slot->stack = stack_mapping_of(selfperf::RegisterState::from(uc).sp);
      slot->tid.store(static_cast<pid_t>(::syscall(SYS_gettid)), std::memory_order_relaxed);
      g_set_up_in_handler.fetch_add(1, std::memory_order_relaxed);
    }
    t_slot = slot;
    t_slot_tag = tag;
  }
  g_claiming.fetch_sub(1, std::memory_order_seq_cst);
  return slot;
}

void store_sample(Slot& s, const ucontext_t& uc) noexcept {
  std::span<std::uint64_t> frames = s.buffer.reserve();
  if (frames.empty()) {
    bump(s.lost);
    return;
  }
  const selfperf::RegisterState regs = selfperf::RegisterState::from(uc);
  const selfperf::CodeMap* code = selfperf::CodeMap::current();
  std::size_t n = 0;
  if (g_unwinder == selfperf::Unwinder::libunwind) {
    const selfperf::DwarfWalk walk = selfperf::unwind_dwarf(regs, s.stack, frames, code);
    n = walk.frames;
    if (!walk.complete) bump(s.incomplete);
  } else {
    n = selfperf::unwind_frame_pointer(regs, s.stack, frames, code);
  }
  s.buffer.commit(s.tid.load(std::memory_order_relaxed), monotonic_ns(), g_period, 0, n);
  bump(s.samples);
}

// Not ours: what the program had installed before us gets it, as if we were not there.
void chain(int signo, siginfo_t* info, void* context) noexcept {
  g_chained.fetch_add(1, std::memory_order_relaxed);
  const struct sigaction& prev = g_previous;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction != nullptr) prev.sa_sigaction(signo, info, context);
  } else if (prev.sa_handler == SIG_DFL) {
    // SIGTRAP's default action (terminate, core): restored and raised again, taken once this handler returns.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTRAP, &dfl, nullptr);
    raise(SIGTRAP);
  } else if (prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
    prev.sa_handler(signo);
  }
}

void on_sigtrap(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const PerfFields perf = perf_fields(*info);
  const std::uint64_t tag = g_tag.load(std::memory_order_relaxed);
  if (info->si_code != kTrapPerf || (perf.data & kTagMask) != kTagPrefix) {
    chain(signo, info, context);
  } else if (perf.data != tag || tag == 0) {
    // Told apart by the tag alone, not also by si_perf_type: on 6.18 the threads' inherited copies report 6
    // (the kernel's own cpu_clock PMU), the event itself 1 (PERF_TYPE_SOFTWARE).
    g_stale.fetch_add(1, std::memory_order_relaxed);
  } else if (Slot* slot = this_thread_slot(tag, *static_cast<const ucontext_t*>(context))) {
    slot->busy.store(true, std::memory_order_seq_cst);
    if (g_tag.load(std::memory_order_seq_cst) == tag) {  // stop() has not begun
      // Delivered late (the thread had SIGTRAP blocked): the context is where it unblocked, not the overflow.
      if (perf.flags & kTrapPerfFlagAsync) {
        bump(slot->async);
      } else {
        store_sample(*slot, *static_cast<const ucontext_t*>(context));
      }
    }
    slot->busy.store(false, std::memory_order_release);
  } else {
    g_no_slot.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

void install_handler() {
  std::lock_guard lock(g_install_mutex);
  if (g_installed) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_sigtrap;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGTRAP, &sa, &g_previous) != 0) throw selfperf::Error("cannot install the SIGTRAP handler", errno);
  g_installed = true;  // for good: a TRAP_PERF pending after stop() must never meet the default action
}

}  // namespace

SigtrapSampler::SigtrapSampler(Options options) : options_(std::move(options)) {
  if (g_tag.load() != 0) throw selfperf::Error("SigtrapSampler: one at a time per process");
  const selfperf::EventSpec spec = selfperf::parse_event(options_.event);
  perf_event_attr attr = selfperf::to_attr(spec);
  // As Sampler opens its events: user space only where paranoid forbids the kernel.
  if (!spec.explicit_privilege && !selfperf::detail::kernel_counting_allowed()) attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  attr.sample_period = options_.period;
  attr.inherit = 1;
  attr.inherit_thread = options_.inherit_thread;
  attr.remove_on_exec = 1;
  attr.sigtrap = 1;
  const std::uint64_t tag = kTagPrefix | (++g_generation & ~kTagMask);
  attr.sig_data = tag;
  fd_ = selfperf::detail::open_event(attr, options_.event, 0, -1, -1).release();
  for (std::size_t i = 0; i < options_.max_threads; ++i)
    slots_.push_back(std::make_unique<Slot>(options_.buffer_capacity, options_.max_depth));
  for (auto& s : slots_) slot_table_.push_back(s.get());
  g_unwinder = options_.unwinder;
  g_period = options_.period;
  g_slots = slot_table_.data();
  g_slot_count = slot_table_.size();
  g_next_slot.store(0);
  g_tag.store(tag, std::memory_order_seq_cst);
}

SigtrapSampler::~SigtrapSampler() {
  stop();
}

void SigtrapSampler::start() {
  install_handler();
  if (ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0) throw selfperf::Error("SigtrapSampler: enable failed", errno);
}

void SigtrapSampler::attach_this_thread() {
  const std::uint64_t tag = g_tag.load();
  if (stopped_ || t_slot_tag == tag) return;
  // SIGTRAP blocked meanwhile: a handler run in between would take a second slot for this thread.
  sigset_t trap, old;
  sigemptyset(&trap);
  sigaddset(&trap, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &trap, &old);
  const std::size_t i = g_next_slot.fetch_add(1);
  Slot* slot = i < g_slot_count ? g_slots[i] : nullptr;
  if (slot != nullptr) {
    slot->stack = selfperf::StackBounds::of_this_thread();
    slot->tid.store(selfperf::detail::current_tid());
  }
  t_slot = slot;
  t_slot_tag = tag;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (slot == nullptr) throw selfperf::Error("SigtrapSampler: more threads than Options::max_threads");
}

SigtrapSampler::Totals SigtrapSampler::stop() {
  static const Totals none;
  if (stopped_) return none;
  stopped_ = true;
  ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);  // the event and every thread's inherited copy
  g_tag.store(0, std::memory_order_seq_cst);
  while (g_claiming.load(std::memory_order_seq_cst) != 0) sched_yield();
  for (auto& s : slots_)
    while (s->busy.load(std::memory_order_seq_cst)) sched_yield();
  ::close(fd_);  // frees the inherited copies too
  fd_ = -1;
  Totals t;
  for (auto& s : slots_) {
    const pid_t tid = s->tid.load();
    if (tid == 0) continue;
    ThreadTotals th{tid, s->samples.load(), s->lost.load(), s->async.load()};
    t.samples += th.samples;
    t.lost += th.lost;
    t.async += th.async;
    t.incomplete += s->incomplete.load();
    t.threads.push_back(th);
  }
  // Process-wide counts since this sampler began (one at a time).
  t.chained = g_chained.exchange(0);
  t.stale = g_stale.exchange(0);
  t.no_slot = g_no_slot.exchange(0);
  t.set_up_in_handler = g_set_up_in_handler.exchange(0);
  return t;
}

}  // namespace selfperf_bench
