// Sampler costs, as ratios measured side by side in one run:
//  * per-sample handler cost: the sampler's real handler, driven by a kernel-style signal (si_code POLL_IN,
//    si_fd = the thread's event) queued to this thread, at stack depth ~13 and ~130, for each unwinder and
//    re-arming mode; beside it the floor of the design: an empty handler and an empty handler + frame walk;
//  * whole-process overhead of a CPU-bound workload sampled at 1 kHz and 10 kHz (process CPU time, profiled
//    over unprofiled, interleaved chunk by chunk), beside `perf record -F … -g` and gperftools' profiler
//    (samples delivered per CPU second too) on the same workload in a child;
//    overhead_vs_perf/* measures both in every iteration and reports the paired difference in points.
//
//   bench_sampler [--benchmark_filter=…]        (ratios are printed after the table)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <ucontext.h>

#include "selfperf/sampler.hpp"
#include "selfperf/tsc_clock.hpp"
#include "selfperf/unwind.hpp"
#include "external_profilers.hpp"
#include "workload.hpp"

using selfperf::Sampler;
using selfperf::Unwinder;

namespace {

using selfperf_bench::at_depth;
using selfperf_bench::gperftools_samples;
using selfperf_bench::kGperftools;
using selfperf_bench::median;
using selfperf_bench::process_cpu_seconds;
using selfperf_bench::read_seconds;
using selfperf_bench::run_child;
using selfperf_bench::workload;

// ---------- stacks of a chosen depth ----------

// The same depth made of distinct functions (one instantiation per level): every frame has its own return
// address, as in a deep call chain that is not recursion.
template <int N, typename Fn>
[[gnu::noinline]] void distinct_chain(Fn& fn) {
  if constexpr (N <= 1) {
    fn();
  } else {
    distinct_chain<N - 1>(fn);
  }
  asm volatile("" ::: "memory");
}

// The same recursion without frame pointers (rsp-based CFA rules): what DWARF unwinding is for.
template <typename Fn>
[[gnu::noinline, gnu::optimize("omit-frame-pointer")]] void at_depth_no_frame_pointer(int depth, Fn& fn) {
  if (depth <= 1) {
    fn();
  } else {
    at_depth_no_frame_pointer(depth - 1, fn);
  }
  asm volatile("" ::: "memory");
}

// Distinct functions without frame pointers, their frames of six sizes: code built the way Debian builds its
// libraries, where each caller has its own rule (CFA = rsp + its frame size) and the DWARF walk's guess that a
// caller shares the previous frame's rule mostly fails.
template <int N, typename Fn>
[[gnu::noinline, gnu::optimize("omit-frame-pointer")]] void distinct_chain_no_frame_pointer(Fn& fn) {
  char pad[8 + 16 * (N % 6)];
  asm volatile("" : : "r"(pad) : "memory");  // the frame keeps its size
  if constexpr (N <= 1) {
    fn();
  } else {
    distinct_chain_no_frame_pointer<N - 1>(fn);
  }
  asm volatile("" ::: "memory");
}

// Recursion whose frames differ in size at random (0-5 extra 16-byte blocks each): a deep stack of mixed
// functions, where the frame-pointer walk's prediction of equal frames mostly fails.
template <typename Fn>
[[gnu::noinline]] void at_depth_mixed_frames(int depth, Fn& fn, unsigned seed) {
  seed = seed * 1103515245u + 12345u;
  auto* block = static_cast<volatile char*>(alloca(16 * ((seed >> 16) % 6) + 1));
  block[0] = 0;
  if (depth <= 1) {
    fn();
  } else {
    at_depth_mixed_frames(depth - 1, fn, seed);
  }
  asm volatile("" ::: "memory");
}

// The frame-pointer rule applied one frame at a time, each load waiting for the last: the baseline that
// unwind_frame_pointer's prediction of equal frames is measured against.
[[gnu::noinline]] std::size_t walk_one_frame_at_a_time(const selfperf::RegisterState& regs,
                                                       const selfperf::StackBounds& stack,
                                                       std::span<std::uint64_t> out) {
  std::size_t n = 0;
  std::uintptr_t fp = regs.fp, floor = regs.sp;
  while (n < out.size() && fp >= floor && fp <= stack.high - 16 && (fp & 7u) == 0) {
    auto next = *reinterpret_cast<const std::uint64_t*>(fp);
    auto ret = *reinterpret_cast<const std::uint64_t*>(fp + 8);
    if (ret == 0) break;
    out[n++] = ret;
    floor = fp + 16;
    fp = next;
  }
  return n;
}

double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return 1e9 * static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec);
}

