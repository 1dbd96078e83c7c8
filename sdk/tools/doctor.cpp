// selfperf-doctor: what this machine lets a program measure (with the fix beside every "no") plus live checks a
// user runs on their own machine. Exit 0 when every check that this machine can run passes (checks that need
// hardware it lacks are reported as skipped, with the reason); 1 otherwise, never an abort: each check is
// isolated, so a denied perf_event_open (seccomp) or exhausted descriptors become that check's answer.
// --json prints the same as one JSON object.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <selfperf/perf_data_reader.hpp>
#include <selfperf/perf_data_writer.hpp>
#include <selfperf/sampler.hpp>
#include <selfperf/selfperf.hpp>

#include "doctor_advice.hpp"

namespace {

enum class Outcome { pass, fail, skip };

struct Check {
  std::string name;
  Outcome outcome;
  std::string detail;
  std::string fix;  // what to do when it failed, or advice when it passed with a caveat
};

// Runs fn on a new thread and rethrows here what it threw there (an exception leaving a std::thread's
// function calls std::terminate: a sampler that cannot attach under seccomp used to abort the doctor).
template <class Fn>
void on_thread(Fn&& fn) {
  std::exception_ptr error;
  std::thread([&] {
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
}

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
    return {"counters", Outcome::fail, "task-clock grew by " + std::to_string(d.count) + " ns over 20 ms of CPU", ""};
  return {"counters", Outcome::pass,
          "task-clock counted " + std::to_string(d.count / 1000000) + " ms of 20 ms busy; read path: " +
              std::string(group.read_path()),
          ""};
}

Check check_fast_path(const selfperf::CapabilityReport& caps) {
  if (!caps.hardware_events) return {"fast path", Outcome::skip, caps.fast_path_verdict(), ""};
  selfperf::CounterGroup group{"cycles", "instructions"};
  group.enable();
  (void)group.read();
  std::string path(group.read_path());
  if (path != "rdpmc") return {"fast path", Outcome::skip, "hardware events open but reads take " + path, ""};
  // rdpmc must agree with the kernel: fast ≤ read(2) ≤ fast, read back to back.
  int disagreements = 0;
  for (int i = 0; i < 100; ++i) {
    auto a = group.read();
    std::uint64_t buf[3 + 2 * 2];
    if (::read(group.leader_fd(), buf, sizeof buf) < 0) return {"fast path", Outcome::fail, "read(2) failed", ""};
    auto b = group.read();
    if (!(a[0].value <= buf[3] && buf[3] <= b[0].value)) ++disagreements;
  }
  if (disagreements) return {"fast path", Outcome::fail, std::to_string(disagreements) + "/100 rdpmc reads disagree with read(2)", ""};
  return {"fast path", Outcome::pass, "rdpmc taken; 100/100 reads agree with read(2)", ""};
}

Check check_sampling_threads() {
  selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 1000});
  sampler.start();
  std::atomic<pid_t> tids[2] = {0, 0};
  std::exception_ptr errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t, body = sampler.attached([&, t] {
                            tids[t] = static_cast<pid_t>(gettid());
                            burn_cpu(150'000'000);
                          })]() mutable {
      try {
        body();
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
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
  return {"sampling", ok ? Outcome::pass : Outcome::fail, detail, ""};
}

// Median depth of the samples taken in `body` with the given unwinder.
std::size_t sampled_depth(selfperf::Unwinder unwinder, const std::function<void()>& body, std::string& error) {
  try {
    selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 2000, .unwinder = unwinder, .max_depth = 128});
    sampler.start();
    on_thread(sampler.attached(body));
    sampler.stop();
    std::vector<std::size_t> depths;
    sampler.drain([&](const selfperf::Sample& s) { depths.push_back(s.frames.size()); });
    if (depths.empty()) return 0;
    std::nth_element(depths.begin(), depths.begin() + static_cast<long>(depths.size() / 2), depths.end());
    return depths[depths.size() / 2];
  } catch (const std::exception& e) {
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
  // Short frame-pointer stacks through code without frame pointers are expected, and what users meet in
  // distribution libraries: say what to do about it whenever they are short.
  std::string advice = error.empty() && fp_nofp < kDepth ? selfperf::doctor::unwinder_advice() : "";
  return {"unwinding", ok ? Outcome::pass : Outcome::fail, detail.str(), advice};
}

