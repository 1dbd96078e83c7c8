// Two signal-delivery designs side by side (issue 16), on the same workload with the same in-handler unwinder
// and sample buffer, so that only delivery differs:
//  * ours: selfperf::Sampler, one event per attached thread routed with O_ASYNC + F_SETSIG (a real-time
//    signal) + F_SETOWN_EX(F_OWNER_TID), with its small ring (Rearm::ring_buffer, the default) or without
//    (Rearm::overflow_signal);
//  * sigtrap: SigtrapSampler (sigtrap_sampler.hpp), one event per process with inherit + inherit_thread +
//    remove_on_exec + sigtrap: a synchronous SIGTRAP on the thread that overflowed.
// delivery/<unwinder>/<hz>/<threads>: each iteration runs the workload unprofiled and under each design, in an
// order that turns by one every iteration, on `threads` workers plus one attached thread that only waits.
// Counters, medians over the iterations: <design> (workers' CPU in the workload, profiled over unprofiled),
// <design>_rate (samples per worker per CPU second over the rate asked), sigtrap_minus_ring (paired
// difference of the two ratios, in points), wrong (samples that the waiting thread's own CPU time cannot
// account for, + Sampler's signals that met another thread's event; summed over designs and iterations).
// external/<profiler>/<hz>/<threads>: `perf record -F hz -g` and gperftools on the same workload in a child.
// Repetitions run interleaved in random order (interleaved.hpp). Before the benchmarks, delivery_probes.cpp
// prints what each design does with threads, memory, fork, exec, a blocked signal and debuggers; after them,
// a table of medians over every iteration of every repetition.
//
//   bench_delivery [--no-probes | --probes-only] [--benchmark_filter=…]
#include <benchmark/benchmark.h>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "delivery_designs.hpp"
#include "delivery_probes.hpp"
#include "events/perf_syscall.hpp"
#include "external_profilers.hpp"
#include "interleaved.hpp"
#include "selfperf/error.hpp"
#include "workload.hpp"

