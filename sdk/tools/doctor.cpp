// selfperf-doctor: the capability report plus live checks a user runs on their own machine.
// Exit 0 when every check that this machine can run passes (checks that need hardware it lacks are
// reported as skipped, with the reason); 1 otherwise. --json prints the same as one JSON object.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <selfperf/perf_data_reader.hpp>
#include <selfperf/perf_data_writer.hpp>
#include <selfperf/sampler.hpp>
#include <selfperf/selfperf.hpp>

namespace {

enum class Outcome { pass, fail, skip };

struct Check {
  std::string name;
  Outcome outcome;
  std::string detail;
};

std::uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

void burn_cpu(std::uint64_t ns) {
  std::atomic<std::uint64_t> sink{0};
  const std::uint64_t start = thread_cpu_ns();
  while (thread_cpu_ns() - start < ns)
    for (int i = 0; i < 1000; ++i) sink.fetch_add(static_cast<std::uint64_t>(i), std::memory_order_relaxed);
}

// Recursion the unwinders must see through: with frame pointers, and (for libunwind's DWARF path) without.
[[gnu::noinline]] int recurse_with_fp(int depth, std::uint64_t ns) {
  if (depth == 0) {
    burn_cpu(ns);
    return 0;
  }
  int r = recurse_with_fp(depth - 1, ns);
  asm volatile("" ::: "memory");  // not a tail call
  return r + 1;
}

[[gnu::noinline, gnu::optimize("omit-frame-pointer")]] int recurse_without_fp(int depth, std::uint64_t ns) {
  if (depth == 0) {
    burn_cpu(ns);
    return 0;
  }
  int r = recurse_without_fp(depth - 1, ns);
  asm volatile("" ::: "memory");
  return r + 1;
}

Check check_counters() {
  selfperf::CounterGroup group{"task-clock", "page-faults"};
  group.enable();
  auto before = group.read();
  burn_cpu(20'000'000);
  auto after = group.read();
  auto d = selfperf::delta(before[0], after[0]);
  if (d.count < 10'000'000)
    return {"counters", Outcome::fail, "task-clock grew by " + std::to_string(d.count) + " ns over 20 ms of CPU"};
  return {"counters", Outcome::pass,
          "task-clock counted " + std::to_string(d.count / 1000000) + " ms of 20 ms busy; read path: " +
              std::string(group.read_path())};
}

Check check_fast_path(const selfperf::CapabilityReport& caps) {
  if (!caps.hardware_events) return {"fast path", Outcome::skip, caps.fast_path_verdict()};
  selfperf::CounterGroup group{"cycles", "instructions"};
  group.enable();
  (void)group.read();
  std::string path(group.read_path());
  if (path != "rdpmc") return {"fast path", Outcome::skip, "hardware events open but reads take " + path};
  // rdpmc must agree with the kernel: fast ≤ read(2) ≤ fast, read back to back.
  int disagreements = 0;
  for (int i = 0; i < 100; ++i) {
    auto a = group.read();
    std::uint64_t buf[3 + 2 * 2];
    if (::read(group.leader_fd(), buf, sizeof buf) < 0) return {"fast path", Outcome::fail, "read(2) failed"};
    auto b = group.read();
    if (!(a[0].value <= buf[3] && buf[3] <= b[0].value)) ++disagreements;
  }
  if (disagreements) return {"fast path", Outcome::fail, std::to_string(disagreements) + "/100 rdpmc reads disagree with read(2)"};
  return {"fast path", Outcome::pass, "rdpmc taken; 100/100 reads agree with read(2)"};
}

Check check_sampling_threads() {
  selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 1000});
  sampler.start();
  std::atomic<pid_t> tids[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(sampler.attached([&, t] {
      tids[t] = static_cast<pid_t>(gettid());
      burn_cpu(150'000'000);
    }));
  for (auto& t : threads) t.join();
  auto totals = sampler.stop();
  std::uint64_t per_thread[2] = {0, 0}, foreign = 0;
  sampler.drain([&](const selfperf::Sample& s) {
    if (s.tid == tids[0]) ++per_thread[0];
    else if (s.tid == tids[1]) ++per_thread[1];
    else ++foreign;
  });
  std::string detail = sampler.event_name() + " at 1 kHz: " + std::to_string(per_thread[0]) + " + " +
                       std::to_string(per_thread[1]) + " samples on the two busy threads, " + std::to_string(foreign) +
                       " elsewhere, " + std::to_string(totals.lost) + " lost";
  bool ok = per_thread[0] >= 30 && per_thread[1] >= 30 && foreign == 0;
  return {"sampling", ok ? Outcome::pass : Outcome::fail, detail};
}

// Median depth of the samples taken in `body` with the given unwinder.
std::size_t sampled_depth(selfperf::Unwinder unwinder, const std::function<void()>& body, std::string& error) {
  try {
    selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 2000, .unwinder = unwinder, .max_depth = 128});
    sampler.start();
    std::thread(sampler.attached(body)).join();
    sampler.stop();
    std::vector<std::size_t> depths;
    sampler.drain([&](const selfperf::Sample& s) { depths.push_back(s.frames.size()); });
    if (depths.empty()) return 0;
    std::nth_element(depths.begin(), depths.begin() + static_cast<long>(depths.size() / 2), depths.end());
    return depths[depths.size() / 2];
  } catch (const selfperf::Error& e) {
    error = e.what();
    return 0;
  }
}

