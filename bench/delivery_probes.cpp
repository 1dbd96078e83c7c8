#include "delivery_probes.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "delivery_designs.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/event.hpp"
#include "workload.hpp"

// gdb's breakpoint in the --gdb-target program: a global symbol, so that `break` finds it by name.
extern "C" [[gnu::noinline]] void selfperf_bench_gdb_marker() { asm volatile("" ::: "memory"); }

namespace selfperf_bench {
namespace {

constexpr int kTrapPerf = 6;  // si_code of a sigtrap event's SIGTRAP (asm-generic/siginfo.h; glibc 2.36 lacks it)
std::atomic<std::uint64_t> g_sink{0};

void burn_ms(double ms) {
  const double end = thread_cpu_seconds() + ms / 1000;
  while (thread_cpu_seconds() < end) g_sink += burn(20'000);
}

pid_t tid() { return selfperf::detail::current_tid(); }

// ---------- running a probe apart ----------

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  return text;
}

// SIGTRAP, SIG38: sigabbrev_np has no names for the real-time signals.
std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? std::string("SIG") + name : "SIG" + std::to_string(sig);
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return "killed by " + signal_name(WTERMSIG(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "";
}

// fn in a child process: what it returned, or how the child died.
std::string in_child(const std::function<std::string()>& fn) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(p[0]);
    alarm(60);  // a probe that hangs ends as "killed by ALRM"
    std::string out;
    try {
      out = fn();
    } catch (const std::exception& e) {
      out = std::string("error: ") + e.what();
    }
    write_all(p[1], out);
    _exit(0);
  }
  ::close(p[1]);
  std::string text = read_all(p[0]);
  ::close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string end = how_it_ended(status);
  return end.empty() ? text : text + (text.empty() ? "" : " ") + "[" + end + "]";
}

std::string fmt(const char* format, auto... args) {
  char text[256];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

// ---------- the kernel's rules ----------

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  return name ? name : std::to_string(err);
}

perf_event_attr sigtrap_attr() {
  perf_event_attr attr = selfperf::to_attr(selfperf::parse_event(kDeliveryEvent));
  if (!selfperf::detail::kernel_counting_allowed()) attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  attr.sample_period = 1'000'000;
  attr.sig_data = 1;
  return attr;
}

std::string try_open(perf_event_attr attr, pid_t pid, std::size_t map_pages = 0) {
  const int fd = selfperf::detail::perf_event_open(attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return "refused, " + errno_name(errno);
  std::string result = "opens";
  if (map_pages) {
    const std::size_t bytes = map_pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      result += "; mmap of a ring refused, " + errno_name(errno);
    } else {
      result += "; mmap of a ring works";
      munmap(p, bytes);
    }
  }
  ::close(fd);
  return result;
}

void kernel_rules() {
  std::printf("\nKernel rules for the sigtrap attributes (perf_event_open on this kernel, this user)\n\n"
              "| attributes | result |\n|---|---|\n");
  struct Rule {
    const char* what;
    std::function<void(perf_event_attr&)> set;
    bool other_process = false;
    std::size_t map_pages = 0;
  };
  const std::vector<Rule> rules = {
      {"sigtrap", [](perf_event_attr& a) { a.sigtrap = 1; }},
      {"sigtrap + remove_on_exec", [](perf_event_attr& a) { a.sigtrap = a.remove_on_exec = 1; }},
      {"inherit_thread without inherit", [](perf_event_attr& a) { a.inherit_thread = 1; }},
      {"sigtrap + remove_on_exec + inherit (fork children too)",
       [](perf_event_attr& a) { a.sigtrap = a.remove_on_exec = a.inherit = 1; }},
      {"sigtrap + remove_on_exec + inherit + inherit_thread (the design)",
       [](perf_event_attr& a) { a.sigtrap = a.remove_on_exec = a.inherit = a.inherit_thread = 1; }},
      {"the design, its fd mapped for a ring (1 + 2 pages)",
       [](perf_event_attr& a) { a.sigtrap = a.remove_on_exec = a.inherit = a.inherit_thread = 1; }, false, 3},
      {"sigtrap + remove_on_exec on another process of this user",
       [](perf_event_attr& a) { a.sigtrap = a.remove_on_exec = 1; }, true},
      {"remove_on_exec + enable_on_exec", [](perf_event_attr& a) { a.remove_on_exec = a.enable_on_exec = 1; }},
  };
  for (const Rule& rule : rules) {
    const std::string result = in_child([&] {
      perf_event_attr attr = sigtrap_attr();
      rule.set(attr);
      if (!rule.other_process) return try_open(attr, 0, rule.map_pages);
      const pid_t other = fork();
      if (other == 0) {
        pause();
        _exit(0);
      }
      std::string r = try_open(attr, other);
      kill(other, SIGKILL);
      waitpid(other, nullptr, 0);
      return r;
    });
    std::printf("| %s | %s |\n", rule.what, result.c_str());
  }
}

// ---------- threads ----------

std::string threads_started_later(Design d, bool hook) {
  RunningDesign r({.design = d, .attach_new_threads = hook});
  std::vector<pid_t> tids(4);
  std::vector<std::thread> pool;
  for (auto& t : tids)
    pool.emplace_back([&t] {
      t = tid();
      burn_ms(30);
    });
  for (auto& t : pool) t.join();
  const RunningDesign::Result res = r.stop();
  int sampled = 0;
  for (pid_t t : tids) sampled += res.samples.count(t) && res.samples.at(t) > 0;
  return fmt("%d of 4", sampled);
}

std::string thread_started_before(Design d) {
  std::atomic<bool> go{false};
  std::optional<RunningDesign> r;
  pid_t early = 0;
  std::thread t([&] {
    early = tid();
    while (!go.load()) std::this_thread::yield();
    r->attach();
    burn_ms(30);
    r->detach();
  });
  r.emplace(RunningDesign::Options{.design = d});
  go = true;
  t.join();
  const RunningDesign::Result res = r->stop();
  return fmt("%llu samples", static_cast<unsigned long long>(res.samples.count(early) ? res.samples.at(early) : 0));
}

// /proc/self/fd entries that are perf events.
int perf_fds() {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    n += std::filesystem::read_symlink(e.path(), ec).string().find("perf_event") != std::string::npos;
  }
  return n;
}

