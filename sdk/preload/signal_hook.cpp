// sigaction, signal and sigset, defined in the preload library so that a program that sets its own action for
// the signal carrying the profiler's samples takes it without a word from us: the samples move to another free
// real-time signal first (selfperf_program_sets_signal, sdk/src/sampling/sampler_signal.cpp). Without this, a
// program that resets every signal to SIG_DFL (daemons, process spawners, `env --default-signal`) was killed
// by the next sample (a real-time signal's default action terminates), and one that ignored or handled it got
// an empty profile, its own handler fed our signals. glibc's signal() and sigset() call its internal
// __sigaction, not the interposable sigaction, so each is wrapped. A program that makes the rt_sigaction
// system call itself (Go's runtime) is not seen here: the sampler's health check reports it instead.
#include <dlfcn.h>
#include <signal.h>

#include <atomic>

extern "C" void selfperf_program_sets_signal(int signo, const struct sigaction* action) noexcept;

namespace {

// The next definitions, looked up once. A program may call sigaction in a signal handler (it is async-signal-
// safe), so no function-local static (its guard may block): a plain atomic, written by whoever looks first.
template <class Fn>
Fn next(std::atomic<Fn>& cached, const char* name) {
  Fn fn = cached.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    cached.store(fn, std::memory_order_release);
  }
  return fn;
}

using Sigaction = int (*)(int, const struct sigaction*, struct sigaction*);
using Signal = sighandler_t (*)(int, sighandler_t);
std::atomic<Sigaction> g_sigaction{nullptr};
std::atomic<Signal> g_signal{nullptr};
std::atomic<Signal> g_sigset{nullptr};

// Looked up at load, before the program runs, where nothing can interrupt dlsym.
[[gnu::constructor]] void look_up_next() {
  next(g_sigaction, "sigaction");
  next(g_signal, "signal");
  next(g_sigset, "sigset");
}

// What signal() and sigset() install, as sigaction sees it: a handler is never ours.
bool sets_action(sighandler_t handler) { return handler != SIG_ERR && handler != SIG_HOLD; }

}  // namespace

extern "C" {

int sigaction(int signo, const struct sigaction* action, struct sigaction* old) {
  if (action != nullptr) selfperf_program_sets_signal(signo, action);
  return next(g_sigaction, "sigaction")(signo, action, old);
}

sighandler_t signal(int signo, sighandler_t handler) {
  if (sets_action(handler)) selfperf_program_sets_signal(signo, nullptr);
  return next(g_signal, "signal")(signo, handler);
}

sighandler_t sigset(int signo, sighandler_t handler) {
  if (sets_action(handler)) selfperf_program_sets_signal(signo, nullptr);
  return next(g_sigset, "sigset")(signo, handler);
}

}  // extern "C"