// ---------- the floor: a bare handler, and one that walks frame pointers ----------

enum class FloorMode { empty, frame_walk };
FloorMode g_floor_mode = FloorMode::empty;
selfperf::StackBounds g_floor_stack;
const selfperf::CodeMap* g_floor_code = nullptr;
std::array<std::uint64_t, 256> g_floor_frames;
volatile std::size_t g_floor_depth = 0;

void floor_handler(int, siginfo_t*, void* context) {
  if (g_floor_mode == FloorMode::frame_walk) {
    const auto& uc = *static_cast<const ucontext_t*>(context);
    g_floor_depth = selfperf::unwind_frame_pointer(selfperf::RegisterState::from(uc), g_floor_stack, g_floor_frames);
  }
}

int g_floor_signal = 0;

void BM_floor(benchmark::State& state, FloorMode mode) {
  int depth = static_cast<int>(state.range(0));
  g_floor_mode = mode;
  g_floor_stack = selfperf::StackBounds::of_this_thread();
  const pid_t pid = getpid();
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  // Delivered as BM_handler delivers the sampler's signals (rt_tgsigqueueinfo, a kernel-style siginfo), so the
  // two differ by the handlers alone.
  siginfo_t info{};
  info.si_signo = g_floor_signal;
  info.si_code = POLL_IN;
  auto body = [&] {
    for (auto _ : state) syscall(SYS_rt_tgsigqueueinfo, pid, tid, g_floor_signal, &info);
  };
  g_floor_depth = 0;
  at_depth(depth, body);
  state.counters["frames"] = static_cast<double>(g_floor_depth);
}

// The walk alone, timed inside a real signal handler (after the kernel has built the signal frame), apart
// from the cost of delivery, which on a shared machine varies more than the walk costs.
struct TimedWalk {
  std::vector<std::uint64_t> ticks;  // sized up front: the handler only stores
  std::size_t count = 0;
  std::size_t frames = 0;
};
TimedWalk* g_timed = nullptr;
bool g_timed_dwarf = false;

void timed_walk_handler(int, siginfo_t*, void* context) {
  TimedWalk& t = *g_timed;
  const auto regs = selfperf::RegisterState::from(*static_cast<const ucontext_t*>(context));
  const std::uint64_t t0 = selfperf::TscClock::now_tsc();
  t.frames = g_timed_dwarf ? selfperf::unwind_dwarf(regs, g_floor_stack, g_floor_frames, g_floor_code).frames
                           : selfperf::unwind_frame_pointer(regs, g_floor_stack, g_floor_frames, g_floor_code);
  const std::uint64_t ticks = selfperf::TscClock::now_tsc() - t0;
  if (t.count < t.ticks.size()) t.ticks[t.count++] = ticks;
}

void BM_walk_in_handler(benchmark::State& state, bool dwarf) {
  int depth = static_cast<int>(state.range(0));
  g_timed_dwarf = dwarf;
  TimedWalk timed;
  timed.ticks.resize(1 << 21);
  g_timed = &timed;
  g_floor_stack = selfperf::StackBounds::of_this_thread();
  g_floor_code = selfperf::CodeMap::refresh();
  struct sigaction sa {}, old{};
  sa.sa_sigaction = timed_walk_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(g_floor_signal, &sa, &old);
  const pid_t pid = getpid();
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  const double ns0 = now_ns();
  const std::uint64_t tsc0 = selfperf::TscClock::now_tsc();
  auto body = [&] {
    for (auto _ : state) syscall(SYS_tgkill, pid, tid, g_floor_signal);
  };
  at_depth(depth, body);
  const double ns_per_tick = (now_ns() - ns0) / static_cast<double>(selfperf::TscClock::now_tsc() - tsc0);
  sigaction(g_floor_signal, &old, nullptr);
  std::vector<double> ns(timed.ticks.begin(), timed.ticks.begin() + static_cast<std::ptrdiff_t>(timed.count));
  for (double& v : ns) v *= ns_per_tick;
  state.counters["frames"] = static_cast<double>(timed.frames);
  state.counters["walk_ns"] = median(std::move(ns));
}