// The process's perf event descriptors while `threads` attached threads live besides the main one.
int perf_fds_with_threads(Design d, int threads) {
  RunningDesign r({.design = d});
  std::latch ready(threads), finish(1);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      r.attach();
      ready.count_down();
      finish.wait();
      r.detach();
    });
  ready.wait();
  const int n = perf_fds();
  finish.count_down();
  for (auto& t : pool) t.join();
  return n;
}

// ---------- memory per thread ----------

struct Footprint {
  double rss_kib = 0;
  double perf_map_kib = 0;  // mappings of perf event fds (rings)
  double fds = 0;
  // Not the kernel's perf_event objects (one per sampled thread in both designs: Sampler opens one, inherit
  // copies one at clone): /proc/slabinfo's active count moved by 36-48 for 64 events opened here.
};

double status_kib(const char* field) {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind(field, 0) == 0) return std::strtod(line.c_str() + std::strlen(field), nullptr);
  return -1;
}

double perf_mapping_kib() {
  std::ifstream f("/proc/self/maps");
  double kib = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.find("perf_event") == std::string::npos) continue;
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) kib += static_cast<double>(hi - lo) / 1024;
  }
  return kib;
}

Footprint footprint() {
  return {status_kib("VmRSS:"), perf_mapping_kib(), static_cast<double>(perf_fds())};
}

// `threads` threads that each attach, burn 5 ms (a few samples, touching their buffers) and wait; the
// footprint while all of them live.
std::string footprint_with_threads(Design d, int threads) {
  std::optional<RunningDesign> r;
  if (d != Design::plain)
    r.emplace(RunningDesign::Options{.design = d, .max_threads = static_cast<std::size_t>(threads) + 2});
  std::latch ready(threads), finish(1);
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  const Footprint before = footprint();
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&] {
      try {
        if (r) r->attach();
      } catch (const std::exception&) {
        failed.fetch_add(1);
      }
      burn_ms(5);
      ready.count_down();
      finish.wait();
      if (r) r->detach();
    });
  ready.wait();
  const Footprint during = footprint();
  finish.count_down();
  for (auto& t : pool) t.join();
  if (r) r->stop();
  return fmt("%.3f %.3f %.3f %d", during.rss_kib - before.rss_kib, during.perf_map_kib - before.perf_map_kib,
             during.fds - before.fds, failed.load());
}

