// Profiler: Sampler → drain thread → PerfDataWriter (streamed, synced each pass) + folded stacks; the file is
// created with the first sample and finished at stop().
#include "selfperf/profile.hpp"

#include "sampling/fork_guard.hpp"
#include "sampling/new_threads.hpp"
#include "perf_data/perf_data_features.hpp"
#include "profiling/profile_output.hpp"
#include "profiling/profile_summary.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <new>
#include <map>
#include <optional>
#include <vector>

#include <pthread.h>

#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/sampler.hpp"
#include "selfperf/symbolizer.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {
namespace {

// Often enough that per-thread buffers (1024 samples) do not fill at 1 kHz, rarely enough to cost nothing.
constexpr auto kDrainInterval = std::chrono::milliseconds(50);

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::uint64_t env_number(const char* name, std::uint64_t low, std::uint64_t high, const char* what) {
  const std::string f = env(name);
  char* end = nullptr;
  const unsigned long long v = std::strtoull(f.c_str(), &end, 10);
  if (f.empty() || *end != '\0' || f[0] == '-' || v < low || v > high)
    throw Error(std::string(name) + "=" + f + ": give " + what + ", " + std::to_string(low) + ".." +
                std::to_string(high));
  return v;
}

}  // namespace

ProfileOptions profile_options_from_env() {
  ProfileOptions o;
  o.output = env("SELFPERF_PROFILE");
  o.event = env("SELFPERF_EVENT");
  if (!env("SELFPERF_FREQUENCY").empty())
    o.frequency = env_number("SELFPERF_FREQUENCY", 1, 100000, "samples per second per thread");
  if (!env("SELFPERF_MAX_DEPTH").empty())
    o.max_depth = env_number("SELFPERF_MAX_DEPTH", 1, 1024, "the most frames kept per sample");
  o.summary = env("SELFPERF_SUMMARY");
  o.quiet = !env("SELFPERF_QUIET").empty() && env("SELFPERF_QUIET") != "0";
  o.render = env("SELFPERF_RENDER") != "0";
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
  std::int64_t run_start_ns = 0;
  std::optional<Sampler> sampler;
  EventDescription event;
  std::optional<PerfDataWriter> writer;  // created with the first sample: no file for a process without one
  std::string path;                      // the file the writer writes
  std::string summary_path;              // where stop() wrote the JSON summary
  Unwinder unwinder = Unwinder::libunwind;  // the one in use: options.unwinder but under ThreadSanitizer
  bool write_failed = false;             // reported once; samples are dropped from then on
  Sampler::Totals totals;
  // Stacks as addresses, symbolized once at stop(): libdw (and the debuginfod client, curl and OpenSSL it
  // starts) must not run on the drain thread, where it raced exit(): libcrypto, finalized first, crashed the
  // profiled bash when the drainer's first lookup came during exit (1 run in ~10 of a sh -c chain).
  std::map<std::vector<std::uint64_t>, std::uint64_t> raw_stacks;
  std::mutex mu;  // writer, raw_stacks: drain thread vs stop()
  std::condition_variable wake;
  bool stopping = false;
  bool stopped = false;
  // A pthread, not a std::thread: std::thread's state is freed by the new thread, and a thread's first free()
  // makes glibc a malloc arena for it (a 128 MiB reservation trimmed by two munmap and an mprotect), which
  // every short process paid. A process that ends before the first pass (50 ms) leaves the drainer without
  // one malloc or free.
  pthread_t drainer{};
  bool drainer_running = false;
  std::atomic<std::uint64_t> samples{0};
  std::atomic<std::uint64_t> lost{0};
  std::uint64_t samples_dropped = 0;  // drained after a write error
  void (*on_first_pass)() = nullptr;

  void start_drainer();
  void drain_loop();
  void finish();

  void open_writer() {
    int fd = detail::claim_profile_output(options.output.string(), ::getpid(), run_start_ns, path);
    writer.emplace(fd, path, std::vector<EventDescription>{event});
  }

  void drain_once() {
    if (write_failed) {
      samples_dropped += sampler->drain([](const Sample&) {});
      return;
    }
    try {
      std::size_t n = sampler->drain([&](const Sample& s) {
        if (!writer) open_writer();
        writer->write_sample(s, 0);
        if (options.render) ++raw_stacks[std::vector<std::uint64_t>(s.frames.begin(), s.frames.end())];
      });
      samples += n;
      // One drain pass visits every thread's buffer: nothing drained later is older than the previous pass.
      // Synced each pass, so a process killed now leaves a file perf reads up to here.
      if (n > 0) {
        writer->write_finished_round();
        writer->sync();
      }
    } catch (const Error& e) {
      write_failed = true;
      std::fprintf(stderr, "selfperf: profile: %s; no more samples are written\n", e.what());
    }
  }
};