namespace {

using selfperf::Unwinder;
using selfperf_bench::Design;
using selfperf_bench::median;
using selfperf_bench::RunningDesign;

constexpr std::uint64_t kChunks = 150;  // per thread alone; four threads do half as much each
constexpr std::size_t kBufferCapacity = 4096;
std::atomic<std::uint64_t> g_sink{0};

std::uint64_t chunks_for(int threads) { return threads == 1 ? kChunks : kChunks / 2; }

// The workers' own CPU time in the workload (not thread start-up or attaching), and where samples went.
struct Run {
  double cpu = 0;
  std::uint64_t samples = 0;  // on workers
  // Samples on the thread that only waits beyond what its own CPU time allows (one per period, and one
  // more), plus Sampler's signals that met another thread's event. Not checked on the workers: at 10 kHz on 4
  // threads a busy worker was seen with a few samples more than its CPU time allows in every design (the
  // kernel's cpu-clock runs on local_clock(), which also counts interrupt time the CPU clock may leave out).
  std::uint64_t wrong = 0;
  std::vector<double> rates;  // per worker: samples per CPU second of its life over hz
  double asked = 0;           // the workers' samples at exactly hz per CPU second of their lives
  std::uint64_t missed = 0;   // lost (buffer full, coalesced, no slot) or late (sigtrap's ASYNC), all threads
};

struct Worker {
  pid_t tid = 0;
  double cpu = 0;       // in the workload
  double life_cpu = 0;  // since the thread began (its CPU clock starts at 0)
};

std::uint64_t beyond_own_cpu(std::uint64_t samples, double life_cpu, std::uint64_t hz) {
  const auto allowed = static_cast<std::uint64_t>(life_cpu * static_cast<double>(hz)) + 1;
  return samples > allowed ? samples - allowed : 0;
}

Run measure(Design design, Unwinder unwinder, std::uint64_t hz, int threads) {
  std::optional<RunningDesign> sampling;
  if (design != Design::plain)
    sampling.emplace(RunningDesign::Options{.design = design,
                                            .hz = hz,
                                            .unwinder = unwinder,
                                            .buffer_capacity = kBufferCapacity,
                                            .max_threads = static_cast<std::size_t>(threads) + 2});
  std::vector<Worker> workers(static_cast<std::size_t>(threads));
  Worker idle;
  std::barrier together(threads + 1);
  // The threads live on until sampling has stopped, then read their CPU clocks: every sample a thread took
  // falls within the CPU time it reports (the sigtrap event samples a thread until it exits).
  std::latch done(threads), stopped(1);
  std::mutex error_mutex;
  std::string error;  // the first attach that failed: reported once every thread is joined
  auto attach = [&] {
    try {
      if (sampling) sampling->attach();
    } catch (const std::exception& e) {
      std::lock_guard lock(error_mutex);
      if (error.empty()) error = e.what();
    }
  };
  std::vector<std::thread> pool;
  const std::uint64_t chunks = chunks_for(threads);
  for (auto& w : workers)
    pool.emplace_back([&, &w = w] {
      attach();
      w.tid = selfperf::detail::current_tid();
      together.arrive_and_wait();
      const double t0 = selfperf_bench::thread_cpu_seconds();
      g_sink += selfperf_bench::workload(chunks);
      w.cpu = selfperf_bench::thread_cpu_seconds() - t0;
      done.count_down();
      stopped.wait();
      w.life_cpu = selfperf_bench::thread_cpu_seconds();
    });
  pool.emplace_back([&] {
    attach();
    idle.tid = selfperf::detail::current_tid();
    together.arrive_and_wait();
    stopped.wait();
    idle.life_cpu = selfperf_bench::thread_cpu_seconds();
  });
  done.wait();
  RunningDesign::Result result;
  if (sampling) result = sampling->stop();
  stopped.count_down();
  for (auto& t : pool) t.join();
  if (!error.empty()) throw selfperf::Error("a thread could not attach: " + error);

  Run run;
  run.wrong = result.ignored + beyond_own_cpu(result.samples[idle.tid], idle.life_cpu, hz);
  for (const Worker& w : workers) {
    run.cpu += w.cpu;
    run.samples += result.samples[w.tid];
    run.rates.push_back(static_cast<double>(result.samples[w.tid]) / w.life_cpu / static_cast<double>(hz));
    run.asked += w.life_cpu * static_cast<double>(hz);
  }
  run.missed = result.lost + result.late;
  return run;
}

// Every iteration's values, per row and design, for the table printed after the run.
struct Series {
  std::vector<double> ratio, us_per_sample, rate, wrong, minus_ring;
  double samples = 0, asked = 0, missed = 0;  // summed: the pooled rate, less quantized than one run's
};
std::map<std::string, std::map<Design, Series>> g_series;
std::vector<std::string> g_row_order;
std::size_t g_turn = 0;  // the measuring order turns by one every iteration, across rows and repetitions

std::string unwinder_name(Unwinder u) { return u == Unwinder::frame_pointer ? "frame_pointer" : "dwarf"; }

void BM_delivery(benchmark::State& state, Unwinder unwinder, std::vector<Design> designs) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const std::string row = unwinder_name(unwinder) + " " + std::to_string(hz) + " Hz " + std::to_string(threads);
  std::vector<Design> order = designs;
  order.insert(order.begin(), Design::plain);
  std::map<Design, Series> local;
  try {
    for (auto _ : state) {
      std::map<Design, Run> runs;
      for (std::size_t k = 0; k < order.size(); ++k) {
        const Design d = order[(k + g_turn) % order.size()];
        runs[d] = measure(d, unwinder, hz, threads);
      }
      ++g_turn;
      const Run& plain = runs[Design::plain];
      for (Design d : designs) {
        const Run& r = runs[d];
        for (Series* s : {&local[d], &g_series[row][d]}) {
          s->ratio.push_back(r.cpu / plain.cpu);
          s->us_per_sample.push_back(r.samples ? 1e6 * (r.cpu - plain.cpu) / static_cast<double>(r.samples) : 0);
          s->rate.push_back(median(r.rates));
          s->wrong.push_back(static_cast<double>(r.wrong));
          s->minus_ring.push_back(100 * (r.cpu - runs[Design::ours_ring].cpu) / plain.cpu);
          s->samples += static_cast<double>(r.samples);
          s->asked += r.asked;
          s->missed += static_cast<double>(r.missed);
        }
      }
      state.SetIterationTime(plain.cpu);
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (std::find(g_row_order.begin(), g_row_order.end(), row) == g_row_order.end()) g_row_order.push_back(row);
  double wrong = 0;
  for (Design d : designs) {
    const std::string name = selfperf_bench::design_name(d);
    state.counters[name] = median(local[d].ratio);
    state.counters[name + "_rate"] = median(local[d].rate);
    for (double w : local[d].wrong) wrong += w;
  }
  state.counters["sigtrap_minus_ring"] = median(local[Design::sigtrap].minus_ring);
  state.counters["wrong"] = wrong;
}

// ---------- perf record -g and gperftools on the same workload, in a child ----------

std::string g_self;

// The child: `threads` workers each run the workload; writes their CPU seconds, summed.
int workload_child(std::uint64_t chunks, int threads, const char* out) {
  std::vector<double> cpu(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (auto& c : cpu)
    pool.emplace_back([&c, chunks] {
      const double t0 = selfperf_bench::thread_cpu_seconds();
      g_sink += selfperf_bench::workload(chunks);
      c = selfperf_bench::thread_cpu_seconds() - t0;
    });
  for (auto& t : pool) t.join();
  double sum = 0;
  for (double c : cpu) sum += c;
  FILE* f = std::fopen(out, "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "%.9f\n", sum);
  std::fclose(f);
  return g_sink == 42 ? 1 : 0;
}

enum class External { perf_record, gperftools };

struct ExternalSeries {
  std::vector<double> ratio, rate;
};
std::map<std::string, std::map<External, ExternalSeries>> g_external;

void BM_external(benchmark::State& state, External which) {
  const auto hz = static_cast<std::uint64_t>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  if (which == External::gperftools && access(selfperf_bench::kGperftools, R_OK) != 0) {
    state.SkipWithError("gperftools' libprofiler.so.0 is not installed (apt-get install libgoogle-perftools4)");
    return;
  }
  const std::string row = "frame_pointer " + std::to_string(hz) + " Hz " + std::to_string(threads);
  const std::string base = "/tmp/selfperf_bench_delivery_" + std::to_string(getpid());
  const std::string data = base + ".data", profile = base + ".prof", seconds = base + ".cpu";
  const std::vector<std::string> child{g_self, "--workload-child", std::to_string(chunks_for(threads)),
                                       std::to_string(threads), seconds};
  std::vector<std::string> under;
  if (which == External::perf_record) {
    under = {"perf", "record", "-q", "-F", std::to_string(hz), "-g", "-o", data, "--"};
  } else {
    under = {"env", std::string("LD_PRELOAD=") + selfperf_bench::kGperftools, "CPUPROFILE=" + profile,
             "CPUPROFILE_FREQUENCY=" + std::to_string(hz)};
  }
  under.insert(under.end(), child.begin(), child.end());
  ExternalSeries local;
  for (auto _ : state) {
    const double a = selfperf_bench::run_child(child) ? selfperf_bench::read_seconds(seconds) : -1;
    const double b = selfperf_bench::run_child(under) ? selfperf_bench::read_seconds(seconds) : -1;
    const double n = which == External::gperftools ? selfperf_bench::gperftools_samples(profile) : 0;
    std::remove(data.c_str());
    std::remove(profile.c_str());
    if (a <= 0 || b <= 0 || n < 0) {
      state.SkipWithError("the workload under the profiler failed (is /usr/bin/perf usable here?)");
      break;
    }
    for (ExternalSeries* s : {&local, &g_external[row][which]}) {
      s->ratio.push_back(b / a);
      s->rate.push_back(n / b / static_cast<double>(hz));
    }
    state.SetIterationTime(b);
  }
  std::remove(seconds.c_str());
  if (local.ratio.empty()) return;
  state.counters["ratio"] = median(local.ratio);
  if (which == External::gperftools) state.counters["rate"] = median(local.rate);
}

// ---------- the table ----------

std::string quartiles(std::vector<double> v, const char* format) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  char text[96];
  std::snprintf(text, sizeof text, format, median(v), v[v.size() / 4], v[(3 * v.size()) / 4]);
  return text;
}

void print_summary() {
  if (g_row_order.empty()) return;
  std::printf("\nMedians over every iteration (ratio: workers' CPU profiled / unprofiled; pts: sigtrap - ring, "
              "paired, [q1, q3]; us/sample: extra CPU per sample; rate: workers' samples over their CPU seconds x Hz, "
              "pooled; missed: lost + late, summed)\n\n");
  std::printf("| unwinder, rate, threads | n | ours ring | ours no ring | sigtrap | sigtrap - ring (pts) | "
              "us/sample ring / no ring / sigtrap | rate ring / no ring / sigtrap | missed | wrong thread | "
              "perf record -g | gperftools (rate) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  auto cell = [](const std::map<Design, Series>& row, Design d, auto member, const char* format) {
    auto it = row.find(d);
    if (it == row.end()) return std::string("-");
    char text[32];
    std::snprintf(text, sizeof text, format, median(it->second.*member));
    return std::string(text);
  };
  for (const std::string& name : g_row_order) {
    const auto& row = g_series[name];
    std::string wrong, missed, rate;
    for (Design d : {Design::ours_ring, Design::ours_signal, Design::sigtrap}) {
      const char* sep = d == Design::ours_ring ? "" : " / ";
      auto it = row.find(d);
      if (it == row.end()) {
        wrong += sep + std::string("-"), missed += sep + std::string("-"), rate += sep + std::string("-");
        continue;
      }
      double sum = 0;
      for (double w : it->second.wrong) sum += w;
      char text[32];
      std::snprintf(text, sizeof text, "%s%.0f", sep, sum);
      wrong += text;
      std::snprintf(text, sizeof text, "%s%.0f", sep, it->second.missed);
      missed += text;
      std::snprintf(text, sizeof text, "%s%.3f", sep, it->second.samples / it->second.asked);
      rate += text;
    }
    std::string perf = "-", gperf = "-";
    if (auto it = g_external.find(name); it != g_external.end()) {
      char text[64];
      if (auto p = it->second.find(External::perf_record); p != it->second.end()) {
        std::snprintf(text, sizeof text, "%.3f", median(p->second.ratio));
        perf = text;
      }
      if (auto g = it->second.find(External::gperftools); g != it->second.end()) {
        std::snprintf(text, sizeof text, "%.3f (%.2f)", median(g->second.ratio), median(g->second.rate));
        gperf = text;
      }
    }
    const std::size_t n = row.count(Design::sigtrap) ? row.at(Design::sigtrap).ratio.size() : 0;
    const std::string points =
        row.count(Design::sigtrap) ? quartiles(row.at(Design::sigtrap).minus_ring, "%+.2f [%+.2f, %+.2f]") : "-";
    std::printf("| %s | %zu | %s | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s |\n", name.c_str(), n,
                cell(row, Design::ours_ring, &Series::ratio, "%.3f").c_str(),
                cell(row, Design::ours_signal, &Series::ratio, "%.3f").c_str(),
                cell(row, Design::sigtrap, &Series::ratio, "%.3f").c_str(),
                points.c_str(),
                cell(row, Design::ours_ring, &Series::us_per_sample, "%.1f").c_str(),
                cell(row, Design::ours_signal, &Series::us_per_sample, "%.1f").c_str(),
                cell(row, Design::sigtrap, &Series::us_per_sample, "%.1f").c_str(),
                rate.c_str(), missed.c_str(), wrong.c_str(), perf.c_str(), gperf.c_str());
  }
}

void register_all() {
  const std::vector<Design> fp{Design::ours_ring, Design::ours_signal, Design::sigtrap};
  const std::vector<Design> dwarf{Design::ours_ring, Design::sigtrap};
  for (int hz : {1000, 10000}) {
    for (int threads : {1, 4}) {
      benchmark::RegisterBenchmark("delivery/frame_pointer", BM_delivery, Unwinder::frame_pointer, fp)
          ->Args({hz, threads})->UseManualTime()->Iterations(5)->Repetitions(5)->ReportAggregatesOnly(true);
      // Sampler's libunwind is the DWARF walk with libunwind behind it; this workload never needs the latter.
      benchmark::RegisterBenchmark("delivery/dwarf", BM_delivery, Unwinder::libunwind, dwarf)
          ->Args({hz, threads})->UseManualTime()->Iterations(5)->Repetitions(5)->ReportAggregatesOnly(true);
      benchmark::RegisterBenchmark("external/perf_record_-g", BM_external, External::perf_record)
          ->Args({hz, threads})->UseManualTime()->Iterations(2)->Repetitions(5)->ReportAggregatesOnly(true);
      benchmark::RegisterBenchmark("external/gperftools", BM_external, External::gperftools)
          ->Args({hz, threads})->UseManualTime()->Iterations(2)->Repetitions(5)->ReportAggregatesOnly(true);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "--workload-child") == 0)
    return workload_child(std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]), argv[4]);
  if (int rc = 0; selfperf_bench::delivery_probe_child(argc, argv, rc)) return rc;
  g_self = std::filesystem::read_symlink("/proc/self/exe").string();
  bool probes = true, only_probes = false;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-probes") == 0) {
      probes = false;
    } else if (std::strcmp(argv[i], "--probes-only") == 0) {
      only_probes = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (probes || only_probes) selfperf_bench::run_delivery_probes(g_self);
  if (only_probes) return 0;
  int rest_argc = static_cast<int>(rest.size());
  rest.push_back(nullptr);
  char** rest_argv = rest.data();
  register_all();
  selfperf_bench::initialize_interleaved(rest_argc, rest_argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  print_summary();
  return 0;
}
