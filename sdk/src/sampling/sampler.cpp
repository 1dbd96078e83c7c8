// Sampler: options, thread attachment, draining and totals. The signal side is in sampler_signal.cpp.
#include "selfperf/sampler.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sampling/fork_guard.hpp"
#include "sampling/new_threads.hpp"
#include "sampling/sampler_core.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace selfperf {

namespace detail {

namespace {

constexpr std::size_t kMaxDepth = 1024;

void validate(const Sampler::Options& o) {
  if ((o.period == 0) == (o.frequency == 0))
    throw Error("Sampler::Options: set exactly one of period (events between samples) and frequency (Hz); "
                "got period " + std::to_string(o.period) + " and frequency " + std::to_string(o.frequency));
  if (o.max_depth == 0 || o.max_depth > kMaxDepth)
    throw Error("Sampler::Options::max_depth " + std::to_string(o.max_depth) + " is out of range: use 1.." +
                std::to_string(kMaxDepth));
  if (o.buffer_capacity == 0)
    throw Error("Sampler::Options::buffer_capacity must be at least 1 sample per thread");
  if (o.ring_pages == 0 || (o.ring_pages & (o.ring_pages - 1)) != 0)
    throw Error("Sampler::Options::ring_pages " + std::to_string(o.ring_pages) +
                " must be a power of two (the kernel's ring buffer is 1 + 2^n pages)");
#if defined(__SANITIZE_THREAD__)
  // TSan intercepts what libunwind calls on a cache miss (dl_iterate_phdr) and runs handlers at its own safe
  // points; libunwind in a sampling handler corrupts TSan's runtime (seen as crashes in its stack depot).
  if (o.unwinder == Unwinder::libunwind)
    throw Error("Sampler::Options::unwinder libunwind is not supported in a ThreadSanitizer build: use "
                "Unwinder::frame_pointer or Unwinder::kernel");
#endif
  if (o.unwinder == Unwinder::kernel && o.rearm != Sampler::Rearm::ring_buffer)
    throw Error("Sampler::Options: the kernel unwinder reads callchains from the ring buffer; use "
                "rearm = Rearm::ring_buffer with Unwinder::kernel");
}

// With credits (ThreadState::credits) enabling grants the first two batches: REFRESH adds to the event's
// limit and enables it; a plain ENABLE leaves the limit at 0, which the kernel reads as "unlimited".
void enable(const ThreadState& s) {
  const bool limited = s.rearm == Sampler::Rearm::refresh || s.credits > 0;
  const unsigned long grant = s.rearm == Sampler::Rearm::refresh ? 1 : 2 * s.credits;
  if (ioctl(s.fd, limited ? PERF_EVENT_IOC_REFRESH : PERF_EVENT_IOC_ENABLE, limited ? grant : 0) != 0)
    throw Error("cannot enable the sampling event", errno);
}

// Credits per batch: one grant (an ioctl) per 16 samples at most, and the two batches outstanding fit in half
// the ring (an overflow the kernel could not write spends a credit too, but its PERF_RECORD_LOST comes only
// with a later record).
std::uint32_t credits_for(const perf_event_attr& attr, std::size_t ring_bytes) {
  std::size_t record = sizeof(perf_event_header) + 4 * sizeof(std::uint64_t);  // tid, time, cpu, period
  if (attr.sample_type & PERF_SAMPLE_CALLCHAIN) record += (attr.sample_max_stack + 8u) * sizeof(std::uint64_t);
  return static_cast<std::uint32_t>(std::clamp<std::size_t>(ring_bytes / record / 4, 1, 16));
}

// Detaches every sampler this thread is still attached to when the thread exits.
// A thread's exit must never turn into std::terminate: whatever detaching throws is dropped (the event
// closes with the process at worst).
struct ExitHook {
  std::vector<std::weak_ptr<SamplerCore>> cores;
  ~ExitHook() {
    for (auto& weak : cores) {
      try {
        if (auto core = weak.lock()) core->detach_this_thread();
      } catch (...) {
      }
    }
  }
};

// An event is one descriptor per thread; a program near its RLIMIT_NOFILE needs the last ones more than the
// profiler does (its open() failing with EMFILE could take it down). A quarter of the limit, at least 16,
// stays the program's.
void leave_descriptors_to_the_program(int fd) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const rlim_t reserve = std::max<rlim_t>(16, limit.rlim_cur / 4);
  if (static_cast<rlim_t>(fd) + reserve < limit.rlim_cur) return;
  ::close(fd);
  throw Error("sampling event not opened for this thread: it would take descriptor " + std::to_string(fd) +
                  " of the " + std::to_string(limit.rlim_cur) + " that RLIMIT_NOFILE allows, leaving the program " +
                  "fewer than " + std::to_string(reserve) + " (each sampled thread holds one). Raise the limit " +
                  "(ulimit -n) to sample every thread",
              EMFILE);
}
thread_local ExitHook t_exit_hook;

}  // namespace

