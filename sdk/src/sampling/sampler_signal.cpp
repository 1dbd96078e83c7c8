// The sampling signal handlers. Everything here runs in signal context: no allocation, no locks, no stdio;
// the only system calls are the re-arming ioctl in refresh mode, the rare one that lowers a thread's rate,
// and clock_gettime (vDSO).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <string>

#include <fcntl.h>
#include <sched.h>

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "sampling/fork_guard.hpp"
#include "sampling/new_threads.hpp"
#include "sampling/sampler_core.hpp"
#include "unwinding/code_map_lock.hpp"
#include "selfperf/error.hpp"
#include "selfperf/tsc_clock.hpp"

namespace selfperf::detail {

namespace {

// The fd → event table the handlers search by si_fd. `readers` counts handlers between loading `state` and
// finishing with it: unpublish waits for it to drain before the state may be freed.
struct EventSlot {
  std::atomic<ThreadState*> state{nullptr};
  std::atomic<std::uint32_t> readers{0};
};
EventSlot g_events[kMaxEventFd];
std::atomic<int> g_highest_fd{-1};
std::atomic<std::uint64_t> g_ignored{0};

// Initial-exec TLS: reading it in a handler is one %fs-relative access, never __tls_get_addr (which may
// allocate). The address of the marker identifies the thread.
[[gnu::tls_model("initial-exec")]] thread_local char t_marker;
[[gnu::tls_model("initial-exec")]] thread_local ThreadState* t_warming = nullptr;

// The event descriptors this thread attached, for the SIGIO fallback, which names none: scanning the whole
// table instead (two atomic operations per descriptor number up to the highest) costs more than a short
// period in a program with thousands of descriptors, and SIGIO comes exactly when signals already cost too
// much. Written by the owner alone (publish_event runs on it), read by its handlers. An entry may be stale
// (closed by stop() on another thread, the number reused): with_own_event checks ownership. A thread with
// more events than entries scans the table.
constexpr int kOwnEvents = 8;
[[gnu::tls_model("initial-exec")]] thread_local std::atomic<int> t_own_fds[kOwnEvents] = {-1, -1, -1, -1,
                                                                                          -1, -1, -1, -1};
[[gnu::tls_model("initial-exec")]] thread_local std::atomic<bool> t_scan_all{false};

std::mutex g_install_mutex;
// The thread holding g_install_mutex (its t_marker): a program may change a disposition from a signal handler
// (sigaction is async-signal-safe) that interrupted one of ours holding the lock; that change moves nothing
// rather than deadlock (give_signal_to_program).
std::atomic<const void*> g_install_owner{nullptr};
int g_sample_signals[64];  // signals carrying our handler
int g_sample_signal_count = 0;
// Bit signo-1 for every signal that ever carried our handler: the program's sigaction calls for other signals
// (nearly all of them) leave give_signal_to_program without taking a lock.
std::atomic<std::uint64_t> g_ever_ours{0};
bool g_sigio_installed = false;
struct sigaction g_previous_sigio;
// Where the events of a signal the program took went (give_signal_to_program): 0 none, -1 nowhere (no signal
// was free). One step, never a chain: a move from s to t repoints whatever pointed at s. Under g_install_mutex.
int g_moved_to[NSIG];

// CLOCK_THREAD_CPUTIME_ID is a system call (no vDSO path): the governor asks once per window.
std::uint64_t thread_cpu_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// A thread's counters are written only by its own handlers, which never nest (each masks the other): a plain
// increment published with a relaxed store, not a locked read-modify-write (~20 cycles each, several per
// sample). Readers on other threads see a value at most one sample behind.
void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

std::size_t unwind_user(ThreadState& s, const ucontext_t& uc, std::span<std::uint64_t> out) noexcept {
  RegisterState regs = RegisterState::from(uc);
  if (s.unwinder == Unwinder::libunwind) {
    const DwarfWalk walk = unwind_dwarf(regs, s.stack, out, s.code);
    if (walk.complete) return walk.frames;
    // Within libunwind's budget (see LibunwindBudget) and once it is set up; else the sample keeps the frames the
    // DWARF walk found.
    const std::uint64_t begin = TscClock::now_tsc();
    const LibunwindSetup setup = libunwind_setup();
    const bool ready =
        setup == LibunwindSetup::lazy || (setup == LibunwindSetup::per_thread && s.libunwind_cache_made);
    if (!ready || !s.libunwind_budget.allows(begin)) {
      bump(s.unwound_partially);
      return walk.frames;
    }
    const std::size_t n = unwind_libunwind(regs, out);
    s.libunwind_budget.spent(begin, TscClock::now_tsc());
    if (n == 0) {  // a fork under way: libunwind is left alone, `out` still holds the walk's frames
      bump(s.unwound_partially);
      return walk.frames;
    }
    bump(s.unwound_by_libunwind);
    return n;
  }
  return unwind_frame_pointer(regs, s.stack, out, s.code);
}

void store_user_sample(ThreadState& s, const ucontext_t& uc, std::uint64_t time, std::uint64_t period,
                       std::uint32_t cpu) noexcept {
  std::span<std::uint64_t> frames = s.buffer.reserve();
  if (frames.empty()) {
    bump(s.lost_buffer_full);
    return;
  }
  std::size_t n = unwind_user(s, uc, frames);
  s.buffer.commit(s.tid, time, period, cpu, n);
  bump(s.samples);
}

void store_kernel_sample(ThreadState& s, const SampleRecord& record) noexcept {
  std::span<std::uint64_t> frames = s.buffer.reserve();
  if (frames.empty()) {
    bump(s.lost_buffer_full);
    return;
  }
  std::size_t n = strip_context_markers(record.callchain, frames, /*user_only=*/true);
  s.buffer.commit(s.tid, record.time, record.period, record.cpu, n);
  bump(s.samples);
}

// Halves the thread's rate: taking its samples cost it more than half its time (see SamplingGovernor).
// One ioctl, rarely (at most once per window of overflows).
void lower_rate(ThreadState& s) noexcept {
  if (s.rate_is_period ? s.rate > UINT64_MAX / 2 : s.rate < 2) return;  // no longer period, or 1 Hz already
  std::uint64_t next = s.rate_is_period ? s.rate * 2 : s.rate / 2;
  if (ioctl(s.fd, PERF_EVENT_IOC_PERIOD, &next) != 0) return;
  s.rate = next;
  if (!s.frequency_mode) s.period = next;
  const std::uint64_t shown = !s.frequency_mode ? next : s.rate_is_period ? 1'000'000'000 / next : next;
  s.current_rate.store(shown, std::memory_order_relaxed);
  bump(s.rate_lowered);
}

// Accounts `overflows` the ring showed and grants the credits they spent, a batch at a time. `limit_reached`:
// the signal says (POLL_HUP) that the kernel stopped the event at its limit; if the count did not lead to a
// grant (a resync skipped records, or the grant came with an earlier signal), grant afresh so that the thread
// is never left unsampled.
void spend_credits(ThreadState& s, std::uint64_t overflows, bool limit_reached) noexcept {
  if (s.credits == 0) return;
  s.credit_used += overflows;
  std::uint64_t grant = s.credit_used / s.credits * s.credits;
  if (grant == 0 && limit_reached) {
    grant = 2 * s.credits;
    s.credit_used = 0;
  } else {
    s.credit_used -= grant;
  }
  if (grant != 0) ioctl(s.fd, PERF_EVENT_IOC_REFRESH, static_cast<int>(grant));
}

// Lost and throttle records are counted by the RingBuffer itself (its stats, collected at detach).
// Returns the timestamp of the first overflow behind this signal, or `entry_ns` when there is none.
std::uint64_t handle_ring(ThreadState& s, const ucontext_t& uc, std::uint64_t entry_ns, bool limit_reached,
                          std::uint64_t& overflows) noexcept {
  const bool kernel_chain = s.unwinder == Unwinder::kernel;
  const RingBufferStats& stats = s.ring->stats();
  const std::uint64_t spent_before = stats.samples + stats.total_lost();
  std::uint64_t first_ns = entry_ns;
  SampleRecord newest;
  s.ring->read([&](const RecordView& view) noexcept {
    if (view.type() != PERF_RECORD_SAMPLE) return;
    SampleRecord record;
    if (decode_sample(view, s.format, record) != DecodeStatus::ok) return;
    if (overflows++ == 0 && record.time < first_ns) first_ns = record.time;
    if (kernel_chain) store_kernel_sample(s, record);
    newest = record;
  });
  spend_credits(s, stats.samples + stats.total_lost() - spent_before, limit_reached);
  if (kernel_chain || overflows == 0) return first_ns;  // none behind this signal: an earlier one took it
  // Only the newest overflow's stack is still there to unwind.
  if (overflows > 1) bump(s.lost_coalesced, overflows - 1);
  store_user_sample(s, uc, newest.time, newest.period, newest.cpu);
  return first_ns;
}

// `named`: the signal named this event (si_fd). SIGIO's fallback names none and serves each of the thread's
// events; one it finds nothing for had no overflow, and its governor is not told of the run.
void handle_overflow(ThreadState& s, const ucontext_t& uc, bool limit_reached, bool named = true) noexcept {
  struct InHandler {
    std::atomic<bool>& flag;
    explicit InHandler(std::atomic<bool>& f) noexcept : flag(f) { flag.store(true, std::memory_order_relaxed); }
    ~InHandler() { flag.store(false, std::memory_order_relaxed); }
  } in_handler(s.in_handler);
  bump(s.signals);
  const std::uint64_t entry_ns = monotonic_ns();
  std::uint64_t overflow_ns = entry_ns;
  std::uint64_t overflows = 1;
  switch (s.rearm) {
    case Sampler::Rearm::ring_buffer:
      overflows = 0;
      overflow_ns = handle_ring(s, uc, entry_ns, limit_reached, overflows);
      break;
    case Sampler::Rearm::overflow_signal:
      store_user_sample(s, uc, entry_ns, s.period, 0);
      break;
    case Sampler::Rearm::refresh:
      store_user_sample(s, uc, entry_ns, s.period, 0);
      ioctl(s.fd, PERF_EVENT_IOC_REFRESH, 1);
      break;
  }
  if (overflows == 0 && !named) return;
  if (s.governor.account(overflow_ns, monotonic_ns(), overflows, thread_cpu_ns)) lower_rate(s);
}

// Runs `fn(state)` when `fd` is one of our events owned by this thread; false otherwise.
template <typename Fn>
bool with_own_event(int fd, Fn&& fn) noexcept {
  if (fd < 0 || fd >= kMaxEventFd) return false;
  EventSlot& slot = g_events[fd];
  // seq_cst on both sides (here and in unpublish_event): the reader count is raised before the pointer is
  // read, the pointer is cleared before the count is checked, so no handler keeps a pointer unpublish missed.
  slot.readers.fetch_add(1, std::memory_order_seq_cst);
  ThreadState* s = slot.state.load(std::memory_order_seq_cst);
  // Another thread's event: a signal queued before its fd number was closed and reused.
  bool ours = s != nullptr && s->thread_marker == &t_marker;
#if defined(__SANITIZE_THREAD__)
  // TSan defers a signal to the thread's next intercepted call, and its queue is memory that fork() copies: a
  // child ran the parent's deferred signal in its first call after fork(), with the parent's state, whose ring
  // the child does not have mapped (SIGSEGV, 1 fork in ~6 of test_sampler_fork). The kernel never hands a child
  // its parent's signals, so only here is the event's thread checked by tid (a system call).
  ours = ours && s->tid == current_tid();
#endif
  if (ours) fn(*s);
  slot.readers.fetch_sub(1, std::memory_order_release);
  return ours;
}

void on_sample_signal(int, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  auto& uc = *static_cast<ucontext_t*>(context);
  if (info->si_code <= 0) {  // sent by a process (kill, tgkill, sigqueue), not by the kernel for an event
    if (ThreadState* warming = t_warming) {
      std::uint64_t frames[64];
      unwind_user(*warming, uc, frames);
    } else {
      g_ignored.fetch_add(1, std::memory_order_relaxed);
    }
  } else if (!with_own_event(info->si_fd,
                             [&](ThreadState& s) { handle_overflow(s, uc, info->si_code == POLL_HUP); })) {
    g_ignored.fetch_add(1, std::memory_order_relaxed);
  }
  errno = saved_errno;
}

// The kernel sends SIGIO (SI_KERNEL, no fd) when it cannot queue the real-time signal. It is directed at the
// thread that owns the event, so service every event of this thread.
void on_sigio(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  auto& uc = *static_cast<ucontext_t*>(context);
  bool handled = false;
  if (info->si_code == SI_KERNEL) {
    auto serve = [&](int fd) {
      handled |= with_own_event(fd, [&](ThreadState& s) {
        bump(s.sigio);
        handle_overflow(s, uc, /*limit_reached=*/false, /*named=*/false);  // the fallback says neither
      });
    };
    if (t_scan_all.load(std::memory_order_relaxed)) {
      const int highest = g_highest_fd.load(std::memory_order_acquire);
      for (int fd = 0; fd <= highest; ++fd) serve(fd);
    } else {
      for (auto& own : t_own_fds) serve(own.load(std::memory_order_relaxed));
    }
  } else if (info->si_code > 0) {
    handled = with_own_event(info->si_fd,
                             [&](ThreadState& s) { handle_overflow(s, uc, info->si_code == POLL_HUP); });
  }
  errno = saved_errno;
  if (handled) return;
  const struct sigaction& prev = g_previous_sigio;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(signo, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(signo);
  }
  // SIG_DFL for SIGIO terminates: a stray SIGIO that is not ours is dropped rather than killing the process.
}

void install(int signo, void (*handler)(int, siginfo_t*, void*), struct sigaction* previous) {
  struct sigaction sa {};
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  // The two handlers never nest on one thread: they share the thread's ring buffer and sample buffer.
  sigaddset(&sa.sa_mask, SIGIO);
  for (int i = 0; i < g_sample_signal_count; ++i) sigaddset(&sa.sa_mask, g_sample_signals[i]);
  sigaddset(&sa.sa_mask, signo);
  if (sigaction(signo, &sa, previous) != 0)
    throw Error("cannot install the sampling handler for signal " + std::to_string(signo), errno);
}

// On the owner thread: an entry that is free, this very fd, or no longer one of this thread's events.
void remember_own_event(int fd) noexcept {
  for (auto& own : t_own_fds) {
    const int at = own.load(std::memory_order_relaxed);
    if (at == fd) return;
  }
  for (auto& own : t_own_fds) {
    const int at = own.load(std::memory_order_relaxed);
    if (!with_own_event(at, [](ThreadState&) {})) {
      own.store(fd, std::memory_order_relaxed);
      return;
    }
  }
  t_scan_all.store(true, std::memory_order_relaxed);
}

}  // namespace

std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no system call, safe in a handler
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

const void* this_thread_marker() noexcept { return &t_marker; }

void sampling_locks_wait_for_fork() {
  static std::once_flag once;
  std::call_once(once, [] {
    fork_waits_for(g_install_mutex, ForkLockRank::leaf);
    registry_waits_for_fork();
    code_map_waits_for_fork();
  });
}

namespace {

// g_install_mutex, with its holder noted in g_install_owner.
class InstallLock {
 public:
  InstallLock() : lock_(g_install_mutex) { g_install_owner.store(&t_marker, std::memory_order_relaxed); }
  ~InstallLock() { g_install_owner.store(nullptr, std::memory_order_relaxed); }
  InstallLock(const InstallLock&) = delete;
  InstallLock& operator=(const InstallLock&) = delete;

