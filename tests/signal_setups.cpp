// A program that does to signals what real programs do, for check_profile_signal_setups.sh to profile:
//   signal_setups MODE THREADS MILLIONS
// THREADS workers each run MILLIONS million steps of fixed work; MODE is what the program does first:
//   plain    nothing
//   default  every signal but SIGKILL/SIGSTOP reset to SIG_DFL with signal() (daemons, process spawners)
//   handle   its own SA_SIGINFO handler on every real-time signal (counting those the kernel raised)
//   ignore   SIG_IGN on every real-time signal
//   block    every signal blocked in every thread; one thread takes the process's with sigtimedwait
//   sigprof  an ITIMER_PROF timer every ms with a SIGPROF handler, as gperftools and Go's runtime use it
// Prints one line: mode, CPU ms (user + system, all threads), wall ms, the kernel-raised signals its own
// handler got, SIGPROFs, and the most signals the user had queued (SigQ) seen every 5 ms meanwhile.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

std::atomic<unsigned long> g_kernel_raised{0};
std::atomic<unsigned long> g_sigprof{0};
std::atomic<bool> g_done{false};
std::atomic<unsigned long> g_sigq_max{0};
unsigned long g_steps = 0;
volatile unsigned long g_sink;

void own_handler(int, siginfo_t* info, void*) {
  if (info->si_code > 0) g_kernel_raised.fetch_add(1, std::memory_order_relaxed);
}
void on_sigprof(int) { g_sigprof.fetch_add(1, std::memory_order_relaxed); }

void* work(void*) {
  unsigned long x = 1;
  for (unsigned long i = 0; i < g_steps; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  g_sink = x;
  return nullptr;
}

double ms(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// The first field of SigQ: signals queued for this process's real user, all its processes.
unsigned long sigq() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long queued = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "SigQ:", 5) == 0) queued = std::strtoul(line + 5, nullptr, 10);
  std::fclose(f);
  return queued;
}

// Watches SigQ; in block mode it is also the thread that takes the process's signals.
void* watch(void* block) {
  sigset_t all;
  sigfillset(&all);
  while (!g_done.load()) {
    const unsigned long q = sigq();
    if (q > g_sigq_max.load()) g_sigq_max.store(q);
    if (block) {
      const timespec wait{0, 5'000'000};
      sigtimedwait(&all, nullptr, &wait);
    } else {
      const timespec wait{0, 5'000'000};
      nanosleep(&wait, nullptr);
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s plain|default|handle|ignore|block|sigprof THREADS MILLIONS\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const int threads = std::atoi(argv[2]);
  g_steps = std::strtoul(argv[3], nullptr, 10) * 1'000'000ul;
  if (mode == "default") {
    for (int s = 1; s < NSIG; ++s)
      if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
  } else if (mode == "handle") {
    struct sigaction sa {};
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigaction(s, &sa, nullptr);
  } else if (mode == "ignore") {
    for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) signal(s, SIG_IGN);
  } else if (mode == "block") {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);  // every thread created from here on inherits it
  } else if (mode == "sigprof") {
    signal(SIGPROF, on_sigprof);
    const itimerval every_ms{{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &every_ms, nullptr);
  } else if (mode != "plain") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  const double wall0 = ms(CLOCK_MONOTONIC);
  pthread_t watcher;
  pthread_create(&watcher, nullptr, watch, mode == "block" ? &g_done : nullptr);
  std::vector<pthread_t> workers(static_cast<std::size_t>(threads));
  for (auto& t : workers) pthread_create(&t, nullptr, work, nullptr);
  for (auto& t : workers) pthread_join(t, nullptr);
  g_done = true;
  pthread_join(watcher, nullptr);
  if (mode == "sigprof") {
    const itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
  std::printf("mode %s cpu_ms %.0f wall_ms %.0f kernel_raised_to_own_handler %lu sigprof %lu sigq_max %lu\n",
              mode.c_str(), cpu, ms(CLOCK_MONOTONIC) - wall0, g_kernel_raised.load(), g_sigprof.load(),
              g_sigq_max.load());
  return 0;
}