ThreadState::~ThreadState() {
  ring.reset();
  if (fd >= 0) ::close(fd);
}

SamplerCore::SamplerCore(Sampler::Options o) : options(std::move(o)) {
  validate(options);
  std::string text = options.event;
  if (text.empty()) text = detail::hardware_cycles_available() ? "cycles" : "cpu-clock";
  EventSpec spec = parse_event(text);
  attr = to_attr(spec);
  // Unprivileged (perf_event_paranoid 2) processes may only sample user space; an event that names its
  // privilege level (:u, :k) is opened exactly as written.
  if (!spec.explicit_privilege && !kernel_counting_allowed()) attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  attr.inherit = 0;
  if (options.frequency) {
    attr.freq = 1;
    attr.sample_freq = options.frequency;
  } else {
    attr.sample_period = options.period;
  }
  if (options.rearm == Sampler::Rearm::ring_buffer) {
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
    if (options.unwinder == Unwinder::kernel) {
      attr.sample_type |= PERF_SAMPLE_CALLCHAIN;
      attr.exclude_callchain_kernel = 1;
      // The kernel refuses (EOVERFLOW) a depth above kernel.perf_event_max_stack; take what it allows.
      std::size_t allowed = options.max_depth;
      try {
        std::string text = read_text_file("/proc/sys/kernel/perf_event_max_stack");
        if (!text.empty()) allowed = std::min<std::size_t>(allowed, std::stoul(text));
      } catch (const std::exception&) {
      }
      attr.sample_max_stack = static_cast<std::uint16_t>(std::max<std::size_t>(allowed, 1));
    }
    attr.wakeup_events = 1;  // every sample wakes the reader, i.e. raises our signal
    attr.use_clockid = 1;    // Sample::time is CLOCK_MONOTONIC like the other modes
    attr.clockid = CLOCK_MONOTONIC;
  }
  event_name = spec.name.empty() ? text : spec.name;
  pid_ = getpid();
  // A thread attaches or detaches under mutex_ whenever a thread starts or ends; a fork in between would leave
  // the child's copy held for good.
  sampling_locks_wait_for_fork();
  fork_waits_for(mutex_, ForkLockRank::sampler);
}

SamplerCore::~SamplerCore() {
  stop();
  fork_no_longer_waits_for(mutex_);
}

void SamplerCore::start() {
  std::lock_guard lock(mutex_);
  adopt_after_fork();
  if (stopped.load()) throw Error("Sampler::start after stop(): create a new Sampler");
  if (started.load()) return;
  if (options.attach_new_threads && !thread_hook_present())
    throw Error("Sampler::Options::attach_new_threads needs selfperf's pthread_create hook in this program: "
                "link selfperf::thread_hook (CMake: target_link_libraries(<app> PRIVATE selfperf::thread_hook)), "
                "or attach threads yourself with Sampler::ThreadAttachment or sampler.attached(fn)");
  signo = install_signal_handlers(options.signal);
  ignored_at_start_ = ignored_signal_count();
  for (auto& s : states_)
    if (!s->detached) enable(*s);
  started = true;
  if (options.attach_new_threads) attach_new_threads_to(shared_from_this());
}