// ---------- fork and exec ----------

std::atomic<std::uint64_t> g_child_signals{0};
void count_signal(int, siginfo_t*, void*) { g_child_signals.fetch_add(1); }

// Signals of the design that reach a fork() child burning 100 ms on its main thread and 50 ms on a new one.
std::string fork_child_signals(Design d, bool inherit_thread) {
  RunningDesign r({.design = d, .inherit_thread = inherit_thread});
  const int signo = r.signal();
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    struct sigaction sa {};
    sa.sa_sigaction = count_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(signo, &sa, nullptr);
    burn_ms(100);
    std::thread t([] { burn_ms(50); });
    t.join();
    write_all(p[1], std::to_string(g_child_signals.load()));
    _exit(0);
  }
  ::close(p[1]);
  burn_ms(50);
  std::string got = read_all(p[0]);
  ::close(p[0]);
  int status = 0;
  waitpid(child, &status, 0);
  const RunningDesign::Result res = r.stop();
  const std::string end = how_it_ended(status);
  return got + " signals in 150 ms" + (end.empty() ? "" : " [" + end + "]") +
         fmt(" (parent: %llu samples)", static_cast<unsigned long long>(res.total));
}

// A process that samples at 10 kHz and execs a program that burns 50 ms, `trials` times: how many of the new
// programs were killed by a signal left over from the sampling.
std::string execs_killed(const std::string& self, Design d, bool stop_first, int trials) {
  int killed = 0;
  std::string how;
  for (int i = 0; i < trials; ++i) {
    const pid_t child = fork();
    if (child == 0) {
      {
        RunningDesign r({.design = d, .hz = 10000});
        burn_ms(20);
        if (stop_first) r.stop();
        execl(self.c_str(), self.c_str(), "--burn-ms", "50", static_cast<char*>(nullptr));
      }
      _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      ++killed;
      how = how_it_ended(status);
    }
  }
  return fmt("%d of %d", killed, trials) + (how.empty() ? "" : " (" + how + ")");
}

// ---------- a blocked signal, a program's own SIGTRAP handler ----------

std::string blocked_then_unblocked(Design d) {
  RunningDesign r({.design = d});
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, r.signal());
  pthread_sigmask(SIG_BLOCK, &set, &old);
  burn_ms(100);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  burn_ms(20);
  const RunningDesign::Result res = r.stop();
  return fmt("%llu samples, %llu handler runs, %llu late, %llu lost", static_cast<unsigned long long>(res.total),
             static_cast<unsigned long long>(res.signals), static_cast<unsigned long long>(res.late),
             static_cast<unsigned long long>(res.lost));
}

std::atomic<int> g_app_breakpoints{0}, g_app_perf{0};
void app_sigtrap(int, siginfo_t* info, void*) {
  if (info->si_code == kTrapPerf) {
    g_app_perf.fetch_add(1);
  } else {
    g_app_breakpoints.fetch_add(1);
  }
}
void install_app_sigtrap() {
  struct sigaction sa {};
  sa.sa_sigaction = app_sigtrap;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTRAP, &sa, nullptr);
}

// A program that uses SIGTRAP itself (int3 as its own breakpoint, as JITs and debug-break helpers do), its
// handler installed before the sampler starts or after.
std::string app_sigtrap_handler(Design d, bool before) {
  if (before) install_app_sigtrap();
  RunningDesign r({.design = d});
  if (!before) install_app_sigtrap();
  for (int i = 0; i < 50; ++i) {
    burn_ms(2);
    asm volatile("int3");
  }
  const RunningDesign::Result res = r.stop();
  return fmt("app: %d of 50 int3, %d TRAP_PERF; %llu samples", g_app_breakpoints.load(), g_app_perf.load(),
             static_cast<unsigned long long>(res.total));
}

// ---------- debuggers ----------