Profiler::Profiler(ProfileOptions options) : state_(std::make_unique<State>()) {
  if (options.output.empty()) throw Error("profiler: give an output path (SELFPERF_PROFILE=out.data)");
  if (options.output == "-")
    throw Error("profiler: output '-' (standard output) is the program's own, and every process it starts "
                "would write there too; for a pipe-mode perf.data on standard output run the program under "
                "`selfperf record -o - -- PROGRAM`, which keeps the program's output apart and merges its processes");
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
#if defined(__SANITIZE_THREAD__)
  // The Sampler refuses libunwind's fallback under ThreadSanitizer (sampler.cpp): the default becomes frame
  // pointers there, the test builds' only difference.
  if (so.unwinder == Unwinder::libunwind) so.unwinder = Unwinder::frame_pointer;
#endif
  s.unwinder = so.unwinder;
  so.attach_new_threads = detail::thread_hook_present();  // the preload library, or a program linking the hook
  so.max_depth = s.options.max_depth;
  // libunwind's set-up (~2 ms of CPU) waits for the first samples (drain thread): a process that takes none, a
  // build's thousand short ones, never pays it.
  so.defer_libunwind_setup = true;
  // Four drain passes' worth of samples (at least 64): a thread fills its buffer only if the drainer is late
  // by three passes. The default 1024 was 20 passes at 999 Hz and, ring pages being touched in turn, up to
  // 300 KiB a busy thread: 60 KiB now.
  so.buffer_capacity = std::max<std::size_t>(
      64, static_cast<std::size_t>(s.options.frequency * 4 * kDrainInterval.count() / 1000));
  s.sampler.emplace(so);

  s.event.name = s.sampler->event_name();
  s.event.attr = to_attr(parse_event(s.event.name));
  s.event.attr.freq = 1;
  s.event.attr.sample_freq = s.options.frequency;
  // The event as opened: perf report and merges show `cpu-clock:u` only where kernel time was left out (root's
  // cpu-clock counts it, and its samples carry the user stack of the system call or fault).
  s.event.attr.exclude_kernel = s.sampler->samples_kernel() ? 0 : 1;
  s.event.attr.exclude_hv = 1;
  s.event.attr.use_clockid = 1;     // Sample::time is CLOCK_MONOTONIC
  s.event.attr.clockid = CLOCK_MONOTONIC;
  s.run_start_ns = detail::join_profile_run();

  s.sampler->start();
  s.sampler->attach_this_thread();
  // The drainer allocates under mu: a fork must not copy it mid-pass.
  detail::fork_waits_for(s.mu, detail::ForkLockRank::profiler);
  s.start_drainer();
}

void Profiler::State::start_drainer() {
  detail::UnattachedThreadCreation unattached;  // the drainer is not profiled
  const int rc = pthread_create(
      &drainer, nullptr, [](void* state) -> void* {
        static_cast<State*>(state)->drain_loop();
        return nullptr;
      },
      this);
  if (rc != 0) throw Error("profiler: cannot start its drain thread", rc);
  drainer_running = true;
}