// Runs on a thread of the program before its own function: nothing may escape it. The first failure is
// reported (it names the cause and the remedy); the rest, usually the same cause on every later thread, are
// only counted (Totals::attach_failed): a program starting a thousand threads past its descriptor limit gets
// one line, not a thousand.
void SamplerCore::attach_new_thread() noexcept {
  static std::atomic<bool> told{false};  // per process: a program with several samplers gets one line too
  if (stopped.load() || !started.load()) return;
  try {
    attach_this_thread();
  } catch (const std::exception& e) {
    if (stopped.load()) return;  // raced with stop(): nothing to sample any more
    attach_failed.fetch_add(1, std::memory_order_relaxed);
    if (!told.exchange(true))
      std::fprintf(stderr,
                   "selfperf: new thread %d not sampled: %s (later threads that fail the same way are only "
                   "counted, in Sampler::Totals::attach_failed)\n",
                   static_cast<int>(current_tid()), e.what());
  } catch (...) {
    attach_failed.fetch_add(1, std::memory_order_relaxed);
  }
}

void SamplerCore::attach_this_thread() {
  const void* marker = this_thread_marker();
  {
    std::lock_guard lock(mutex_);
    adopt_after_fork();
    if (stopped.load()) throw Error("Sampler::attach_this_thread after stop(): create a new Sampler");
    for (auto& s : states_)
      if (!s->detached && s->thread_marker == marker) return;
  }
  auto state = std::make_shared<ThreadState>(options.buffer_capacity, options.max_depth);
  state->tid = current_tid();
  state->pid = getpid();
  state->thread_marker = marker;
  state->stack = StackBounds::of_this_thread();
  state->code = CodeMap::refresh();
  state->unwinder = options.unwinder;
  state->rearm = options.rearm;
  state->period = options.period;
  state->frequency_mode = options.frequency != 0;
  const bool clock = attr.type == PERF_TYPE_SOFTWARE &&
                     (attr.config == PERF_COUNT_SW_CPU_CLOCK || attr.config == PERF_COUNT_SW_TASK_CLOCK);
  state->rate_is_period = !state->frequency_mode || clock;
  state->rate = !state->frequency_mode ? options.period
                : clock                ? std::max<std::uint64_t>(1, 1'000'000'000 / options.frequency)
                                       : options.frequency;
  state->current_rate.store(options.frequency ? options.frequency : options.period, std::memory_order_relaxed);
  // Warmed from a signal only where libunwind's trace cache was made at attach: made lazily, it is made by the
  // first sample that needs it, and a warm-up (a signal and a walk per thread, ~0.6 ms of a short process's
  // CPU) would mostly warm the DWARF walk's process-wide CFI cache, which the first samples fill as well.
  // Put off (defer_libunwind_setup), the process's set-up is only looked at: a thread attached before it
  // finds libunwind once it is made lazily, never where each thread must make its own cache at attach.
  const bool warm_up = options.unwinder == Unwinder::libunwind &&
                       (!options.defer_libunwind_setup || libunwind_setup() != LibunwindSetup::not_yet) &&
                       prepare_libunwind_this_thread();
  state->libunwind_cache_made = warm_up;
  const int fd = open_event(attr, event_name, 0, -1, -1).release();
  leave_descriptors_to_the_program(fd);  // closes it when it throws
  state->fd = fd;
  state->format = SampleFormat::from_attr(attr);
  if (options.rearm == Sampler::Rearm::ring_buffer) {
    state->ring.emplace(state->fd, options.ring_pages);
    state->credits = credits_for(attr, state->ring->data_size());
  }

  std::lock_guard lock(mutex_);
  if (stopped.load()) throw Error("Sampler::attach_this_thread raced with stop(): create a new Sampler");
  int sig = started.load() ? signo.load() : 0;
  if (sig == 0) sig = install_signal_handlers(options.signal);  // handlers before any fd can signal
  sig = route_event(*state, sig);
  signo = sig;
  if (warm_up) warm_up_from_signal(sig, *state);
  if (started.load()) {
    try {
      enable(*state);
    } catch (...) {
      unpublish_event(state->fd, state.get());
      throw;
    }
  }
  states_.push_back(state);
  auto& hook = t_exit_hook.cores;
  std::erase_if(hook, [](const std::weak_ptr<SamplerCore>& w) { return w.expired(); });
  hook.push_back(weak_from_this());
}

void SamplerCore::detach(ThreadState& s) {
  if (s.detached) return;
  s.detached = true;
  // Only ever an event of this process: adopt_after_fork() has dropped the ones a forked child inherited.
  ioctl(s.fd, PERF_EVENT_IOC_DISABLE, 0);
  unpublish_event(s.fd, &s);  // after this no handler touches s
  if (s.ring) {
    s.lost_kernel.store(s.ring->stats().total_lost(), std::memory_order_relaxed);
    s.throttled.store(s.ring->stats().throttles, std::memory_order_relaxed);
    s.ring.reset();
  }
  ::close(s.fd);
  s.fd = -1;
}

// fork() copies the parent's descriptors, which are the parent's open events (one file description, the
// same kernel event, counting and signalling the parent's threads): an ioctl through the child's copy
// disables, enables or re-arms the parent's sampling. The ring mappings are not copied at all (perf_mmap
// marks them VM_DONTCOPY), so their addresses are free in the child and may hold the child's own memory by
// now. The child therefore closes its copies, forgets the mappings and the parent's samples and counts,
// and carries on with no thread attached.
//
// Checked lazily at each entry rather than in a pthread_atfork child handler: that handler may make only
// async-signal-safe calls (no free(), no lock), while here the child holds mutex_ like any other caller.
// (fork() does wait for mutex_ to be free, fork_guard.hpp, so that the child finds it unheld; drain() calls
// its callback outside mutex_, so a callback may fork.)
void SamplerCore::adopt_after_fork() {
  const pid_t self = getpid();
  if (self == pid_) return;
  for (auto& s : states_) {
    if (s->ring) s->ring->forget_mapping();
    s->ring.reset();
    if (s->fd >= 0) {
      withdraw_inherited_event(s->fd, s.get());
      ::close(s->fd);  // the child's copy only: the parent's descriptor keeps the event open
      s->fd = -1;
    }
  }
  states_.clear();
  finished_ = {};
  told_lowered_rate_ = false;
  not_signalled_ = 0;
  told_ = {};
  ignored_at_start_ = ignored_signal_count();
  pid_ = self;
}

void SamplerCore::detach_this_thread() {
  const void* marker = this_thread_marker();
  std::lock_guard lock(mutex_);
  adopt_after_fork();
  for (auto& s : states_)
    if (!s->detached && s->thread_marker == marker) detach(*s);
}

void SamplerCore::add_totals(Sampler::Totals& t, const ThreadState& s) const {
  auto get = [](const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  std::uint64_t lost = get(s.lost_buffer_full) + get(s.lost_kernel) + get(s.lost_coalesced);
  t.samples += get(s.samples);
  t.lost += lost;
  t.lost_buffer_full += get(s.lost_buffer_full);
  t.lost_kernel += get(s.lost_kernel);
  t.lost_coalesced += get(s.lost_coalesced);
  t.throttled += get(s.throttled);
  t.signals += get(s.signals);
  t.sigio += get(s.sigio);
  t.unwound_by_libunwind += get(s.unwound_by_libunwind);
  t.unwound_partially += get(s.unwound_partially);
  t.rate_lowered += get(s.rate_lowered);
  t.threads.push_back({s.tid, get(s.samples), lost, get(s.current_rate)});
}

void SamplerCore::report_lowered_rate() {
  if (told_lowered_rate_) return;
  pid_t tid = 0;
  std::uint64_t rate = 0;
  for (auto& s : states_) {
    if (s->rate_lowered.load(std::memory_order_relaxed) == 0) continue;
    tid = s->tid;
    rate = s->current_rate.load(std::memory_order_relaxed);
    break;
  }
  if (tid == 0) {  // perhaps a thread already gone, whose counts are in finished_
    for (const auto& t : finished_.threads) {
      if (t.rate == (options.frequency ? options.frequency : options.period)) continue;
      tid = t.tid;
      rate = t.rate;
      break;
    }
  }
  if (tid == 0) return;
  told_lowered_rate_ = true;
  auto text = [&](std::uint64_t r) {
    return options.frequency ? std::to_string(r) + " Hz" : "a period of " + std::to_string(r);
  };
  std::fprintf(stderr,
               "selfperf: sampling '%s' at %s took more than half of thread %d's time (each overflow costs the "
               "machine more than that period allows), so its rate was lowered to %s; others may follow "
               "(Sampler::Totals::rate_lowered). Sample less often to keep the rate you ask for.\n",
               event_name.c_str(), text(options.frequency ? options.frequency : options.period).c_str(),
               static_cast<int>(tid), text(rate).c_str());
}

std::size_t SamplerCore::drain(void (*call)(void*, const Sample&), void* fn) {
  std::lock_guard drain_lock(drain_mutex_);
  std::vector<std::shared_ptr<ThreadState>> snapshot;
  {
    std::lock_guard lock(mutex_);
    adopt_after_fork();
    check_health();
    snapshot = states_;
  }
  std::size_t n = 0;
  for (auto& s : snapshot) {
    n += s->buffer.consume(pid_, [&](const Sample& sample) { call(fn, sample); });
    if (s->buffer.corrupt() && !std::exchange(s->told_corrupt, true))
      std::fprintf(stderr, "selfperf: thread %d's sample buffer holds a record that is not one (two handlers "
                           "nested on the thread?): its samples are no longer read\n", static_cast<int>(s->tid));
  }
  std::lock_guard lock(mutex_);
  // Detached and empty (or unreadable): nothing will ever arrive again; keep only its counts.
  std::erase_if(states_, [&](const std::shared_ptr<ThreadState>& s) {
    if (!s->detached || (!s->buffer.empty() && !s->buffer.corrupt())) return false;
    add_totals(finished_, *s);
    return true;
  });
  report_lowered_rate();
  return n;
}

Sampler::Totals SamplerCore::stop() {
  if (options.attach_new_threads) stop_attaching_new_threads(this);  // before the lock: the hook attaches under it
  std::lock_guard lock(mutex_);
  adopt_after_fork();
  if (!stopped.load()) check_health();
  for (auto& s : states_) detach(*s);
  report_lowered_rate();
  stopped = true;
  Sampler::Totals t = finished_;
  for (auto& s : states_) add_totals(t, *s);
  if (started.load()) t.ignored = ignored_signal_count() - ignored_at_start_;
  t.attach_failed = attach_failed.load();
  t.threads_not_signalled = not_signalled_;
  return t;
}

}  // namespace detail

Sampler::Sampler(Options options) : core_(std::make_shared<detail::SamplerCore>(std::move(options))) {}
Sampler::~Sampler() { core_->stop(); }
void Sampler::start() { core_->start(); }
void Sampler::attach_this_thread() { core_->attach_this_thread(); }
void Sampler::detach_this_thread() { core_->detach_this_thread(); }
std::size_t Sampler::drain_impl(void (*call)(void*, const Sample&), void* fn) { return core_->drain(call, fn); }
Sampler::Totals Sampler::stop() { return core_->stop(); }
bool Sampler::running() const noexcept { return core_->started.load() && !core_->stopped.load(); }
int Sampler::signal_number() const noexcept { return detail::current_signal(core_->signo.load()); }
const std::string& Sampler::event_name() const noexcept { return core_->event_name; }
bool Sampler::samples_kernel() const noexcept { return core_->attr.exclude_kernel == 0; }

}  // namespace selfperf