// ---------- the unwinders alone, without signal delivery (less noise on a loaded machine) ----------

enum class Direct { frame_pointer, frame_pointer_one_at_a_time, dwarf, libunwind_fast, libunwind_cursor };

enum class Shape { recursion, distinct_functions, no_frame_pointer, distinct_no_frame_pointer, mixed_frames };

void BM_unwind(benchmark::State& state, Direct which, Shape shape) {
  int depth = static_cast<int>(state.range(0));
  selfperf::StackBounds stack = selfperf::StackBounds::of_this_thread();
  const selfperf::CodeMap* code = selfperf::CodeMap::refresh();
  selfperf::prepare_libunwind_this_thread();
  std::array<std::uint64_t, 256> frames;
  std::array<void*, 256> trace;
  std::size_t n = 0;
  auto body = [&] {
    ucontext_t uc;
    getcontext(&uc);
    for (auto _ : state) {
      switch (which) {
        case Direct::frame_pointer:
          n = selfperf::unwind_frame_pointer(selfperf::RegisterState::from(uc), stack, frames, code);
          break;
        case Direct::frame_pointer_one_at_a_time:  // + the leaf, as unwind_frame_pointer counts it
          n = 1 + walk_one_frame_at_a_time(selfperf::RegisterState::from(uc), stack, frames);
          break;
        case Direct::dwarf:  // what Unwinder::libunwind runs in the handler
          n = selfperf::unwind_dwarf(selfperf::RegisterState::from(uc), stack, frames, code).frames;
          break;
        case Direct::libunwind_fast:  // unw_backtrace: Unwinder::libunwind where the DWARF walk cannot go
          n = static_cast<std::size_t>(unw_backtrace(trace.data(), static_cast<int>(trace.size())));
          break;
        case Direct::libunwind_cursor:
          n = selfperf::unwind_libunwind_cursor(uc, frames);
          break;
      }
      benchmark::DoNotOptimize(n);
    }
  };
  switch (shape) {
    case Shape::recursion: at_depth(depth, body); break;
    case Shape::distinct_functions: distinct_chain<127>(body); break;  // ~130 frames with the harness's
    case Shape::no_frame_pointer: at_depth_no_frame_pointer(depth, body); break;
    case Shape::distinct_no_frame_pointer: distinct_chain_no_frame_pointer<127>(body); break;
    case Shape::mixed_frames: at_depth_mixed_frames(depth, body, 7); break;
  }
  state.counters["frames"] = static_cast<double>(n);
}

// ---------- the sampler's real handler ----------

// The newest perf event fd of this process (the one attach just opened).
int newest_perf_fd() {
  int best = -1;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec || target.string().find("perf_event") == std::string::npos) continue;
    best = std::max(best, std::stoi(e.path().filename().string()));
  }
  return best;
}

