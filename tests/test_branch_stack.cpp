// Branch stacks (PERF_SAMPLE_BRANCH_STACK): synthetic samples written to perf.data (file and pipe mode, with
// and without the hardware index), read back by our reader and by Debian's perf script -F ip,brstack, which
// must show exactly the from/to pairs and flags written; and the error where a machine records none (this VM:
// no LBR), which names the branch stack and the remedy.
#include <doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "events/perf_syscall.hpp"
#include "perf_data_test_util.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/process_watcher.hpp"

using namespace selfperf;

namespace {

perf_branch_entry branch(std::uint64_t from, std::uint64_t to, bool mispred, bool predicted, std::uint16_t cycles,
                         bool in_tx = false, bool abort = false) {
  perf_branch_entry b{};
  b.from = from;
  b.to = to;
  b.mispred = mispred;
  b.predicted = predicted;
  b.in_tx = in_tx;
  b.abort = abort;
  b.cycles = cycles;
  return b;
}

EventDescription branch_event(bool hw_index) {
  EventDescription ev;
  ev.name = "cycles:u";
  ev.attr.type = PERF_TYPE_HARDWARE;
  ev.attr.config = PERF_COUNT_HW_CPU_CYCLES;
  ev.attr.sample_period = 100003;
  ev.attr.exclude_kernel = 1;
  ev.attr.sample_type = PERF_SAMPLE_BRANCH_STACK;
  ev.attr.branch_sample_type =
      PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_USER | (hw_index ? PERF_SAMPLE_BRANCH_HW_INDEX : 0);
  return ev;
}

// Three samples: two branches, none, and three (one of each flag).
const std::vector<std::vector<perf_branch_entry>> kStacks = {
    {branch(0x401010, 0x402000, true, false, 17), branch(0x402040, 0x401020, false, true, 3)},
    {},
    {branch(0x403000, 0x404000, false, false, 0), branch(0x404010, 0x403008, true, false, 250, true),
     branch(0x7f0000001000, 0x7f0000002000, false, true, 1, false, true)},
};
const std::uint64_t kIps[] = {0x401234, 0x402345, 0x403456};

void write_samples(const std::filesystem::path& path, bool hw_index, bool pipe) {
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  options.cmdline = {"test_branch_stack"};
  options.pipe = pipe;
  PerfDataWriter w(path, {branch_event(hw_index)}, options);
  w.write_comm(4321, 4321, "branchy");
  for (std::size_t i = 0; i < kStacks.size(); ++i) {
    Sample s;
    s.pid = 4321;
    s.tid = 4321;
    s.time = 1'000'000 + i * 1000;
    s.period = 100003;
    s.frames = std::span<const std::uint64_t>(&kIps[i], 1);
    s.branches = kStacks[i];
    s.branch_hw_index = 10 + i;
    w.write_sample(s, 0);
  }
  w.close();
}

// Calls check(path, hw_index, pipe) on a file of the samples above written each way: file and pipe mode, with
// and without the hardware index.
template <class Check>
void for_each_file(Check check) {
  test::TempDir dir;
  for (bool hw_index : {false, true}) {
    for (bool pipe : {false, true}) {
      CAPTURE(hw_index);
      CAPTURE(pipe);
      const auto path = dir / (std::string("branches") + (hw_index ? "-idx" : "") + (pipe ? ".pipe" : ".data"));
      write_samples(path, hw_index, pipe);
      check(path, hw_index, pipe);
    }
  }
}

// What perf script -F brstack prints for an entry: FROM/TO/M|P|-/X|-/A|-/CYCLES (then /TYPE).
std::string perf_text(const perf_branch_entry& b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "0x%llx/0x%llx/%c/%c/%c/%u", static_cast<unsigned long long>(b.from),
                static_cast<unsigned long long>(b.to), b.mispred ? 'M' : b.predicted ? 'P' : '-', b.in_tx ? 'X' : '-',
                b.abort ? 'A' : '-', static_cast<unsigned>(b.cycles));
  return buf;
}

// perf script's samples: each the ip in hex, then one FROM/TO/M|P|-/X|-/A|-/CYCLES word
// per branch (perf 6.1 prints them on the next line, each with a last /TYPE field, dropped here).
std::vector<std::vector<std::string>> script_samples(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (w.find('/') == std::string::npos) {
      // The ip; in pipe mode perf also prints its symbol ([unknown] here), which is not hex.
      if (w.find_first_not_of("0123456789abcdef") == std::string::npos) out.push_back({w});
      continue;
    }
    if (out.empty()) continue;
    std::size_t at = 0;
    for (int field = 0; field < 6 && at != std::string::npos; ++field) at = w.find('/', at + 1);
    out.back().push_back(w.substr(0, at));
  }
  return out;
}

}  // namespace