void Profiler::State::drain_loop() {
  std::unique_lock lock(mu);
  bool first_pass = true;
  bool libunwind_prepared = false;
  for (;;) {
    // Woken by stop(), it leaves without a pass: finish() drains after joining it.
    if (wake.wait_for(lock, kDrainInterval, [this] { return stopping; })) break;
    drain_once();
    // Samples that needed libunwind before this kept the DWARF walk's frames (Totals::unwound_partially).
    // Outside mu: the set-up may load libunwind (the preload library's dlopen takes the loader's lock), and a
    // library constructor that forks, holding that lock, waits for mu (fork_guard.hpp).
    if (!libunwind_prepared && unwinder == Unwinder::libunwind && samples.load(std::memory_order_relaxed) > 0) {
      lock.unlock();
      prepare_libunwind_process();
      lock.lock();
      libunwind_prepared = true;
    }
    if (first_pass && on_first_pass) on_first_pass();
    first_pass = false;
  }
}

void Profiler::restart_in_fork_child() {
  auto& s = *state_;
  if (s.stopped || !s.sampler || ::getpid() == s.owner) return;
  // Everything copied from the parent is the parent's: its file (the copy of its descriptor is closed
  // unwritten), its samples, its drain thread (which this process does not have: never joined).
  if (s.writer) s.writer->abandon();
  s.writer.reset();
  s.path.clear();
  s.summary_path.clear();
  s.raw_stacks.clear();
  s.samples = 0;
  s.lost = 0;
  s.samples_dropped = 0;
  s.write_failed = false;
  s.totals = {};
  s.owner = ::getpid();
  s.drainer_running = false;
  s.sampler->attach_this_thread();  // the Sampler drops what it inherited and opens this thread's event
  s.start_drainer();
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
  // The summary is written even when the files were not (write_failed), but, as they are, not by a process
  // that took and lost no sample (a fork child about to exec, say): it would say nothing.
  std::exception_ptr failed;
  try {
    s.finish();
  } catch (const std::exception&) {
    failed = std::current_exception();
  }
  // Said, not thrown: the profile itself was written, and the summary line still follows.
  if (!s.options.summary.empty() && (s.writer || s.write_failed || s.totals.lost > 0)) {
    try {
      s.summary_path = detail::write_profile_summary(s.options.summary.string(), s.run_start_ns, summary_json());
    } catch (const Error& e) {
      std::fprintf(stderr, "selfperf: summary not written: %s\n", e.what());
    }
  }
  if (failed) std::rethrow_exception(failed);
}

void Profiler::State::finish() {
  auto& s = *this;
  {
    std::lock_guard lock(s.mu);
    s.stopping = true;
  }
  s.wake.notify_all();
  if (s.drainer_running) pthread_join(s.drainer, nullptr);
  s.drainer_running = false;
  detail::fork_no_longer_waits_for(s.mu);
  s.totals = s.sampler->stop();
  std::lock_guard lock(s.mu);
  s.drain_once();
  s.lost = s.totals.lost;
  if (!s.writer) return;  // no sample, no file
  if (s.totals.lost > 0) s.writer->write_lost(s.totals.lost, 0);
  s.writer->close();
  if (!s.options.render) return;
  Symbolizer symbolizer;
  StackCounts stacks;
  for (const auto& [frames, count] : s.raw_stacks) stacks.add_leaf_first(symbolizer.stack_names(frames), count);
  s.raw_stacks.clear();
  std::ofstream folded(s.path + ".folded");
  stacks.write_folded(folded);
  std::ofstream svg(s.path + ".svg");
  FlameGraphOptions fo;
  fo.title = "selfperf: " + s.sampler->event_name();
  write_flame_graph_svg(stacks, svg, fo);
  if (!folded || !svg) throw Error("profiler: cannot write " + s.path + ".folded / .svg");
}