void BM_handler(benchmark::State& state, Unwinder unwinder, Sampler::Rearm rearm) {
  int depth = static_cast<int>(state.range(0));
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 1'000'000'000'000ull;  // never overflows by itself: only our synthetic signals
  options.unwinder = unwinder;
  options.rearm = rearm;
  options.max_depth = 256;
  options.buffer_capacity = 1 << 14;
  Sampler sampler(options);
  sampler.start();
  Sampler::ThreadAttachment attach(sampler);
  siginfo_t info{};
  info.si_signo = sampler.signal_number();
  info.si_code = POLL_IN;
  info.si_fd = newest_perf_fd();
  const pid_t pid = getpid();
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  std::size_t frames = 0, drained = 0, queued = 0;
  auto drain = [&] {
    drained += sampler.drain([&](const selfperf::Sample& s) { frames = s.frames.size(); });
  };
  auto body = [&] {
    for (auto _ : state) {
      syscall(SYS_rt_tgsigqueueinfo, pid, tid, info.si_signo, &info);
      if (++queued % 8192 == 0) {
        state.PauseTiming();
        drain();
        state.ResumeTiming();
      }
    }
  };
  at_depth(depth, body);
  drain();
  auto totals = sampler.stop();
  state.counters["frames"] = static_cast<double>(frames);
  state.counters["lost"] = static_cast<double>(totals.lost);
  // Ring-buffer mode stores a sample only for a kernel record; a synthetic signal has none, so that mode
  // measures the handler up to the ring read (its user unwinding cost equals overflow_signal's).
  state.counters["stored"] = static_cast<double>(totals.samples) / static_cast<double>(std::max<std::size_t>(queued, 1));
}

// The same handlers called directly, with a siginfo as the kernel fills it and this thread's context: the
// handler's own cost without delivery (~1.5 µs here, the same for every handler, and the noisiest part on a
// shared machine). The floor is floor_handler walking frame pointers, called the same way.
void BM_handler_called(benchmark::State& state, bool floor, Unwinder unwinder) {
  int depth = static_cast<int>(state.range(0));
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 1'000'000'000'000ull;
  options.unwinder = unwinder;
  options.rearm = Sampler::Rearm::overflow_signal;
  options.max_depth = 256;
  options.buffer_capacity = 1 << 14;
  Sampler sampler(options);
  sampler.start();
  Sampler::ThreadAttachment attach(sampler);
  struct sigaction installed {};
  sigaction(sampler.signal_number(), nullptr, &installed);
  siginfo_t info{};
  info.si_signo = sampler.signal_number();
  info.si_code = POLL_IN;
  info.si_fd = newest_perf_fd();
  g_floor_mode = FloorMode::frame_walk;
  g_floor_stack = selfperf::StackBounds::of_this_thread();
  void (*handler)(int, siginfo_t*, void*) = floor ? floor_handler : installed.sa_sigaction;
  std::size_t frames = 0, drained = 0, calls = 0;
  auto body = [&] {
    ucontext_t uc;
    getcontext(&uc);
    for (auto _ : state) {
      handler(info.si_signo, &info, &uc);
      if (++calls % 8192 == 0) {
        state.PauseTiming();
        drained += sampler.drain([&](const selfperf::Sample& s) { frames = s.frames.size(); });
        state.ResumeTiming();
      }
    }
  };
  at_depth(depth, body);
  drained += sampler.drain([&](const selfperf::Sample& s) { frames = s.frames.size(); });
  state.counters["frames"] = static_cast<double>(floor ? g_floor_depth : frames);
  state.counters["lost"] = static_cast<double>(sampler.stop().lost);
}

// ---------- whole-process overhead ----------

constexpr std::uint64_t kChunks = 150;  // ~50-100 ms of CPU per measurement
std::uint64_t g_sink = 0;

// Process CPU seconds of the workload without, then with, the sampler at hz on this thread.
struct OverheadPair {
  double plain = 0;
  double profiled = 0;
  std::uint64_t samples = 0;
};
OverheadPair sampled_pair(Unwinder unwinder, Sampler::Rearm rearm, std::uint64_t hz, std::uint64_t chunks) {
  OverheadPair out;
  double t0 = process_cpu_seconds();
  g_sink += workload(chunks);
  out.plain = process_cpu_seconds() - t0;
  Sampler::Options options;
  options.event = "cpu-clock";
  options.frequency = hz;
  options.unwinder = unwinder;
  options.rearm = rearm;
  options.buffer_capacity = 4096;
  Sampler sampler(options);
  sampler.start();
  {
    Sampler::ThreadAttachment attach(sampler);
    double t2 = process_cpu_seconds();
    g_sink += workload(chunks);
    out.profiled = process_cpu_seconds() - t2;
  }
  out.samples = sampler.stop().samples;
  sampler.drain([](const selfperf::Sample&) {});
  return out;
}