TEST_CASE("branch stacks are written to perf.data and read back exactly, hardware index included") {
  for_each_file([](const std::filesystem::path& path, bool hw_index, bool pipe) {
    PerfDataReader r{path};
    REQUIRE(r.events().size() == 1);
    const auto& attr = r.events()[0].attr;
    CHECK((attr.sample_type & PERF_SAMPLE_BRANCH_STACK) != 0);
    CHECK(attr.branch_sample_type == branch_event(hw_index).attr.branch_sample_type);
    if (!pipe) CHECK(r.has_feature(PerfFeature::branch_stack));
    std::size_t i = 0;
    PerfRecord rec;
    while (r.next_record(rec)) {
      if (rec.type != PERF_RECORD_SAMPLE) continue;
      REQUIRE(i < kStacks.size());
      const DecodedSample s = r.decode_sample(rec);
      CHECK(s.ip == kIps[i]);
      REQUIRE(s.branches.size() == kStacks[i].size());
      for (std::size_t k = 0; k < s.branches.size(); ++k) {
        CAPTURE(k);
        CHECK(perf_text(s.branches[k]) == perf_text(kStacks[i][k]));
        CHECK(s.branches[k].type == kStacks[i][k].type);
      }
      CHECK(s.branch_hw_index == (hw_index ? 10 + i : 0));
      ++i;
    }
    CHECK(i == kStacks.size());
  });
}

TEST_CASE("perf script -F ip,brstack shows the branches written, pairs and flags") {
  if (!test::perf_available()) {
    MESSAGE("skipped: perf is not installed (apt-get install linux-perf)");
    return;
  }
  for_each_file([](const std::filesystem::path& path, bool, bool pipe) {
    const std::string input = pipe ? " -i - < " + path.string() : " -i " + path.string();
    const std::string text = test::run("perf script -F ip,brstack" + input + " 2>&1");
    INFO("perf script said:\n", text);
    REQUIRE(text.find("<exit status non-zero>") == std::string::npos);
    const auto samples = script_samples(text);
    REQUIRE(samples.size() == kStacks.size());
    for (std::size_t i = 0; i < kStacks.size(); ++i) {
      CAPTURE(i);
      char ip[32];
      std::snprintf(ip, sizeof ip, "%llx", static_cast<unsigned long long>(kIps[i]));
      std::vector<std::string> expected{ip};
      for (const auto& b : kStacks[i]) expected.push_back(perf_text(b));
      CHECK(samples[i] == expected);
    }
  });
}

TEST_CASE("asking for a branch stack where the machine records none names it and the remedy") {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.sample_period = 1000000;
  attr.exclude_kernel = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_BRANCH_STACK;
  attr.branch_sample_type = PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_USER;

  // A software event never has one, on any machine: the kernel answers EOPNOTSUPP.
  try {
    detail::open_event(attr, "cpu-clock", 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    FAIL("cpu-clock opened with PERF_SAMPLE_BRANCH_STACK");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(e.errno_value() == EOPNOTSUPP);
    CHECK(what.find("cannot open event 'cpu-clock'") != std::string::npos);
    CHECK(what.find("branch stack (PERF_SAMPLE_BRANCH_STACK)") != std::string::npos);
    CHECK(what.find("sample a hardware event (cycles:u)") != std::string::npos);
    CHECK(what.find("Sample without the branch stack") != std::string::npos);
  }

  // Through the watcher, as a user of another process meets it: one line naming the thread and the cause.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  {
    ProcessWatcher watcher(attr, "cpu-clock");
    try {
      watcher.add(child);
      FAIL("the watcher opened cpu-clock with PERF_SAMPLE_BRANCH_STACK");
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("process " + std::to_string(child) + ", thread ") == 0);
      CHECK(what.find("branch stack") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
    CHECK(watcher.channels() == 0);
  }
  ::kill(child, SIGKILL);
  REQUIRE(::waitpid(child, nullptr, 0) == child);

  // A hardware event: where the PMU records branches (LBR, BRBE) it opens; here (no PMU) it gives ENOENT.
  perf_event_attr cycles = attr;
  cycles.type = PERF_TYPE_HARDWARE;
  cycles.config = PERF_COUNT_HW_CPU_CYCLES;
  detail::Fd fd(detail::perf_event_open(cycles, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd) {
    MESSAGE("this machine records branch stacks: the hardware error path is checked on its message only");
  } else {
    const int err = errno;
    const std::string what = detail::open_error_message(err, cycles, "cycles:u");
    INFO(what);
    CHECK(what.find("branch stack (PERF_SAMPLE_BRANCH_STACK)") != std::string::npos);
    CHECK(what.find("Sample without the branch stack") != std::string::npos);
  }
  CHECK(detail::open_error_message(ENOENT, cycles, "cycles:u").find("no hardware PMU at all") != std::string::npos);
  CHECK(detail::open_error_message(EOPNOTSUPP, cycles, "cycles:u").find("its PMU has no branch records") !=
        std::string::npos);
  perf_event_attr no_type = cycles;
  no_type.branch_sample_type = PERF_SAMPLE_BRANCH_USER;
  CHECK(detail::open_error_message(EINVAL, no_type, "cycles:u").find("needs a branch type") != std::string::npos);
}