Check check_perf_data() {
  auto path = std::filesystem::temp_directory_path() / ("selfperf-doctor-" + std::to_string(getpid()) + ".data");
  std::uint64_t written = 0, read_back = 0;
  try {
    selfperf::Sampler sampler({.event = "", .period = 0, .frequency = 1000});
    sampler.start();
    on_thread(sampler.attached([] { recurse_with_fp(8, 100'000'000); }));
    sampler.stop();
    {
      perf_event_attr attr = selfperf::to_attr(selfperf::parse_event(sampler.event_name()));
      attr.exclude_kernel = sampler.samples_kernel() ? 0 : 1;
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
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return {"perf.data", Outcome::fail, e.what(), ""};
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  bool ok = written > 0 && written == read_back;
  return {"perf.data", ok ? Outcome::pass : Outcome::fail,
          std::to_string(written) + " samples written, " + std::to_string(read_back) + " read back", ""};
}

const char* word(Outcome o) { return o == Outcome::pass ? "pass" : o == Outcome::fail ? "FAIL" : "skipped"; }
const char* json_word(Outcome o) { return o == Outcome::pass ? "pass" : o == Outcome::fail ? "fail" : "skipped"; }

// Runs one check so that nothing it throws, here or on a thread it starts, ends the doctor: the failure is the
// check's result.
Check isolated(const char* name, const std::function<Check()>& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return {name, Outcome::fail, e.what(), ""};
  } catch (...) {
    return {name, Outcome::fail, "an exception that is not a std::exception", ""};
  }
}

void usage(std::FILE* to, const char* argv0) {
  std::fprintf(to,
               "usage: %s [--json] [--help]\n"
               "Reports what this machine lets a program measure about itself with selfperf (perf_event_open,\n"
               "perf_event_paranoid, seccomp, hardware PMU, rdpmc, descriptor limit, tracefs), then runs live\n"
               "checks: counting, the rdpmc fast path, sampling two threads, unwinding, perf.data round trip.\n"
               "Every \"no\" and every failed check comes with the command or setting that fixes it.\n"
               "  --json  the same as one JSON object\n"
               "  --help  this text\n"
               "Exit status: 0 when every check this machine can run passes (checks that need hardware it lacks\n"
               "are skipped, with the reason), 1 otherwise, 2 for a bad argument.\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) json = true;
    else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout, argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "selfperf-doctor: unknown argument '%s'\n", argv[i]);
      usage(stderr, argv[0]);
      return 2;
    }
  }
  const selfperf::doctor::Environment env = selfperf::doctor::observe();
  selfperf::CapabilityReport caps;
  std::vector<Check> checks;
  Check probed = isolated("probe", [&] {
    caps = selfperf::probe();
    return Check{"probe", Outcome::pass, "", ""};
  });
  if (probed.outcome != Outcome::pass) checks.push_back(probed);
  const auto table = selfperf::doctor::findings(caps, env);
  const std::string open_problem = selfperf::doctor::open_diagnosis(env, caps.perf_event_paranoid);
  const std::string open_fix = selfperf::doctor::open_fix(env, caps.perf_event_paranoid);

  checks.push_back(isolated("counters", check_counters));
  checks.push_back(isolated("fast path", [&] { return check_fast_path(caps); }));
  checks.push_back(isolated("sampling", check_sampling_threads));
  checks.push_back(isolated("unwinding", check_unwinding));
  checks.push_back(isolated("perf.data", check_perf_data));
  for (auto& c : checks)
    if (c.outcome == Outcome::fail) c.fix = selfperf::doctor::failure_fix(c.detail, env, c.fix);

  int failed = 0, skipped = 0;
  for (const auto& c : checks) {
    failed += c.outcome == Outcome::fail;
    skipped += c.outcome == Outcome::skip;
  }
  std::string verdict;
  if (!open_problem.empty()) verdict = "cannot measure: " + open_problem;
  else if (failed) verdict = std::to_string(failed) + " check(s) failed";
  else
    verdict = "healthy: " + std::to_string(checks.size() - static_cast<std::size_t>(skipped)) + " checks passed, " +
              std::to_string(skipped) + " skipped (" + caps.fast_path_verdict() + ")";
  const bool ok = failed == 0 && open_problem.empty();

  if (json) {
    nlohmann::ordered_json out;
    out["verdict"] = verdict;
    out["ok"] = ok;
    out["machine"] = caps.machine;
    out["perf_event_paranoid"] = caps.perf_event_paranoid;
    out["perf_event_open"] = caps.perf_event_open && env.open_errno == 0;
    if (env.open_errno) out["perf_event_open_errno"] = strerrorname_np(env.open_errno);
    out["seccomp_mode"] = env.seccomp_mode;
    out["hardware_events"] = caps.hardware_events;
    out["read_path"] = caps.fast_path_verdict();
    out["pmus"] = caps.pmus;
    out["environment"] = nlohmann::ordered_json::array();
    for (const auto& f : table)
      out["environment"].push_back({{"name", f.name}, {"value", f.value}, {"ok", f.ok}, {"fix", f.fix}});
    out["checks"] = nlohmann::ordered_json::array();
    for (const auto& c : checks)
      out["checks"].push_back({{"name", c.name}, {"result", json_word(c.outcome)}, {"detail", c.detail}, {"fix", c.fix}});
    // Replace, not throw, on bytes that are not UTF-8 (an error message quoting a file name, say).
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "selfperf-doctor: what this machine lets a program measure about itself\n\nenvironment\n";
    for (const auto& f : table) {
      std::printf("  %-36s %s\n", f.name.c_str(), f.value.c_str());
      if (!f.fix.empty()) std::printf("  %-36s %s %s\n", "", f.ok ? "note:" : "fix:", f.fix.c_str());
    }
    std::printf("  %-36s %s\n", "PMUs", [&] {
      std::string s;
      for (const auto& p : caps.pmus) s += (s.empty() ? "" : ", ") + p;
      return s.empty() ? std::string("none") : s;
    }().c_str());
    std::printf("  %-36s %s\n", "counter read path", caps.fast_path_verdict().c_str());
    std::cout << "\nlive checks\n";
    for (const auto& c : checks) {
      std::printf("  %-10s %-8s %s\n", c.name.c_str(), word(c.outcome), c.detail.c_str());
      if (!c.fix.empty())
        std::printf("  %-10s %-8s %s %s\n", "", "", c.outcome == Outcome::fail ? "fix:" : "advice:", c.fix.c_str());
    }
    std::cout << "\nselfperf-doctor: " << verdict << "\n";
    if (!open_fix.empty()) std::cout << "fix: " << open_fix << "\n";
  }
  return ok ? 0 : 1;
}