 private:
  std::unique_lock<std::mutex> lock_;
};

// A signal's current stand-in: itself, or where its events went when the program took it (-1: nowhere).
int resolve(int signo) noexcept {
  return signo > 0 && signo < NSIG && g_moved_to[signo] != 0 ? g_moved_to[signo] : signo;
}

// Whether `signo` is free for samples: default action, or our handler already.
bool signal_is_free(int signo) noexcept {
  struct sigaction current {};
  if (sigaction(signo, nullptr, &current) != 0) return false;
  return (current.sa_flags & SA_SIGINFO) ? current.sa_sigaction == on_sample_signal
                                         : current.sa_handler == SIG_DFL;
}

// The lowest free real-time signal from SIGRTMIN+4 other than `except`; 0 when none is. SIGRTMIN..+3 are left
// to libraries that hard-code them.
int lowest_free_realtime_signal(int except) noexcept {
  for (int s = SIGRTMIN + 4; s <= SIGRTMAX; ++s)
    if (s != except && signal_is_free(s)) return s;
  return 0;
}

// Our handler on `signo`, with SIGIO's mask widened to it. Caller holds the InstallLock. A signal the program
// took once and then left at its default action (a loop resetting every signal) is ours again.
void adopt(int signo) {
  bool known = false;
  for (int i = 0; i < g_sample_signal_count; ++i) known |= g_sample_signals[i] == signo;
  if (known && sample_handler_installed(signo)) return;
  if (!known && g_sample_signal_count == static_cast<int>(std::size(g_sample_signals)))
    throw Error("too many distinct sampling signals in one process");
  if (!known) g_sample_signals[g_sample_signal_count++] = signo;
  g_ever_ours.fetch_or(std::uint64_t{1} << (signo - 1), std::memory_order_release);
  install(signo, on_sample_signal, nullptr);
  // Every handler of ours masks every signal of ours, the new one too: a thread's event moved from one signal
  // to another (give_signal_to_program) may be delivered the old one and the new one back to back, and two
  // handlers nested on one thread would both write its ring and its sample buffer (seen: 8 million garbage
  // samples written from a buffer whose producer was interrupted by the other).
  for (int i = 0; i < g_sample_signal_count; ++i)
    if (g_sample_signals[i] != signo && sample_handler_installed(g_sample_signals[i]))
      install(g_sample_signals[i], on_sample_signal, nullptr);
  if (g_sigio_installed) install(SIGIO, on_sigio, nullptr);
}

}  // namespace

int install_signal_handlers(int requested) {
  InstallLock lock;
  int signo = resolve(requested);
  if (signo == 0) {
    // One of ours still carrying our handler first: a signal the program took since (with no wrapper to move
    // us off it) stays the program's. Then the first real-time signal nobody handles.
    for (int i = 0; i < g_sample_signal_count && signo == 0; ++i) {
      const int s = resolve(g_sample_signals[i]);
      if (s > 0 && sample_handler_installed(s)) signo = s;
    }
    if (signo == 0) signo = lowest_free_realtime_signal(0);
    if (signo == 0)
      throw Error("no free real-time signal for the sampler: every one from SIGRTMIN+4 has a handler; set "
                  "Sampler::Options::signal to one the program does not use");
  } else if (signo < 0) {
    throw Error("the program took signal " + std::to_string(requested) +
                ", which carried samples, and no real-time signal was left for them: sampling is off");
  } else if (signo >= NSIG || signo == SIGKILL || signo == SIGSTOP || signo == SIGSEGV || signo == SIGBUS ||
             signo == SIGFPE || signo == SIGILL) {
    throw Error("Sampler::Options::signal " + std::to_string(signo) +
                " cannot carry samples: use a real-time signal (SIGRTMIN..SIGRTMAX) or 0 to pick one");
  }
  if (signo != SIGIO) adopt(signo);
  if (!g_sigio_installed) {
    install(SIGIO, on_sigio, &g_previous_sigio);
    g_sigio_installed = true;
  }
  return signo;
}

int current_signal(int signo) noexcept {
  if (signo <= 0) return signo;
  std::lock_guard lock(g_install_mutex);
  return resolve(signo);
}

int route_event(ThreadState& state, int signo) {
  InstallLock lock;
  const int sig = resolve(signo);
  if (sig < 0)
    throw Error("the program took signal " + std::to_string(signo) +
                ", which carried samples, and no real-time signal was left for them: thread not sampled");
  f_owner_ex owner{F_OWNER_TID, state.tid};
  if (fcntl(state.fd, F_SETSIG, sig) != 0 || fcntl(state.fd, F_SETOWN_EX, &owner) != 0)
    throw Error("cannot route sampling signals to thread " + std::to_string(state.tid) +
                    " (fcntl F_SETSIG/F_SETOWN_EX)",
                errno);
  const int flags = fcntl(state.fd, F_GETFL);
  if (flags < 0 || fcntl(state.fd, F_SETFL, flags | O_ASYNC) != 0)
    throw Error("cannot enable O_ASYNC on the sampling event", errno);
  state.signal.store(sig, std::memory_order_relaxed);
  publish_event(state.fd, &state);
  return sig;
}

void publish_event(int fd, ThreadState* state) {
  if (fd < 0 || fd >= kMaxEventFd)
    throw Error("sampling event fd " + std::to_string(fd) + " is beyond the sampler's table of " +
                std::to_string(kMaxEventFd) + " descriptors; close unused descriptors or attach earlier");
  g_events[fd].state.store(state, std::memory_order_seq_cst);
  remember_own_event(fd);
  int highest = g_highest_fd.load(std::memory_order_relaxed);
  while (fd > highest && !g_highest_fd.compare_exchange_weak(highest, fd, std::memory_order_acq_rel)) {
  }
}

void unpublish_event(int fd, const ThreadState* state) noexcept {
  if (fd < 0 || fd >= kMaxEventFd) return;
  EventSlot& slot = g_events[fd];
  ThreadState* expected = const_cast<ThreadState*>(state);
  slot.state.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst);
  // Handlers that loaded the pointer finish in bounded time (no blocking inside): wait them out.
  while (slot.readers.load(std::memory_order_seq_cst) != 0) sched_yield();
}