std::string Profiler::summary_json() const {
  const auto& s = *state_;
  detail::ProfileSummaryFacts f;
  f.pid = ::getpid();
  f.comm = detail::self_comm();
  f.event = s.sampler ? s.sampler->event_name() : s.options.event;
  f.frequency_hz = s.options.frequency;
  f.unwinder = s.sampler ? s.unwinder : s.options.unwinder;
  f.samples = s.samples.load();
  f.samples_dropped = s.samples_dropped;
  f.write_failed = s.write_failed;
  if (s.writer) f.perf_data = s.path;
  f.rendered = s.options.render;
  f.totals = &s.totals;
  return detail::profile_summary_json(f);
}

const std::string& Profiler::summary_path() const noexcept { return state_->summary_path; }

std::string Profiler::summary() const {
  const auto& s = *state_;
  const auto& t = s.totals;
  std::string who = detail::self_comm() + "[" + std::to_string(::getpid()) + "]";
  // Threads that were sampled: the drain thread, attached by the thread hook and then detached, is not one.
  std::size_t sampled = 0;
  for (const auto& thread : t.threads) sampled += thread.samples + thread.lost > 0 ? 1 : 0;
  std::string threads = std::to_string(sampled) + (sampled == 1 ? " thread" : " threads");
  if (!s.writer) {
    if (s.write_failed) return "selfperf: " + who + ": profile not written (error above), " + threads;
    return "selfperf: " + who + ": no samples, no profile written";
  }
  const std::uint64_t n = s.samples.load();
  std::string line = "selfperf: " + who + ": " + std::to_string(n) + (n == 1 ? " sample, " : " samples, ") + threads +
                     ", " + std::to_string(t.lost) + " lost";
  if (t.lost > 0) {
    line += " (buffer full " + std::to_string(t.lost_buffer_full) + ", kernel " +
            std::to_string(t.lost_kernel) + ", coalesced " + std::to_string(t.lost_coalesced) + ")";
  }
  if (s.samples_dropped > 0) line += ", " + std::to_string(s.samples_dropped) + " dropped after a write error";
  if (t.rate_lowered > 0) line += ", rate lowered " + std::to_string(t.rate_lowered) + "x (sampling cost too much)";
  line += "; wrote " + s.path + " (perf report -i " + s.path + ")" + (s.options.render ? ", .folded, .svg" : "");
  if (!s.summary_path.empty()) line += ", summary " + s.summary_path;
  return line;
}

const std::string& Profiler::output_path() const noexcept { return state_->path; }
bool Profiler::quiet() const noexcept { return state_->options.quiet; }
void Profiler::after_first_drain(void (*fn)()) noexcept { state_->on_first_pass = fn; }

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
    // SELFPERF_PROFILE stays set: the programs this one starts are profiled too, each into a file of its own.
    g_profiler = new Profiler(options);
    // The atexit handler below, registered before main (the preload's constructor), runs inside _dl_fini,
    // after the libraries loaded later were finalized. Registered again once main runs, it stops the profile
    // as exit() begins, while those libraries still work (profile_stop acts once).
    g_profiler->after_first_drain([] { std::atexit([] { profile_stop(); }); });
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

void profile_after_fork_child() noexcept {
  if (!g_running.load(std::memory_order_acquire) || ::getpid() == g_owner) return;
  try {
    g_profiler->restart_in_fork_child();
    g_owner = ::getpid();
  } catch (const std::exception& e) {
    g_running = false;  // the parent's profile is not this process's to write
    std::fprintf(stderr, "selfperf: forked process %d not profiled: %s\n", static_cast<int>(::getpid()), e.what());
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
    if (!g_profiler->quiet() && ::getpid() == g_owner) std::fprintf(stderr, "%s\n", g_profiler->summary().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "selfperf: profile not written: %s\n", e.what());
  }
}

}  // namespace selfperf