void BM_overhead(benchmark::State& state, Unwinder unwinder, Sampler::Rearm rearm) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  double plain = 0, profiled = 0;
  std::uint64_t samples = 0;
  for (auto _ : state) {
    const OverheadPair p = sampled_pair(unwinder, rearm, hz, kChunks);
    plain += p.plain;
    profiled += p.profiled;
    samples += p.samples;
    state.SetIterationTime(p.profiled);
  }
  state.counters["ratio"] = profiled / plain;
  state.counters["samples"] = static_cast<double>(samples) / static_cast<double>(state.iterations());
  state.counters["samples_per_cpu_s"] = static_cast<double>(samples) / profiled;  // hz when nothing is lost
}

// `perf record -F hz -g` on the same workload in a child process: the workload's own process CPU time (the
// child measures it around the workload and writes it to a file) with perf over without; perf's own process
// (start-up, build-id collection) is not counted, as the sampler's drain thread would not be either.
std::string g_self;

// Process CPU seconds of the workload in a child, without and then under `perf record -F hz -g`; {0, 0} when
// perf failed.
OverheadPair perf_record_pair(std::uint64_t hz, std::uint64_t chunks) {
  const std::string base = "/tmp/selfperf_bench_" + std::to_string(getpid());
  const std::string data = base + ".data", seconds = base + ".cpu";
  std::vector<std::string> child{g_self, "--workload-child", std::to_string(chunks), seconds};
  std::vector<std::string> perf{"perf", "record", "-q", "-F", std::to_string(hz), "-g", "-o", data, "--"};
  perf.insert(perf.end(), child.begin(), child.end());
  OverheadPair out;
  const double a = run_child(child) ? read_seconds(seconds) : -1;
  const double b = run_child(perf) ? read_seconds(seconds) : -1;
  std::remove(data.c_str());
  std::remove(seconds.c_str());
  if (a > 0 && b > 0) out.plain = a, out.profiled = b;
  return out;
}

void BM_perf_record(benchmark::State& state) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  double plain = 0, profiled = 0;
  for (auto _ : state) {
    const OverheadPair p = perf_record_pair(hz, kChunks);
    if (p.plain == 0) {
      state.SkipWithError("perf record failed (is /usr/bin/perf usable here?)");
      break;
    }
    plain += p.plain;
    profiled += p.profiled;
    state.SetIterationTime(p.profiled);
  }
  if (plain > 0) state.counters["ratio"] = profiled / plain;
}

// gperftools' CPU profiler (libprofiler, preloaded; CPUPROFILE_FREQUENCY=hz) on the same workload in a child:
// its ratio, and the samples its profile holds per CPU second (a process-wide ITIMER_PROF: one signal per
// tick for the whole process, which it was seen to deliver at a quarter of the rate asked).
void BM_gperftools(benchmark::State& state) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  if (access(kGperftools, R_OK) != 0) {
    state.SkipWithError("gperftools' libprofiler.so.0 is not installed (apt-get install libgoogle-perftools4)");
    return;
  }
  const std::string base = "/tmp/selfperf_bench_gperf_" + std::to_string(getpid());
  const std::string profile = base + ".prof", seconds = base + ".cpu";
  const std::vector<std::string> child{g_self, "--workload-child", std::to_string(kChunks), seconds};
  std::vector<std::string> under{"env", std::string("LD_PRELOAD=") + kGperftools, "CPUPROFILE=" + profile,
                                 "CPUPROFILE_FREQUENCY=" + std::to_string(hz)};
  under.insert(under.end(), child.begin(), child.end());
  double plain = 0, profiled = 0, samples = 0;
  for (auto _ : state) {
    const double a = run_child(child) ? read_seconds(seconds) : -1;
    const double b = run_child(under) ? read_seconds(seconds) : -1;
    const double n = gperftools_samples(profile);
    std::remove(profile.c_str());
    if (a <= 0 || b <= 0 || n < 0) {
      state.SkipWithError("the workload under gperftools failed or wrote no profile");
      break;
    }
    plain += a;
    profiled += b;
    samples += n;
    state.SetIterationTime(b);
  }
  std::remove(seconds.c_str());
  if (plain > 0) {
    state.counters["ratio"] = profiled / plain;
    state.counters["samples_per_cpu_s"] = samples / profiled;
  }
}

