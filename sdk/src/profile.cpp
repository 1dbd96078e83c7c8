// Profiler: Sampler → drain thread → PerfDataWriter (streamed) + folded stacks; files finished at stop().
#include "selfperf/profile.hpp"

#include "fork_guard.hpp"
#include "new_threads.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/sampler.hpp"
#include "selfperf/symbolizer.hpp"

namespace selfperf {
namespace {

// Often enough that per-thread buffers (1024 samples) do not fill at 1 kHz, rarely enough to cost nothing.
constexpr auto kDrainInterval = std::chrono::milliseconds(50);

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

ProfileOptions profile_options_from_env() {
  ProfileOptions o;
  o.output = env("SELFPERF_PROFILE");
  o.event = env("SELFPERF_EVENT");
  if (auto f = env("SELFPERF_FREQUENCY"); !f.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(f.c_str(), &end, 10);
    if (*end != '\0' || v == 0 || v > 100000)
      throw Error("SELFPERF_FREQUENCY=" + f + ": give samples per second per thread, 1..100000");
    o.frequency = v;
  }
  if (auto u = env("SELFPERF_UNWINDER"); !u.empty()) {
    if (u == "frame_pointer" || u == "fp") o.unwinder = Unwinder::frame_pointer;
    else if (u == "libunwind" || u == "dwarf") o.unwinder = Unwinder::libunwind;
    else if (u == "kernel") o.unwinder = Unwinder::kernel;
    else throw Error("SELFPERF_UNWINDER=" + u + ": use frame_pointer, libunwind or kernel");
  }
  return o;
}

struct Profiler::State {
  ProfileOptions options;
  pid_t owner = ::getpid();
  std::optional<Sampler> sampler;
  std::optional<PerfDataWriter> writer;
  Symbolizer symbolizer;
  StackCounts stacks;
  std::mutex mu;  // writer, stacks, symbolizer: drain thread vs stop()
  std::condition_variable wake;
  bool stopping = false;
  bool stopped = false;
  std::thread drainer;
  std::atomic<std::uint64_t> samples{0};
  std::atomic<std::uint64_t> lost{0};

  void drain_once() {
    std::size_t n = sampler->drain([&](const Sample& s) {
      writer->write_sample(s, 0);
      stacks.add_leaf_first(symbolizer.stack_names(s.frames), 1);
    });
    // One drain pass visits every thread's buffer: nothing drained later is older than the previous pass.
    if (n > 0) writer->write_finished_round();
    samples += n;
  }
};

Profiler::Profiler(ProfileOptions options) : state_(std::make_unique<State>()) {
  if (options.output.empty()) throw Error("profiler: give an output path (SELFPERF_PROFILE=out.data)");
  state_->options = std::move(options);
}

Profiler::~Profiler() {
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "selfperf: profile %s not written: %s\n", state_->options.output.c_str(), e.what());
  }
}

void Profiler::start() {
  auto& s = *state_;
  Sampler::Options so;
  so.event = s.options.event;
  so.frequency = s.options.frequency;
  so.unwinder = s.options.unwinder;
  so.attach_new_threads = detail::thread_hook_present();  // the preload library, or a program linking the hook
  s.sampler.emplace(so);

  EventDescription ev;
  ev.name = s.sampler->event_name();
  ev.attr = to_attr(parse_event(ev.name));
  ev.attr.freq = 1;
  ev.attr.sample_freq = s.options.frequency;
  ev.attr.exclude_kernel = 1;  // stacks are unwound in user space
  ev.attr.use_clockid = 1;     // Sample::time is CLOCK_MONOTONIC
  ev.attr.clockid = CLOCK_MONOTONIC;
  s.writer.emplace(s.options.output, std::vector<EventDescription>{ev});

  s.sampler->start();
  s.sampler->attach_this_thread();
  detail::fork_waits_for(s.mu);  // the drainer allocates under mu: a fork must not copy it mid-pass
  s.drainer = std::thread([&s] {
    s.sampler->detach_this_thread();  // attached by the pthread_create hook, if any: the drainer is not profiled
    std::unique_lock lock(s.mu);
    while (!s.stopping) {
      s.wake.wait_for(lock, kDrainInterval);
      try {
        s.drain_once();
      } catch (const Error& e) {
        std::fprintf(stderr, "selfperf: profile: %s; sampling goes on, the file may be incomplete\n", e.what());
      }
    }
  });
}

void Profiler::attach_this_thread() {
  if (state_->sampler && state_->sampler->running()) state_->sampler->attach_this_thread();
}

void Profiler::stop() {
  auto& s = *state_;
  if (s.stopped || !s.sampler) return;
  s.stopped = true;
  if (::getpid() != s.owner) {  // a forked child: the sampler's events and the files are the parent's
    detail::fork_no_longer_waits_for(s.mu);  // and it has no drainer
    return;
  }
  {
    std::lock_guard lock(s.mu);
    s.stopping = true;
  }
  s.wake.notify_all();
  if (s.drainer.joinable()) s.drainer.join();
  detail::fork_no_longer_waits_for(s.mu);
  auto totals = s.sampler->stop();
  std::lock_guard lock(s.mu);
  s.drain_once();
  s.lost = totals.lost;
  if (totals.lost > 0) s.writer->write_lost(totals.lost, 0);
  s.writer->close();
  const auto out = s.options.output.string();
  std::ofstream folded(out + ".folded");
  s.stacks.write_folded(folded);
  std::ofstream svg(out + ".svg");
  FlameGraphOptions fo;
  fo.title = "selfperf: " + s.sampler->event_name();
  write_flame_graph_svg(s.stacks, svg, fo);
  if (!folded || !svg) throw Error("profiler: cannot write " + out + ".folded / .svg");
}

std::uint64_t Profiler::samples_written() const noexcept { return state_->samples; }
std::uint64_t Profiler::lost() const noexcept { return state_->lost; }

namespace {

std::mutex g_mu;
Profiler* g_profiler = nullptr;  // never destroyed: threads may still attach while exit() runs
std::atomic<bool> g_running{false};
pid_t g_owner = 0;  // the process that started the profile

}  // namespace

bool profile_from_env() {
  std::lock_guard lock(g_mu);
  if (g_profiler) return g_running;
  ProfileOptions options;
  try {
    options = profile_options_from_env();
    if (options.output.empty()) return false;
    // Programs this one execs inherit the environment (and LD_PRELOAD): they must not truncate our file.
    ::unsetenv("SELFPERF_PROFILE");
    g_profiler = new Profiler(options);
    g_profiler->start();
  } catch (const Error& e) {
    std::fprintf(stderr, "selfperf: profiling disabled: %s\n", e.what());
    return false;
  }
  g_owner = ::getpid();
  g_running = true;
  std::atexit([] { profile_stop(); });
  return true;
}

void profile_attach_this_thread() noexcept {
  if (!g_running.load(std::memory_order_acquire)) return;
  try {
    g_profiler->attach_this_thread();
  } catch (const Error& e) {
    std::fprintf(stderr, "selfperf: thread %d not profiled: %s\n", static_cast<int>(::gettid()), e.what());
  }
}

void profile_before_exec() noexcept {
  // getpid(), not a cached value: in a vfork() child this memory is the parent's, the pid is not.
  if (g_running.load(std::memory_order_acquire) && ::getpid() == g_owner) profile_stop();
}

void profile_stop() noexcept {
  std::lock_guard lock(g_mu);
  if (!g_running.exchange(false)) return;
  try {
    g_profiler->stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "selfperf: profile not written: %s\n", e.what());
  }
}

}  // namespace selfperf