Check check_unwinding() {
  constexpr int kDepth = 24;
  std::string error;
  auto with_fp = [] { recurse_with_fp(kDepth, 150'000'000); };
  auto without_fp = [] { recurse_without_fp(kDepth, 150'000'000); };
  std::size_t fp = sampled_depth(selfperf::Unwinder::frame_pointer, with_fp, error);
  std::size_t lu_fp = sampled_depth(selfperf::Unwinder::libunwind, with_fp, error);
  std::size_t lu_nofp = sampled_depth(selfperf::Unwinder::libunwind, without_fp, error);
  std::size_t fp_nofp = sampled_depth(selfperf::Unwinder::frame_pointer, without_fp, error);
  std::ostringstream detail;
  detail << "median depth through " << kDepth << " recursive frames: frame pointers " << fp << ", libunwind " << lu_fp
         << "; code without frame pointers: libunwind " << lu_nofp << ", frame pointers " << fp_nofp
         << " (expected short)";
  if (!error.empty()) detail << "; " << error;
  bool ok = fp >= kDepth && lu_fp >= kDepth && lu_nofp >= kDepth;
  return {"unwinding", ok ? Outcome::pass : Outcome::fail, detail.str()};
}

Check check_perf_data() {
  auto path = std::filesystem::temp_directory_path() / ("selfperf-doctor-" + std::to_string(getpid()) + ".data");
  std::uint64_t written = 0, read_back = 0;
  try {
    selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 1000});
    sampler.start();
    std::thread(sampler.attached([] { recurse_with_fp(8, 100'000'000); })).join();
    sampler.stop();
    {
      perf_event_attr attr = selfperf::to_attr(selfperf::parse_event(sampler.event_name()));
      selfperf::PerfDataWriter writer(path, {selfperf::EventDescription{sampler.event_name(), attr, {}}});
      writer.synthesize_self_mmaps();
      sampler.drain([&](const selfperf::Sample& s) { writer.write_sample(s); });
      written = writer.samples_written();
      writer.close();
    }
    selfperf::PerfDataReader reader(path);
    selfperf::PerfRecord record;
    while (reader.next_record(record))
      if (record.type == PERF_RECORD_SAMPLE && reader.decode_sample(record).callchain.size() > 0) ++read_back;
  } catch (const selfperf::Error& e) {
    std::filesystem::remove(path);
    return {"perf.data", Outcome::fail, e.what()};
  }
  std::filesystem::remove(path);
  bool ok = written > 0 && written == read_back;
  return {"perf.data", ok ? Outcome::pass : Outcome::fail,
          std::to_string(written) + " samples written, " + std::to_string(read_back) + " read back"};
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out + "\"";
}

const char* word(Outcome o) { return o == Outcome::pass ? "pass" : o == Outcome::fail ? "FAIL" : "skipped"; }

}  // namespace

int main(int argc, char** argv) {
  bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  if (argc > 1 && !json) {
    std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
    return 2;
  }
  auto caps = selfperf::probe();
  std::vector<Check> checks;
  auto run = [&](const char* name, auto&& fn) {
    try {
      checks.push_back(fn());
    } catch (const selfperf::Error& e) {
      checks.push_back({name, Outcome::fail, e.what()});
    }
  };
  run("counters", check_counters);
  run("fast path", [&] { return check_fast_path(caps); });
  run("sampling", check_sampling_threads);
  run("unwinding", check_unwinding);
  run("perf.data", check_perf_data);

  int failed = 0, skipped = 0;
  for (const auto& c : checks) {
    failed += c.outcome == Outcome::fail;
    skipped += c.outcome == Outcome::skip;
  }
  std::string verdict = failed ? std::to_string(failed) + " check(s) failed"
                               : "healthy: " + std::to_string(checks.size() - static_cast<std::size_t>(skipped)) +
                                     " checks passed, " + std::to_string(skipped) + " skipped (" + caps.fast_path_verdict() + ")";
  if (json) {
    std::cout << "{\"verdict\":" << json_string(verdict) << ",\"ok\":" << (failed ? "false" : "true")
              << ",\"perf_event_paranoid\":" << caps.perf_event_paranoid
              << ",\"hardware_events\":" << (caps.hardware_events ? "true" : "false")
              << ",\"read_path\":" << json_string(caps.fast_path_verdict()) << ",\"checks\":[";
    for (std::size_t i = 0; i < checks.size(); ++i)
      std::cout << (i ? "," : "") << "{\"name\":" << json_string(checks[i].name) << ",\"result\":\""
                << (checks[i].outcome == Outcome::pass ? "pass" : checks[i].outcome == Outcome::fail ? "fail" : "skipped")
                << "\",\"detail\":" << json_string(checks[i].detail) << "}";
    std::cout << "]}\n";
  } else {
    std::cout << caps << "\nlive checks\n";
    for (const auto& c : checks) std::printf("  %-10s %-8s %s\n", c.name.c_str(), word(c.outcome), c.detail.c_str());
    std::cout << "\nselfperf-doctor: " << verdict << "\n";
  }
  return failed ? 1 : 0;
}