// The 1 kHz target is a difference of two overheads (the sampler's no more than perf's plus 1
// point), smaller than this machine's drift between benchmarks. So each iteration measures both, back to
// back, on a longer workload, and the counters are medians over iterations: the sampler's ratio, perf's,
// and the paired difference in points with its quartiles.
constexpr std::uint64_t kPairedChunks = 3 * kChunks;

void BM_overhead_vs_perf(benchmark::State& state, Unwinder unwinder, Sampler::Rearm rearm) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  std::vector<double> ours, perfs, points;
  for (auto _ : state) {
    const OverheadPair p = perf_record_pair(hz, kPairedChunks);
    if (p.plain == 0) {
      state.SkipWithError("perf record failed (is /usr/bin/perf usable here?)");
      break;
    }
    const OverheadPair q = sampled_pair(unwinder, rearm, hz, kPairedChunks);
    ours.push_back(q.profiled / q.plain);
    perfs.push_back(p.profiled / p.plain);
    points.push_back(100 * (ours.back() - perfs.back()));
    state.SetIterationTime(q.profiled);
  }
  if (points.empty()) return;
  std::vector<double> sorted = points;
  std::sort(sorted.begin(), sorted.end());
  state.counters["ratio"] = median(ours);
  state.counters["perf_ratio"] = median(perfs);
  state.counters["points_over_perf"] = median(points);
  state.counters["points_q1"] = sorted[sorted.size() / 4];
  state.counters["points_q3"] = sorted[(3 * sorted.size()) / 4];
}