void withdraw_inherited_event(int fd, const ThreadState* state) noexcept {
  if (fd < 0 || fd >= kMaxEventFd) return;
  EventSlot& slot = g_events[fd];
  ThreadState* expected = const_cast<ThreadState*>(state);
  if (!slot.state.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) return;
  // A count copied at fork() belongs to handlers on threads that do not exist in this process: nobody will
  // ever lower it, and waiting for it would hang.
  slot.readers.store(0, std::memory_order_seq_cst);
}

bool sample_handler_installed(int signo) noexcept {
  struct sigaction current {};
  return sigaction(signo, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
         current.sa_sigaction == on_sample_signal;
}

std::uint64_t ignored_signal_count() noexcept { return g_ignored.load(std::memory_order_relaxed); }

void warm_up_from_signal(int signo, ThreadState& state) noexcept {
  t_warming = &state;
  // Delivered before tgkill returns: the signal is unblocked and aimed at this very thread.
  syscall(SYS_tgkill, getpid(), state.tid, signo);
  t_warming = nullptr;
  state.libunwind_budget = {};  // a cold warm-up fallback must not delay the first samples
}

// The program may call sigaction from a signal handler (it is async-signal-safe), so this allocates nothing and
// writes its line with write(2); a handler that interrupted this very thread holding the lock moves nothing
// (g_install_owner).
void give_signal_to_program(int signo) noexcept {
  if (signo <= 0 || signo > 64 || signo == SIGIO) return;
  if (!(g_ever_ours.load(std::memory_order_acquire) >> (signo - 1) & 1)) return;
  if (g_install_owner.load(std::memory_order_relaxed) == &t_marker) return;
  try {
    InstallLock lock;
    bool carries = false;
    for (int i = 0; i < g_sample_signal_count; ++i) carries |= g_sample_signals[i] == signo;
    if (!carries || g_moved_to[signo] != 0) return;  // not ours, or already handed over
    // The lowest free one. A loop over every signal, either way, then moves the samples at most twice: up to
    // the next signal, which the loop reaches next, and from there back to one it has already passed. Where the
    // program took every real-time signal, SIGURG or SIGWINCH at their default action: that action ignores, so
    // even a stray sample after the program takes one of them harms nothing; pending ones merge (each thread
    // has its own event, and its ring holds every overflow, so one delivery takes them all).
    int target = lowest_free_realtime_signal(signo);
    for (int s : {SIGURG, SIGWINCH})
      if (target == 0 && s != signo && signal_is_free(s)) target = s;
    if (target != 0) adopt(target);
    // Only this process's events: a forked child's table still holds the parent's until the sampler adopts
    // the fork, and F_SETSIG through the child's copy of a descriptor would re-route the parent's event.
    const pid_t self = getpid();
    pid_t waited[256];  // threads whose old signals are waited for (the first 256; the rest are not)
    std::size_t moved = 0;
    const int highest = g_highest_fd.load(std::memory_order_acquire);
    for (int fd = 0; fd <= highest; ++fd) {
      EventSlot& slot = g_events[fd];
      slot.readers.fetch_add(1, std::memory_order_seq_cst);
      ThreadState* state = slot.state.load(std::memory_order_seq_cst);
      if (state != nullptr && state->pid == self && state->signal.load(std::memory_order_relaxed) == signo) {
        if (target != 0 ? fcntl(fd, F_SETSIG, target) == 0 : ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) == 0) {
          state->signal.store(target != 0 ? target : -1, std::memory_order_relaxed);
          if (moved < std::size(waited)) waited[moved] = state->tid;
          ++moved;
        }
      }
      slot.readers.fetch_sub(1, std::memory_order_release);
    }
    for (int& to : g_moved_to)
      if (to == signo) to = target != 0 ? target : -1;
    g_moved_to[signo] = target != 0 ? target : -1;
    if (target != 0) g_moved_to[target] = 0;
    // A signal queued under the old number before the move is delivered as soon as its thread runs, to our
    // handler while it is still there: wait for that (bounded), so that the program's disposition, SIG_DFL
    // above all (a real-time signal's default terminates), never meets one of ours. A thread that blocks the
    // signal keeps its (at most two batches of credits) until it unblocks: not waited for.
    const std::uint64_t give_up = monotonic_ns() + 100'000'000;
    for (std::size_t i = 0; i < std::min(moved, std::size(waited)); ++i) {
      for (;;) {
        const ThreadSignalState st = thread_signal_state(waited[i], signo);
        if (!st.pending || st.blocked || monotonic_ns() > give_up) break;
        sched_yield();
      }
    }
    // Once per process and kind (a forked child says it again: it is another program's run).
    static std::atomic<pid_t> told_moved{0}, told_stopped{0};
    if (moved != 0 && (target != 0 ? told_moved : told_stopped).exchange(self) != self) {
      char line[256];
      const int n =
          target != 0
              ? std::snprintf(line, sizeof line, "selfperf: the program set its own action for signal %d, which "
                              "carried samples: they moved to another free real-time signal (%d for now)\n",
                              signo, target)
              : std::snprintf(line, sizeof line, "selfperf: the program set its own action for signal %d, which "
                              "carried samples, and no other signal is free (real-time, SIGURG, SIGWINCH): "
                              "sampling stopped\n",
                              signo);
      if (n > 0) {
        const ssize_t written = ::write(2, line, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1));
        static_cast<void>(written);  // nowhere to say that stderr failed
      }
    }
  } catch (...) {  // the program's own sigaction must go on whatever happens here
  }
}

}  // namespace selfperf::detail

// For the preload library's sigaction/signal/sigset (sdk/preload/signal_hook.cpp): before the program changes
// the action of a signal that carries samples, they move to another. Our own installations come through here
// too (the library's sigaction calls bind to the wrapper): they move nothing.
extern "C" void selfperf_program_sets_signal(int signo, const struct sigaction* action) noexcept {
  using namespace selfperf::detail;
  const bool ours = action != nullptr && (action->sa_flags & SA_SIGINFO) &&
                    (action->sa_sigaction == on_sample_signal || action->sa_sigaction == on_sigio);
  if (!ours) give_signal_to_program(signo);
}