// Under a tracer that passes every signal on (gdb's `handle SIG nostop noprint pass`): how many times the
// tracee stopped for the tracer while sampling 100 ms at 1 kHz.
std::string stops_under_tracer(Design d) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    ::close(p[0]);
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    raise(SIGSTOP);
    RunningDesign r({.design = d});
    burn_ms(100);
    write_all(p[1], std::to_string(r.stop().total));
    _exit(0);
  }
  ::close(p[1]);
  std::map<int, int> stops;
  int status = 0;
  bool first = true;
  while (waitpid(child, &status, 0) == child && WIFSTOPPED(status)) {
    const int sig = WSTOPSIG(status);
    if (first && sig == SIGSTOP) {
      first = false;
      ptrace(PTRACE_CONT, child, nullptr, nullptr);
      continue;
    }
    ++stops[sig];
    ptrace(PTRACE_CONT, child, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
  }
  const std::string samples = read_all(p[0]);
  ::close(p[0]);
  std::string text;
  for (const auto& [sig, n] : stops) text += std::to_string(n) + " " + signal_name(sig) + " ";
  return (text.empty() ? "no stops " : text) + "stops; tracee: " + samples + " samples" +
         (how_it_ended(status).empty() ? "" : " [" + how_it_ended(status) + "]");
}

// gdb on a program that samples at 1 kHz and passes a breakpoint (selfperf_bench_gdb_marker) 3 times: with
// gdb's defaults, or told to pass the design's signal silently. What gdb reports, the breakpoints it
// stopped at, and whether the program finished (its sample count).
std::string under_gdb(const std::string& self, Design d, bool pass) {
  if (access("/usr/bin/gdb", X_OK) != 0) return "gdb not installed";
  const std::string script = "/tmp/selfperf_bench_gdb_" + std::to_string(getpid());
  {
    std::ofstream f(script);
    f << "set pagination off\nset confirm off\n";
    if (pass) f << "handle " << (d == Design::sigtrap ? std::string("SIGTRAP") : "SIG" + std::to_string(SIGRTMIN + 4))
                << " nostop noprint pass\n";
    f << "break selfperf_bench_gdb_marker\ncommands\nsilent\nprintf \"MARKER\\n\"\ncontinue\nend\nrun\n";
  }
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  const pid_t child = fork();
  if (child == 0) {
    ::close(p[0]);
    dup2(p[1], 1);
    dup2(p[1], 2);
    execl("/usr/bin/gdb", "gdb", "-q", "-nx", "-batch", "-x", script.c_str(), "--args", self.c_str(),
          "--gdb-target", design_name(d), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(p[1]);
  const std::string out = read_all(p[0]);
  ::close(p[0]);
  waitpid(child, nullptr, 0);
  std::remove(script.c_str());
  int markers = 0;
  std::string received, samples = "did not finish";
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line == "MARKER") ++markers;
    const bool ended = line.find("received signal") != std::string::npos ||
                       line.find("terminated with") != std::string::npos;
    if (ended && received.empty()) received = line;
    if (line.rfind("TARGET samples=", 0) == 0) samples = line.substr(15) + " samples";
  }
  std::string text = fmt("breakpoint %d of 3; %s", markers, samples.c_str());
  if (!received.empty()) text += "; gdb: \"" + received + "\"";
  return text;
}

int gdb_target(const char* design) {
  const Design d = std::strcmp(design, "sigtrap") == 0 ? Design::sigtrap : Design::ours_ring;
  RunningDesign r({.design = d, .signal = d == Design::sigtrap ? 0 : SIGRTMIN + 4});
  for (int i = 0; i < 3; ++i) {
    burn_ms(30);
    selfperf_bench_gdb_marker();
  }
  std::printf("TARGET samples=%llu\n", static_cast<unsigned long long>(r.stop().total));
  return 0;
}

// ---------- the tables ----------

void row(const char* what, const std::string& ours, const std::string& sigtrap) {
  std::printf("| %s | %s | %s |\n", what, ours.c_str(), sigtrap.c_str());
}

std::string per_thread(const std::string& plain, const std::string& design, int threads) {
  double p[4] = {}, q[4] = {};
  if (std::sscanf(plain.c_str(), "%lf %lf %lf %lf", &p[0], &p[1], &p[2], &p[3]) != 4 ||
      std::sscanf(design.c_str(), "%lf %lf %lf %lf", &q[0], &q[1], &q[2], &q[3]) != 4)
    return design;
  std::string text = fmt("RSS %+.1f KiB, rings %.0f KiB, %.2f fds", (q[0] - p[0]) / threads, q[1] / threads,
                         q[2] / threads);
  if (q[3] > 0) text += fmt("; %.0f threads not attached", q[3]);
  return text;
}

}  // namespace