void register_all() {
  g_floor_signal = SIGRTMAX - 1;
  struct sigaction sa {};
  sa.sa_sigaction = floor_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(g_floor_signal, &sa, nullptr);

  for (int depth : {13, 130}) {
    benchmark::RegisterBenchmark("unwind/frame_pointer", BM_unwind, Direct::frame_pointer, Shape::recursion)->Arg(depth);
    benchmark::RegisterBenchmark("unwind/frame_pointer:one_at_a_time", BM_unwind, Direct::frame_pointer_one_at_a_time,
                                 Shape::recursion)->Arg(depth);
    benchmark::RegisterBenchmark("unwind/dwarf", BM_unwind, Direct::dwarf, Shape::recursion)->Arg(depth);
    benchmark::RegisterBenchmark("unwind/libunwind_fast", BM_unwind, Direct::libunwind_fast, Shape::recursion)->Arg(depth);
    benchmark::RegisterBenchmark("unwind/libunwind_cursor", BM_unwind, Direct::libunwind_cursor, Shape::recursion)
        ->Arg(depth);
  }
  benchmark::RegisterBenchmark("unwind/frame_pointer:mixed_frames", BM_unwind, Direct::frame_pointer,
                               Shape::mixed_frames)->Arg(130);
  benchmark::RegisterBenchmark("unwind/frame_pointer:one_at_a_time:mixed_frames", BM_unwind,
                               Direct::frame_pointer_one_at_a_time, Shape::mixed_frames)->Arg(130);
  for (Shape shape : {Shape::distinct_functions, Shape::no_frame_pointer}) {
    const std::string suffix = shape == Shape::distinct_functions ? ":distinct_functions" : ":no_frame_pointer";
    benchmark::RegisterBenchmark(("unwind/frame_pointer" + suffix).c_str(), BM_unwind, Direct::frame_pointer, shape)
        ->Arg(130);
    benchmark::RegisterBenchmark(("unwind/dwarf" + suffix).c_str(), BM_unwind, Direct::dwarf, shape)->Arg(130);
    benchmark::RegisterBenchmark(("unwind/libunwind_fast" + suffix).c_str(), BM_unwind, Direct::libunwind_fast, shape)
        ->Arg(130);
  }
  benchmark::RegisterBenchmark("unwind/dwarf:distinct_no_frame_pointer", BM_unwind, Direct::dwarf,
                               Shape::distinct_no_frame_pointer)->Arg(130);
  benchmark::RegisterBenchmark("unwind/libunwind_fast:distinct_no_frame_pointer", BM_unwind, Direct::libunwind_fast,
                               Shape::distinct_no_frame_pointer)->Arg(130);
  for (int depth : {13, 130}) {
    benchmark::RegisterBenchmark("handler/floor:empty", BM_floor, FloorMode::empty)->Arg(depth);
    benchmark::RegisterBenchmark("handler/floor:empty+frame_walk", BM_floor, FloorMode::frame_walk)->Arg(depth);
    benchmark::RegisterBenchmark("handler/frame_walk_timed_inside", BM_walk_in_handler, false)->Arg(depth);
    benchmark::RegisterBenchmark("handler/dwarf_walk_timed_inside", BM_walk_in_handler, true)->Arg(depth);
    benchmark::RegisterBenchmark("handler_called/floor:empty+frame_walk", BM_handler_called, true,
                                 Unwinder::frame_pointer)->Arg(depth);
    benchmark::RegisterBenchmark("handler_called/frame_pointer", BM_handler_called, false, Unwinder::frame_pointer)
        ->Arg(depth);
    benchmark::RegisterBenchmark("handler_called/libunwind", BM_handler_called, false, Unwinder::libunwind)
        ->Arg(depth);
    benchmark::RegisterBenchmark("handler/frame_pointer", BM_handler, Unwinder::frame_pointer,
                                 Sampler::Rearm::overflow_signal)->Arg(depth);
    benchmark::RegisterBenchmark("handler/libunwind", BM_handler, Unwinder::libunwind,
                                 Sampler::Rearm::overflow_signal)->Arg(depth);
    benchmark::RegisterBenchmark("handler/frame_pointer:refresh", BM_handler, Unwinder::frame_pointer,
                                 Sampler::Rearm::refresh)->Arg(depth);
    benchmark::RegisterBenchmark("handler/ring_read_only", BM_handler, Unwinder::frame_pointer,
                                 Sampler::Rearm::ring_buffer)->Arg(depth);
  }
  struct Config {
    const char* name;
    Unwinder unwinder;
    Sampler::Rearm rearm;
  };
  const Config configs[] = {
      {"overhead/frame_pointer:ring", Unwinder::frame_pointer, Sampler::Rearm::ring_buffer},
      {"overhead/frame_pointer:overflow_signal", Unwinder::frame_pointer, Sampler::Rearm::overflow_signal},
      {"overhead/frame_pointer:refresh", Unwinder::frame_pointer, Sampler::Rearm::refresh},
      {"overhead/libunwind:ring", Unwinder::libunwind, Sampler::Rearm::ring_buffer},
      {"overhead/kernel:ring", Unwinder::kernel, Sampler::Rearm::ring_buffer},
  };
  for (int hz : {1000, 10000}) {
    for (const Config& c : configs)
      benchmark::RegisterBenchmark(c.name, BM_overhead, c.unwinder, c.rearm)
          ->Arg(hz)->UseManualTime()->Iterations(3)->Repetitions(3)->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark("overhead/perf_record_-g", BM_perf_record)
        ->Arg(hz)->UseManualTime()->Iterations(3)->Repetitions(3)->ReportAggregatesOnly(true);
    benchmark::RegisterBenchmark("overhead/gperftools", BM_gperftools)
        ->Arg(hz)->UseManualTime()->Iterations(3)->Repetitions(3)->ReportAggregatesOnly(true);
  }
  benchmark::RegisterBenchmark("overhead_vs_perf/frame_pointer:ring", BM_overhead_vs_perf, Unwinder::frame_pointer,
                               Sampler::Rearm::ring_buffer)
      ->Arg(1000)->UseManualTime()->Iterations(25);

}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--workload-child") == 0) {
    double t0 = process_cpu_seconds();
    g_sink += workload(std::strtoull(argv[2], nullptr, 10));
    double t1 = process_cpu_seconds();
    FILE* f = std::fopen(argv[3], "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "%.9f\n", t1 - t0);
    std::fclose(f);
    return g_sink == 42 ? 1 : 0;
  }
  g_self = std::filesystem::read_symlink("/proc/self/exe").string();
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