void run_delivery_probes(const std::string& self) {
  std::printf("Delivery probes (%s, uid %d); ours = selfperf::Sampler (ring), sigtrap = SigtrapSampler\n",
              kDeliveryEvent, static_cast<int>(getuid()));
  kernel_rules();
  std::printf("\n| probe | ours | sigtrap |\n|---|---|---|\n");
  row("4 threads started after start(), none attaching itself: threads sampled",
      in_child([] { return threads_started_later(Design::ours_ring, false); }) + "; " +
          in_child([] { return threads_started_later(Design::ours_ring, true); }) +
          " with attach_new_threads (pthread_create hook)",
      in_child([] { return threads_started_later(Design::sigtrap, false); }) + " (set up in their first handler run)");
  row("a thread started before the sampler, attaching itself, 30 ms",
      in_child([] { return thread_started_before(Design::ours_ring); }),
      in_child([] { return thread_started_before(Design::sigtrap); }));
  row("perf event descriptors, main + 8 threads attached",
      in_child([] { return std::to_string(perf_fds_with_threads(Design::ours_ring, 8)); }),
      in_child([] { return std::to_string(perf_fds_with_threads(Design::sigtrap, 8)); }));
  for (int threads : {64, 256}) {
    const std::string plain = in_child([=] { return footprint_with_threads(Design::plain, threads); });
    row(fmt("per thread, %d threads alive (each took ~5 samples), over unprofiled", threads).c_str(),
        per_thread(plain, in_child([=] { return footprint_with_threads(Design::ours_ring, threads); }), threads),
        per_thread(plain, in_child([=] { return footprint_with_threads(Design::sigtrap, threads); }), threads));
  }
  row("fork() child: the design's signals reaching it",
      in_child([] { return fork_child_signals(Design::ours_ring, true); }),
      in_child([] { return fork_child_signals(Design::sigtrap, true); }) + "; inherit without inherit_thread: " +
          in_child([] { return fork_child_signals(Design::sigtrap, false); }));
  row("exec while sampling at 10 kHz, no stop() first: new programs killed",
      in_child([&] { return execs_killed(self, Design::ours_ring, false, 20); }) + "; with stop() first: " +
          in_child([&] { return execs_killed(self, Design::ours_ring, true, 20); }),
      in_child([&] { return execs_killed(self, Design::sigtrap, false, 20); }) + "; with stop() first: " +
          in_child([&] { return execs_killed(self, Design::sigtrap, true, 20); }));
  row("a thread blocks the signal 100 ms, then runs 20 ms unblocked (1 kHz)",
      in_child([] { return blocked_then_unblocked(Design::ours_ring); }),
      in_child([] { return blocked_then_unblocked(Design::sigtrap); }));
  row("the program's own SIGTRAP handler, installed before start; 50 int3 over 100 ms",
      in_child([] { return app_sigtrap_handler(Design::ours_ring, true); }),
      in_child([] { return app_sigtrap_handler(Design::sigtrap, true); }));
  row("the program's own SIGTRAP handler, installed after start; 50 int3 over 100 ms",
      in_child([] { return app_sigtrap_handler(Design::ours_ring, false); }),
      in_child([] { return app_sigtrap_handler(Design::sigtrap, false); }));
  row("under a tracer that passes every signal on, 100 ms at 1 kHz",
      in_child([] { return stops_under_tracer(Design::ours_ring); }),
      in_child([] { return stops_under_tracer(Design::sigtrap); }));
  row("under gdb, its defaults", in_child([&] { return under_gdb(self, Design::ours_ring, false); }),
      in_child([&] { return under_gdb(self, Design::sigtrap, false); }));
  row("under gdb, `handle <signal> nostop noprint pass`",
      in_child([&] { return under_gdb(self, Design::ours_ring, true); }),
      in_child([&] { return under_gdb(self, Design::sigtrap, true); }));
  std::fflush(stdout);
}

bool delivery_probe_child(int argc, char** argv, int& rc) {
  if (argc == 3 && std::strcmp(argv[1], "--burn-ms") == 0) {
    burn_ms(std::strtod(argv[2], nullptr));
    rc = 0;
    return true;
  }
  if (argc == 3 && std::strcmp(argv[1], "--gdb-target") == 0) {
    rc = gdb_target(argv[2]);
    return true;
  }
  return false;
}

}  // namespace selfperf_bench
