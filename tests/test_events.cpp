// parse_event against perf's syntax: a fake PMU/tracefs tree built here, the real sysfs of this machine,
// every error message, and the parsed software events opened for real.
#include <doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace fs = std::filesystem;
using selfperf::Error;
using selfperf::EventRoots;
using selfperf::EventSpec;
using selfperf::parse_event;

namespace {

constexpr std::uint32_t kFakeCpuType = 4;
constexpr std::uint32_t kFakeUncoreType = 12;
constexpr std::uint64_t kSchedSwitchId = 316;

// A directory tree under /tmp removed on destruction (modes restored first so removal works unprivileged).
class TempTree {
 public:
  TempTree() {
    std::string tmpl = (fs::temp_directory_path() / "selfperf-events-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
  }
  ~TempTree() {
    std::error_code ec;
    for (const auto& p : locked_) fs::permissions(p, fs::perms::owner_all, ec);
    fs::remove_all(root_, ec);
  }
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const fs::path& root() const { return root_; }
  void write(const fs::path& rel, std::string_view content) const {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << content << "\n";
  }
  void mkdir(const fs::path& rel) const { fs::create_directories(root_ / rel); }
  // Mode 000: only a process with CAP_DAC_OVERRIDE may enter it.
  void lock(const fs::path& rel) {
    fs::permissions(root_ / rel, fs::perms::none);
    locked_.push_back(root_ / rel);
  }

 private:
  fs::path root_;
  std::vector<fs::path> locked_;
};

// The fake sysfs and tracefs the brief describes: a `cpu` PMU with Intel-like format terms and aliases, two
// uncore PMUs sharing an alias, one PMU with a broken type file, and a tracefs with sched tracepoints.
struct FakeTrees {
  TempTree tree;
  EventRoots roots;

  FakeTrees() {
    tree.write("pmus/cpu/type", std::to_string(kFakeCpuType));
    tree.write("pmus/cpu/format/event", "config:0-7");
    tree.write("pmus/cpu/format/umask", "config:8-15");
    tree.write("pmus/cpu/format/cmask", "config:24-31");
    tree.write("pmus/cpu/format/inv", "config:23");
    tree.write("pmus/cpu/format/ldlat", "config1:0-15");
    tree.write("pmus/cpu/format/offcore", "config:32-35,40-43");  // split range
    tree.write("pmus/cpu/format/frontend", "config2:0-23");
    tree.write("pmus/cpu/format/weird", "config3:0-3");  // a word EventSpec does not carry
    tree.write("pmus/cpu/events/mem-loads", "event=0xcd,umask=0x1,ldlat=3");
    tree.write("pmus/cpu/events/mem-loads.scale", "1");  // perf's companion file, not an alias
    tree.write("pmus/cpu/events/instructions", "event=0xc0");
    tree.write("pmus/cpu/events/ldlat-loads", "event=0xcd,umask=0x1,ldlat=?");
    tree.write("pmus/cpu/events/bad-alias", "event=0xcd,bogus=1");
    tree.write("pmus/cpu/events/cas-count-read", "event=0x4,umask=0x3");
    for (const char* imc : {"uncore_imc_0", "uncore_imc_1"}) {
      tree.write(fs::path("pmus") / imc / "type", std::to_string(kFakeUncoreType));
      tree.write(fs::path("pmus") / imc / "format/event", "config:0-7");
      tree.write(fs::path("pmus") / imc / "format/umask", "config:8-15");
      tree.write(fs::path("pmus") / imc / "events/cas-count-write", "event=0x4,umask=0xc");
    }
    tree.write("pmus/uncore_imc_0/events/clockticks", "event=0x0,umask=0x1");
    tree.write("pmus/broken/type", "not-a-number");
    tree.write("tracefs/events/sched/sched_switch/id", std::to_string(kSchedSwitchId));
    tree.write("tracefs/events/sched/sched_wakeup/id", "317");
    tree.write("tracefs/events/sched/u/id", "999");  // a tracepoint whose name looks like a modifier
    tree.write("tracefs/events/irq/irq_handler_entry/id", "42");
    roots.pmus = tree.root() / "pmus";
    roots.tracefs = {tree.root() / "no-such-tracefs", tree.root() / "tracefs"};
  }
};

std::string error_of(std::string_view text, const EventRoots& roots = EventRoots{}) {
  try {
    EventSpec spec = parse_event(text, roots);
    return "<parsed as " + spec.name + ">";
  } catch (const Error& e) {
    return e.what();
  }
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// CHECKs that parsing `text` fails with a message holding every one of `parts`.
void check_error(std::string_view text, const EventRoots& roots,
                 std::initializer_list<std::string_view> parts) {
  std::string msg = error_of(text, roots);
  INFO("event: ", std::string(text), "\nmessage: ", msg);
  CHECK_FALSE(contains(msg, "<parsed as"));
  for (std::string_view part : parts) CHECK_MESSAGE(contains(msg, part), "missing: ", std::string(part));
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  in >> s;
  return s;
}

bool running_as_root() { return ::geteuid() == 0; }

// Runs `body` in a child that dropped to uid/gid 65534 and returns what it printed to the pipe; lets a root
// run check what an unprivileged user sees.
std::string output_as_nobody(const std::function<std::string()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      out = "<could not drop privileges>";
    } else {
      out = body();
    }
    ssize_t unused = ::write(fds[1], out.data(), out.size());
    (void)unused;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  return out;
}

std::uint64_t read_counter(int fd) {
  std::uint64_t value = 0;
  REQUIRE(::read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value));
  return value;
}

}  // namespace

// ------------------------------------------------------------------------------------------ generic names

TEST_CASE("generic hardware names, with perf's alternative spellings") {
  struct Case {
    const char* text;
    std::uint64_t config;
    const char* canonical;
  };
  const Case cases[] = {
      {"cycles", PERF_COUNT_HW_CPU_CYCLES, "cycles"},
      {"cpu-cycles", PERF_COUNT_HW_CPU_CYCLES, "cycles"},
      {"instructions", PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
      {"cache-references", PERF_COUNT_HW_CACHE_REFERENCES, "cache-references"},
      {"cache-misses", PERF_COUNT_HW_CACHE_MISSES, "cache-misses"},
      {"branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "branches"},
      {"branch-instructions", PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "branches"},
      {"branch-misses", PERF_COUNT_HW_BRANCH_MISSES, "branch-misses"},
      {"bus-cycles", PERF_COUNT_HW_BUS_CYCLES, "bus-cycles"},
      {"ref-cycles", PERF_COUNT_HW_REF_CPU_CYCLES, "ref-cycles"},
      {"stalled-cycles-frontend", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, "stalled-cycles-frontend"},
      {"idle-cycles-frontend", PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, "stalled-cycles-frontend"},
      {"stalled-cycles-backend", PERF_COUNT_HW_STALLED_CYCLES_BACKEND, "stalled-cycles-backend"},
      {"idle-cycles-backend", PERF_COUNT_HW_STALLED_CYCLES_BACKEND, "stalled-cycles-backend"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    EventSpec s = parse_event(c.text);
    CHECK(s.type == PERF_TYPE_HARDWARE);
    CHECK(s.config == c.config);
    CHECK(s.config1 == 0);
    CHECK(s.name == c.canonical);
    CHECK(s.pmu == "cpu");
    CHECK_FALSE(s.explicit_privilege);
    CHECK(s.needs_hardware_pmu());
  }
}

TEST_CASE("software names, with perf's alternative spellings") {
  struct Case {
    const char* text;
    std::uint64_t config;
    const char* canonical;
  };
  const Case cases[] = {
      {"cpu-clock", PERF_COUNT_SW_CPU_CLOCK, "cpu-clock"},
      {"task-clock", PERF_COUNT_SW_TASK_CLOCK, "task-clock"},
      {"page-faults", PERF_COUNT_SW_PAGE_FAULTS, "page-faults"},
      {"faults", PERF_COUNT_SW_PAGE_FAULTS, "page-faults"},
      {"minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN, "minor-faults"},
      {"major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ, "major-faults"},
      {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES, "context-switches"},
      {"cs", PERF_COUNT_SW_CONTEXT_SWITCHES, "context-switches"},
      {"cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS, "cpu-migrations"},
      {"migrations", PERF_COUNT_SW_CPU_MIGRATIONS, "cpu-migrations"},
      {"alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS, "alignment-faults"},
      {"emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS, "emulation-faults"},
      {"dummy", PERF_COUNT_SW_DUMMY, "dummy"},
      {"bpf-output", PERF_COUNT_SW_BPF_OUTPUT, "bpf-output"},
      {"cgroup-switches", PERF_COUNT_SW_CGROUP_SWITCHES, "cgroup-switches"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    EventSpec s = parse_event(c.text);
    CHECK(s.type == PERF_TYPE_SOFTWARE);
    CHECK(s.config == c.config);
    CHECK(s.name == c.canonical);
    CHECK(s.pmu == "software");
    CHECK_FALSE(s.needs_hardware_pmu());
  }
  // Generic names are case-sensitive, as in perf's lexer; the error points at the right spelling.
  check_error("Task-Clock", EventRoots{}, {"'Task-Clock'", "task-clock"});
}

TEST_CASE("hw-cache names: cache | op << 8 | result << 16, perf's spellings, case-insensitive") {
  auto cfg = [](std::uint64_t cache, std::uint64_t op, std::uint64_t result) {
    return cache | (op << 8) | (result << 16);
  };
  constexpr std::uint64_t kLoad = PERF_COUNT_HW_CACHE_OP_READ, kStore = PERF_COUNT_HW_CACHE_OP_WRITE,
                          kPrefetch = PERF_COUNT_HW_CACHE_OP_PREFETCH;
  constexpr std::uint64_t kAccess = PERF_COUNT_HW_CACHE_RESULT_ACCESS,
                          kMiss = PERF_COUNT_HW_CACHE_RESULT_MISS;
  struct Case {
    const char* text;
    std::uint64_t config;
    const char* canonical;
  };
  const Case cases[] = {
      {"L1-dcache-load-misses", cfg(PERF_COUNT_HW_CACHE_L1D, kLoad, kMiss), "L1-dcache-load-misses"},
      {"L1-dcache-loads", cfg(PERF_COUNT_HW_CACHE_L1D, kLoad, kAccess), "L1-dcache-loads"},
      {"L1-dcache-stores", cfg(PERF_COUNT_HW_CACHE_L1D, kStore, kAccess), "L1-dcache-stores"},
      {"L1-dcache-prefetches", cfg(PERF_COUNT_HW_CACHE_L1D, kPrefetch, kAccess), "L1-dcache-prefetches"},
      {"L1-dcache-prefetch-misses", cfg(PERF_COUNT_HW_CACHE_L1D, kPrefetch, kMiss),
       "L1-dcache-prefetch-misses"},
      {"L1-icache-load-misses", cfg(PERF_COUNT_HW_CACHE_L1I, kLoad, kMiss), "L1-icache-load-misses"},
      {"LLC-loads", cfg(PERF_COUNT_HW_CACHE_LL, kLoad, kAccess), "LLC-loads"},
      {"LLC-store-misses", cfg(PERF_COUNT_HW_CACHE_LL, kStore, kMiss), "LLC-store-misses"},
      {"dTLB-load-misses", cfg(PERF_COUNT_HW_CACHE_DTLB, kLoad, kMiss), "dTLB-load-misses"},
      {"iTLB-loads", cfg(PERF_COUNT_HW_CACHE_ITLB, kLoad, kAccess), "iTLB-loads"},
      {"branch-load-misses", cfg(PERF_COUNT_HW_CACHE_BPU, kLoad, kMiss), "branch-load-misses"},
      {"branch-loads", cfg(PERF_COUNT_HW_CACHE_BPU, kLoad, kAccess), "branch-loads"},
      {"node-stores", cfg(PERF_COUNT_HW_CACHE_NODE, kStore, kAccess), "node-stores"},
      // perf's other spellings and defaults (no op = load, no result = access), any case
      {"l1d-misses", cfg(PERF_COUNT_HW_CACHE_L1D, kLoad, kMiss), "L1-dcache-load-misses"},
      {"L1-data-read-miss", cfg(PERF_COUNT_HW_CACHE_L1D, kLoad, kMiss), "L1-dcache-load-misses"},
      {"l1-dcache-LOAD-MISSES", cfg(PERF_COUNT_HW_CACHE_L1D, kLoad, kMiss), "L1-dcache-load-misses"},
      {"L2-loads", cfg(PERF_COUNT_HW_CACHE_LL, kLoad, kAccess), "LLC-loads"},
      {"LLC-misses-store", cfg(PERF_COUNT_HW_CACHE_LL, kStore, kMiss), "LLC-store-misses"},
      {"Data-TLB-speculative-read-access", cfg(PERF_COUNT_HW_CACHE_DTLB, kPrefetch, kAccess),
       "dTLB-prefetches"},
      {"LLC", cfg(PERF_COUNT_HW_CACHE_LL, kLoad, kAccess), "LLC-loads"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    EventSpec s = parse_event(c.text);
    CHECK(s.type == PERF_TYPE_HW_CACHE);
    CHECK(s.config == c.config);
    CHECK(s.name == c.canonical);
    CHECK(s.pmu == "cpu");
  }
  // A part given twice, or a dangling '-', is not a hw-cache name.
  check_error("L1-dcache-load-load", EventRoots{}, {"unknown event 'L1-dcache-load-load'"});
  check_error("LLC-loads-", EventRoots{}, {"'LLC-loads-'", "LLC-loads"});
}

TEST_CASE("known_event_names: every name the brief lists, no duplicates, each parses to itself") {
  auto names = selfperf::known_event_names();
  std::set<std::string> unique(names.begin(), names.end());
  CHECK(unique.size() == names.size());
  for (const char* must : {"cycles",
                           "cpu-cycles",
                           "instructions",
                           "cache-references",
                           "cache-misses",
                           "branches",
                           "branch-instructions",
                           "branch-misses",
                           "bus-cycles",
                           "ref-cycles",
                           "stalled-cycles-frontend",
                           "idle-cycles-frontend",
                           "stalled-cycles-backend",
                           "idle-cycles-backend",
                           "cpu-clock",
                           "task-clock",
                           "page-faults",
                           "faults",
                           "minor-faults",
                           "major-faults",
                           "context-switches",
                           "cs",
                           "cpu-migrations",
                           "migrations",
                           "alignment-faults",
                           "emulation-faults",
                           "dummy",
                           "L1-dcache-load-misses",
                           "LLC-loads",
                           "dTLB-load-misses",
                           "branch-load-misses",
                           "L1-dcache-prefetches"}) {
    CHECK_MESSAGE(unique.count(must) == 1, must);
  }
  for (const auto& name : names) {
    INFO(name);
    EventSpec s = parse_event(name);
    // The canonical name is itself a name that parses to the same event.
    EventSpec again = parse_event(s.name);
    CHECK(again.type == s.type);
    CHECK(again.config == s.config);
    CHECK(again.name == s.name);
  }
}

TEST_CASE("raw events rNNNN") {
  EventSpec s = parse_event("r01c2");
  CHECK(s.type == PERF_TYPE_RAW);
  CHECK(s.config == 0x1c2);
  CHECK(s.name == "r1c2");
  CHECK(s.pmu == "cpu");
  CHECK(parse_event("rABCDef").config == 0xabcdef);
  CHECK(parse_event("rffffffffffffffff").config == UINT64_MAX);
  EventSpec m = parse_event("r1c2:upp");
  CHECK(m.config == 0x1c2);
  CHECK(m.precise_ip == 2);
  CHECK(m.exclude_kernel);
  CHECK(m.name == "r1c2:upp");
  check_error("r10000000000000000", EventRoots{}, {"'r10000000000000000'", "64 bits", "16 hex digits"});
  // Not hex: not a raw event, and no silent zero.
  check_error("r12g", EventRoots{}, {"unknown event 'r12g'"});
}

// ---------------------------------------------------------------------------------------------- modifiers

TEST_CASE("modifiers: any of u/k/h excludes every level not named, p counts precision, G/H, I") {
  struct Case {
    const char* text;
    bool eu, ek, eh;
    unsigned precise;
    bool named;
    const char* canonical;
  };
  const Case cases[] = {
      {"cycles:u", false, true, true, 0, true, "cycles:u"},
      {"cycles:k", true, false, true, 0, true, "cycles:k"},
      {"cycles:h", true, true, false, 0, true, "cycles:h"},
      {"cycles:uk", false, false, true, 0, true, "cycles:uk"},
      {"cycles:ku", false, false, true, 0, true, "cycles:uk"},
      {"cycles:uh", false, true, false, 0, true, "cycles:uh"},
      {"cycles:ukh", false, false, false, 0, true, "cycles:ukh"},
      {"cycles:p", false, false, false, 1, false, "cycles:p"},
      {"cycles:pp", false, false, false, 2, false, "cycles:pp"},
      {"cycles:ppp", false, false, false, 3, false, "cycles:ppp"},
      {"cycles:pup", false, true, true, 2, true, "cycles:upp"},
      {"instructions:kppp", true, false, true, 3, true, "instructions:kppp"},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    EventSpec s = parse_event(c.text);
    CHECK(s.type == PERF_TYPE_HARDWARE);
    CHECK(s.exclude_user == c.eu);
    CHECK(s.exclude_kernel == c.ek);
    CHECK(s.exclude_hv == c.eh);
    CHECK(s.precise_ip == c.precise);
    CHECK(s.explicit_privilege == c.named);
    CHECK(s.name == c.canonical);
  }
  EventSpec guest = parse_event("cycles:G");
  CHECK(guest.exclude_host);
  CHECK_FALSE(guest.exclude_guest);
  EventSpec host = parse_event("cycles:H");
  CHECK(host.exclude_guest);
  CHECK_FALSE(host.exclude_host);
  EventSpec both = parse_event("cycles:GH");
  CHECK_FALSE(both.exclude_guest);
  CHECK_FALSE(both.exclude_host);
  EventSpec idle = parse_event("cpu-clock:I");
  CHECK(idle.exclude_idle);
  CHECK_FALSE(idle.explicit_privilege);
  EventSpec sw = parse_event("page-faults:u");
  CHECK(sw.type == PERF_TYPE_SOFTWARE);
  CHECK(sw.exclude_kernel);
  CHECK(sw.explicit_privilege);
}

TEST_CASE("malformed modifiers name the character and the accepted modifiers") {
  const EventRoots real;
  check_error("cycles:x", real, {"'cycles:x'", "'x'", "accepted modifiers", "u (user)", "ppp"});
  check_error("cycles:uu", real, {"'cycles:uu'", "'u' given twice", "accepted modifiers"});
  check_error("cycles:pppp", real, {"'cycles:pppp'", "more than three 'p'", "accepted modifiers"});
  check_error("cycles:", real, {"'cycles:'", "nothing after ':'", "accepted modifiers"});
  check_error("cycles:u:k", real, {"'cycles:u:k'", "':'", "accepted modifiers"});
  check_error("task-clock:U", real, {"'task-clock:U'", "'U'", "accepted modifiers"});
  check_error(":u", real, {"':u'", "nothing before ':'"});
}

// ---------------------------------------------------------------------------------------------- fake PMU

TEST_CASE("pmu/term=value/ against a fake cpu PMU: bits placed into config, config1, config2") {
  FakeTrees fake;
  EventSpec s = parse_event("cpu/event=0x3c,umask=0x0/", fake.roots);
  CHECK(s.type == kFakeCpuType);
  CHECK(s.config == 0x3c);
  CHECK(s.config1 == 0);
  CHECK(s.name == "cpu/event=0x3c,umask=0x0/");
  CHECK(s.pmu == "cpu");
  CHECK(s.needs_hardware_pmu());

  // Decimal and hex, a bare term meaning 1, each field at its own bits.
  EventSpec all =
      parse_event("cpu/event=60,umask=0x1,cmask=2,inv,ldlat=0x1234,frontend=0xabcdef/", fake.roots);
  CHECK(all.config == (0x3cULL | (0x1ULL << 8) | (2ULL << 24) | (1ULL << 23)));
  CHECK(all.config1 == 0x1234);
  CHECK(all.config2 == 0xabcdef);
  CHECK(all.name == "cpu/event=0x3c,umask=0x1,cmask=0x2,inv,ldlat=0x1234,frontend=0xabcdef/");

  // A split field takes the value's low bits in its lowest range.
  EventSpec split = parse_event("cpu/offcore=0xbc/", fake.roots);
  CHECK(split.config == ((0xcULL << 32) | (0xbULL << 40)));
  CHECK(parse_event("cpu/offcore=0xff/", fake.roots).config == ((0xfULL << 32) | (0xfULL << 40)));

  // Literal words, then format terms on top of them, in the order written.
  EventSpec lit = parse_event("cpu/config=0x1234500,config1=7,config2=0x9/", fake.roots);
  CHECK(lit.config == 0x1234500);
  CHECK(lit.config1 == 7);
  CHECK(lit.config2 == 9);
  CHECK(parse_event("cpu/config=0xffff,event=0x1/", fake.roots).config == 0xff01);
  CHECK(parse_event("cpu/event=0x1,config=0xffff/", fake.roots).config == 0xffff);
  CHECK(parse_event("cpu/config=18446744073709551615/", fake.roots).config == UINT64_MAX);
}

TEST_CASE("modifiers after a PMU event's closing slash") {
  FakeTrees fake;
  EventSpec u = parse_event("cpu/event=0x3c/u", fake.roots);
  CHECK(u.config == 0x3c);
  CHECK(u.exclude_kernel);
  CHECK(u.exclude_hv);
  CHECK_FALSE(u.exclude_user);
  CHECK(u.explicit_privilege);
  CHECK(u.name == "cpu/event=0x3c/u");
  EventSpec colon = parse_event("cpu/event=0x3c/:uk", fake.roots);
  CHECK_FALSE(colon.exclude_kernel);
  CHECK(colon.exclude_hv);
  CHECK(colon.name == "cpu/event=0x3c/uk");
  CHECK(parse_event("cpu/event=0x3c/pp", fake.roots).precise_ip == 2);
  check_error("cpu/event=0x3c/x", fake.roots, {"'cpu/event=0x3c/x'", "'x'", "accepted modifiers"});
  check_error("cpu/event=0x3c/:", fake.roots, {"nothing after ':'"});
  check_error("cpu/event=0x3c/u/", fake.roots, {"'cpu/event=0x3c/u/'", "unexpected '/'"});
}

TEST_CASE("an alias inside the slashes expands from events/, explicit terms override it in any order") {
  FakeTrees fake;
  EventSpec s = parse_event("cpu/mem-loads/", fake.roots);
  CHECK(s.type == kFakeCpuType);
  CHECK(s.config == (0xcdULL | (0x1ULL << 8)));
  CHECK(s.config1 == 3);
  CHECK(s.name == "cpu/mem-loads/");
  for (const char* text : {"cpu/mem-loads,ldlat=5/", "cpu/ldlat=5,mem-loads/"}) {
    INFO(text);
    EventSpec o = parse_event(text, fake.roots);
    CHECK(o.config == (0xcdULL | (0x1ULL << 8)));
    CHECK(o.config1 == 5);
  }
  EventSpec umask = parse_event("cpu/mem-loads,umask=0x2/u", fake.roots);
  CHECK(umask.config == (0xcdULL | (0x2ULL << 8)));
  CHECK(umask.exclude_kernel);
  CHECK(umask.name == "cpu/mem-loads,umask=0x2/u");
  // `term=?` in an alias: the user must give it.
  check_error("cpu/ldlat-loads/", fake.roots,
              {"'ldlat-loads'", "needs a value for 'ldlat'", "cpu/ldlat-loads,ldlat=N/"});
  EventSpec given = parse_event("cpu/ldlat-loads,ldlat=7/", fake.roots);
  CHECK(given.config1 == 7);
  CHECK(given.config == (0xcdULL | (0x1ULL << 8)));
}

TEST_CASE("bare PMU aliases: found in sysfs, generic names win, cpu wins, ambiguity is an error") {
  FakeTrees fake;
  EventSpec s = parse_event("mem-loads", fake.roots);
  CHECK(s.type == kFakeCpuType);
  CHECK(s.config == (0xcdULL | (0x1ULL << 8)));
  CHECK(s.config1 == 3);
  CHECK(s.pmu == "cpu");
  CHECK(s.name == "cpu/mem-loads/");
  EventSpec u = parse_event("mem-loads:u", fake.roots);
  CHECK(u.exclude_kernel);
  CHECK(u.config1 == 3);
  CHECK(u.name == "cpu/mem-loads/u");

  // `instructions` is also a cpu alias here: the generic name wins, the alias is still reachable.
  EventSpec generic = parse_event("instructions", fake.roots);
  CHECK(generic.type == PERF_TYPE_HARDWARE);
  CHECK(generic.config == PERF_COUNT_HW_INSTRUCTIONS);
  EventSpec alias = parse_event("cpu/instructions/", fake.roots);
  CHECK(alias.type == kFakeCpuType);
  CHECK(alias.config == 0xc0);

  // Only in one uncore PMU: that one.
  EventSpec clock = parse_event("clockticks", fake.roots);
  CHECK(clock.type == kFakeUncoreType);
  CHECK(clock.pmu == "uncore_imc_0");
  CHECK(clock.config == (0x1ULL << 8));
  // In two uncore PMUs: the user has to pick.
  check_error("cas-count-write", fake.roots,
              {"'cas-count-write'", "uncore_imc_0, uncore_imc_1", "uncore_imc_0/cas-count-write/"});
  EventSpec picked = parse_event("uncore_imc_1/cas-count-write/", fake.roots);
  CHECK(picked.pmu == "uncore_imc_1");
  CHECK(picked.config == (0x4ULL | (0xcULL << 8)));
  // perf's .scale/.unit companions are not aliases.
  check_error("mem-loads.scale", fake.roots, {"unknown event 'mem-loads.scale'"});
}

TEST_CASE("PMU event errors name the text and what would be accepted") {
  FakeTrees fake;
  const EventRoots& r = fake.roots;
  check_error(
      "gpu/event=1/", r,
      {"unknown PMU 'gpu'", "'gpu/event=1/'", "broken, cpu, uncore_imc_0, uncore_imc_1", "did you mean cpu"});
  check_error("cpu/evnt=1/", r,
              {"unknown term 'evnt'", "'cpu/evnt=1/'", "cmask, event, frontend, inv, ldlat, offcore, umask",
               "config, config1, config2", "nearest: event"});
  check_error("cpu/mem-lods/", r, {"unknown term 'mem-lods'", "mem-loads", "nearest: mem-loads"});
  check_error("cpu/event=0x100/", r, {"0x100", "'event'", "config:0-7", "8 bits wide", "max 0xff"});
  check_error("cpu/ldlat=65536/", r, {"0x10000", "'ldlat'", "config1:0-15", "16 bits wide", "max 0xffff"});
  check_error("cpu/inv=2/", r, {"0x2", "'inv'", "1 bit wide", "max 0x1"});
  check_error("cpu/offcore=0x100/", r, {"'offcore'", "config:32-35,40-43", "8 bits wide", "max 0xff"});
  check_error("cpu/event=1", r, {"unterminated", "'cpu/event=1'", "closing '/'", "pmu/term=value"});
  check_error("cpu/", r, {"unterminated", "'cpu/'"});
  check_error("cpu//", r, {"no terms", "'cpu//'", "format"});
  check_error("/event=1/", r, {"no PMU name", "'/event=1/'", "cpu"});
  check_error("cpu/event=zz/", r, {"'zz'", "'event'", "not a number", "0x"});
  check_error("cpu/event=/", r, {"''", "not a number"});
  check_error("cpu/event=99999999999999999999/", r, {"'99999999999999999999'", "not a number", "64-bit"});
  check_error("cpu/event=1,event=2/", r, {"'event' given twice", "'cpu/event=1,event=2/'"});
  check_error("cpu/event=1,,umask=1/", r, {"empty term", "'cpu/event=1,,umask=1/'"});
  check_error("cpu/config/", r, {"'config'", "needs a value"});
  check_error("cpu/mem-loads=1/", r, {"'mem-loads'", "alias", "takes no value", "cpu/mem-loads/"});
  check_error("cpu/mem-loads,ldlat-loads/", r, {"two aliases", "'mem-loads'", "'ldlat-loads'"});
  check_error("cpu/weird=1/", r, {"'weird'", "config3:0-3", "config1:0-3"});
  check_error("cpu/bad-alias/", r, {"unknown term 'bogus'", "alias 'bad-alias'", "event=0xcd,bogus=1"});
  check_error("broken/config=1/", r, {"'broken/config=1/'", "not-a-number", "type"});
  // Names that could leave the sysfs directory are refused before any lookup.
  check_error("../x/event=1/", r, {"malformed PMU name '..'"});
  check_error("cpu/../", r, {"malformed term '..'"});
  check_error("c*u/event=1/", r, {"malformed PMU name 'c*u'", "cpu"});
}

// ---------------------------------------------------------------------------------------------- tracepoints

TEST_CASE("tracepoints subsys:name through a fake tracefs; modifiers after them") {
  FakeTrees fake;
  EventSpec s = parse_event("sched:sched_switch", fake.roots);
  CHECK(s.type == PERF_TYPE_TRACEPOINT);
  CHECK(s.config == kSchedSwitchId);
  CHECK(s.pmu == "tracepoint");
  CHECK(s.name == "sched:sched_switch");
  CHECK(s.counts_in_kernel_only());
  CHECK_FALSE(s.needs_hardware_pmu());
  CHECK(parse_event("irq:irq_handler_entry", fake.roots).config == 42);

  EventSpec k = parse_event("sched:sched_switch:k", fake.roots);
  CHECK(k.config == kSchedSwitchId);
  CHECK(k.exclude_user);
  CHECK_FALSE(k.exclude_kernel);
  CHECK(k.name == "sched:sched_switch:k");
  // Excluding the kernel would make a tracepoint read 0 forever: refused, with the reason.
  check_error("sched:sched_switch:u", fake.roots, {"'sched:sched_switch:u'", "never count", "':k'"});
  check_error("sched:sched_switch:x", fake.roots, {"'x'", "accepted modifiers"});

  // `cycles:u` stays an event with a modifier; `sched:u` is a tracepoint because sched is a subsystem.
  EventSpec cyc = parse_event("cycles:u", fake.roots);
  CHECK(cyc.type == PERF_TYPE_HARDWARE);
  EventSpec tp = parse_event("sched:u", fake.roots);
  CHECK(tp.type == PERF_TYPE_TRACEPOINT);
  CHECK(tp.config == 999);
}

TEST_CASE("tracepoint errors: unknown names with the nearest ones, tracefs not mounted") {
  FakeTrees fake;
  check_error("sched:sched_swich", fake.roots,
              {"unknown tracepoint 'sched_swich'", "'sched:sched_swich'", "nearest: sched_switch"});
  check_error("schedd:sched_switch", fake.roots, {"unknown tracepoint subsystem 'schedd'", "nearest: sched"});
  check_error("sched:a*b", fake.roots, {"malformed tracepoint", "'sched:a*b'", "subsys:name"});

  EventRoots unmounted = fake.roots;
  unmounted.tracefs = {fake.tree.root() / "no-such-tracefs", fake.tree.root() / "pmus"};
  check_error(
      "sched:sched_switch", unmounted,
      {"'sched:sched_switch'", "tracefs is not mounted", "mount -t tracefs nodev /sys/kernel/tracing"});
  unmounted.tracefs.clear();
  check_error("sched:sched_switch", unmounted, {"mount -t tracefs nodev /sys/kernel/tracing"});
  // A typo of an event name that also fails as a tracepoint gets both answers.
  check_error("cylces:x", unmounted, {"tracefs", "'cylces'", "cycles"});
  check_error("cyclez:u", fake.roots, {"unknown event 'cyclez'", "'cyclez:u'", "cycles"});
}

TEST_CASE("tracefs mounted but not readable: the error says permission") {
  FakeTrees fake;
  fake.tree.mkdir("locked/events/sched/sched_switch");
  fake.tree.write("locked/events/sched/sched_switch/id", "316");
  fake.tree.lock("locked/events");
  // The unprivileged user must be able to reach the tree's root to meet the locked directory.
  fs::permissions(fake.tree.root(), fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  EventRoots roots = fake.roots;
  roots.tracefs = {fake.tree.root() / "locked"};
  auto attempt = [&roots] { return error_of("sched:sched_switch", roots); };
  std::string msg = running_as_root() ? output_as_nobody(attempt) : attempt();
  INFO(msg);
  CHECK(contains(msg, "'sched:sched_switch'"));
  CHECK(contains(msg, "not readable by this user"));
  CHECK(contains(msg, "permission denied"));
  CHECK(contains(msg, "mode=755"));
}

// ------------------------------------------------------------------------------------------ hostile input

TEST_CASE("empty, oversized, binary and list input: clear errors") {
  const EventRoots real;
  check_error("", real, {"empty event name", "accepted"});
  check_error(" \t\n", real, {"empty event name"});
  CHECK(parse_event("  cycles:u \n").name == "cycles:u");  // surrounding whitespace is not part of the name
  std::string huge(5000, 'a');
  check_error(huge, real, {"5000 bytes", "too long", "4096"});
  check_error(std::string("cyc\x01les", 7), real, {"'\\x01'", "offset 3", "printable ASCII"});
  check_error("cycles instructions", real, {"' '", "offset 6"});
  check_error("cycles,instructions", real, {"'cycles,instructions'", "one event"});
  check_error("{cycles,instructions}", real, {"group"});
  check_error("cyclez", real, {"unknown event 'cyclez'", "nearest known names: cycles"});
  check_error("instrucions:u", real, {"unknown event 'instrucions'", "'instrucions:u'", "instructions"});
  check_error("L1-dcache-load-mises", real, {"'L1-dcache-load-mises'", "L1-dcache-load-misses"});
  check_error("xyzzy", real, {"unknown event 'xyzzy'", "accepted", "rNNNN", "pmu/term=value", "subsys:name"});
  check_error("cycles=1", real, {"'cycles=1'", "cycles"});
  FakeTrees fake;
  check_error("mem-laods", fake.roots, {"unknown event 'mem-laods'", "mem-loads"});  // suggestion from sysfs
}

TEST_CASE("random syntax soup never crashes and never yields an unnamed or unstable event") {
  FakeTrees fake;
  // Pieces of real syntax glued at random, plus stray characters: many parse, many are near misses.
  const std::vector<std::string> pieces = {"cpu/",
                                           "/",
                                           ",",
                                           ":",
                                           "=",
                                           "event=0x3c",
                                           "umask=1",
                                           "inv",
                                           "ldlat=5",
                                           "offcore=0xbc",
                                           "config=0x12",
                                           "mem-loads",
                                           "ldlat-loads",
                                           "cycles",
                                           "instructions",
                                           "task-clock",
                                           "L1-dcache",
                                           "-load",
                                           "-misses",
                                           "LLC",
                                           "r1c2",
                                           "sched",
                                           "sched_switch",
                                           "u",
                                           "k",
                                           "h",
                                           "p",
                                           "G",
                                           "H",
                                           "I",
                                           "?",
                                           "..",
                                           "{",
                                           "0x",
                                           "x",
                                           "uncore_imc_0/",
                                           "cas-count-write",
                                           "9999999999999999999999"};
  std::mt19937 rng(12345);  // fixed seed: the same inputs every run
  int parsed = 0, rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    std::size_t count = 1 + rng() % 6;
    for (std::size_t j = 0; j < count; ++j) text += pieces[rng() % pieces.size()];
    try {
      EventSpec s = parse_event(text, fake.roots);
      ++parsed;
      INFO(text);
      REQUIRE_FALSE(s.name.empty());
      EventSpec again = parse_event(s.name, fake.roots);  // canonical names parse to the same event
      CHECK(again.type == s.type);
      CHECK(again.config == s.config);
      CHECK(again.config1 == s.config1);
      CHECK(again.config2 == s.config2);
      CHECK(again.name == s.name);
    } catch (const Error& e) {
      ++rejected;
      REQUIRE(std::strlen(e.what()) > 0);
    }
  }
  MESSAGE("random inputs: ", parsed, " parsed, ", rejected, " rejected with an Error");
  CHECK(rejected > 0);
  CHECK(parsed > 0);
}

// ---------------------------------------------------------------------------------------------- real sysfs

TEST_CASE("real sysfs: dynamic PMU syntax on the PMUs this machine has") {
  const EventRoots real;
  const fs::path pmus = real.pmus;
  REQUIRE(fs::exists(pmus / "software"));
  EventSpec sw = parse_event("software/config=2/u");
  CHECK(sw.type == std::stoul(read_file(pmus / "software/type")));
  CHECK(sw.type == PERF_TYPE_SOFTWARE);
  CHECK(sw.config == PERF_COUNT_SW_PAGE_FAULTS);
  CHECK(sw.pmu == "software");
  CHECK(sw.name == "software/config=0x2/u");
  CHECK_FALSE(sw.needs_hardware_pmu());
  if (fs::exists(pmus / "tracepoint"))
    CHECK(parse_event("tracepoint/config=1/").type == PERF_TYPE_TRACEPOINT);

  // Unknown PMU: the message lists what is there.
  check_error("nosuchpmu/event=1/", real, {"unknown PMU 'nosuchpmu'", "software"});
  if (!fs::exists(pmus / "cpu")) {
    check_error("cpu/event=0x3c/u", real, {"unknown PMU 'cpu'", "software", "no hardware PMU"});
  }
  check_error("software/event=1/", real,
              {"unknown term 'event'", "no format terms", "config, config1, config2"});

  // Every PMU with format terms: a value that fits parses into the right type, one bit too many does not.
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(pmus)) {
    std::string pmu = entry.path().filename().string();
    if (!fs::exists(entry.path() / "format")) continue;
    auto type = static_cast<std::uint32_t>(std::stoul(read_file(entry.path() / "type")));
    for (const auto& term : fs::directory_iterator(entry.path() / "format")) {
      std::string name = term.path().filename().string();
      std::string fmt = read_file(term.path());
      INFO(pmu, "/", name, " = ", fmt);
      EventSpec one = parse_event(pmu + "/" + name + "=1/");
      CHECK(one.type == type);
      CHECK(one.pmu == pmu);
      CHECK((one.config | one.config1 | one.config2) != 0);  // 1 lands on the field's lowest bit
      ++checked;
    }
  }
  MESSAGE("format terms checked on the real sysfs: ", checked);

  // The msr PMU's aliases differ by vendor and model (Intel: tsc, aperf, mperf, smi, …; an AMD EPYC VM: tsc
  // alone), so each alias this machine lists is checked, none is assumed.
  if (fs::exists(pmus / "msr/events")) {
    auto msr_type = static_cast<std::uint32_t>(std::stoul(read_file(pmus / "msr/type")));
    int aliases = 0;
    for (const auto& entry : fs::directory_iterator(pmus / "msr/events")) {
      std::string alias = entry.path().filename().string();
      if (alias.find('.') != std::string::npos) continue;  // tsc.scale, tsc.unit: attributes, not events
      INFO("msr alias ", alias);
      EventSpec bare = parse_event(alias);  // a bare alias found in the real sysfs
      CHECK(bare.type == msr_type);
      CHECK(bare.pmu == "msr");
      CHECK(bare.name == "msr/" + alias + "/");
      CHECK(parse_event("msr/" + alias + "/k").exclude_user);
      ++aliases;
    }
    CHECK(aliases > 0);
    MESSAGE("msr aliases checked on the real sysfs: ", aliases);
    check_error("msr/event=0x1/x", real, {"'x'", "accepted modifiers"});
  } else {
    MESSAGE("skipped the msr alias checks: no msr PMU here");
  }
}

TEST_CASE("real software events parsed here open with perf_event_open, user-only") {
  int opened = 0;
  for (const auto& name : selfperf::known_event_names()) {
    EventSpec s = parse_event(name);
    if (s.type != PERF_TYPE_SOFTWARE) continue;
    INFO(name);
    perf_event_attr attr = selfperf::to_attr(s);
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    CHECK_NOTHROW(selfperf::detail::open_event(attr, s.name, 0, -1, -1));
    ++opened;
  }
  CHECK(opened >= 15);
  // The dynamic-PMU spelling of page-faults opens too, and `:u` is already user-only as parsed.
  EventSpec dyn = parse_event("software/config=2/u");
  CHECK_NOTHROW(selfperf::detail::open_event(selfperf::to_attr(dyn), dyn.name, 0, -1, -1));
}

TEST_CASE("page-faults:u as parsed counts the faults of freshly touched pages") {
  EventSpec s = parse_event("page-faults:u");
  selfperf::detail::Fd fd = selfperf::detail::open_event(selfperf::to_attr(s), s.name, 0, -1, -1);
  constexpr std::size_t kPages = 64;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mem = ::mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  REQUIRE(::ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0) == 0);
  auto* bytes = static_cast<volatile char*>(mem);
  for (std::size_t i = 0; i < kPages; ++i) bytes[i * page] = 1;
  REQUIRE(::ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0) == 0);
  std::uint64_t faults = read_counter(fd.get());
  ::munmap(mem, kPages * page);
  CHECK(faults >= kPages);
}

TEST_CASE("real tracefs: sched:sched_switch resolves to tracefs's id and counts a context switch") {
  const fs::path tracing = "/sys/kernel/tracing";
  if (!running_as_root()) {
    // Unprivileged: the parser must explain why, whichever way this machine is set up.
    std::string msg = error_of("sched:sched_switch");
    INFO(msg);
    CHECK(contains(msg, "'sched:sched_switch'"));
    CHECK(
        (contains(msg, "mount -t tracefs nodev /sys/kernel/tracing") || contains(msg, "permission denied")));
    MESSAGE("skipped the real tracepoint open: needs root (ran the unprivileged error check instead)");
    return;
  }
  std::error_code ec;
  if (!fs::exists(tracing / "events/sched/sched_switch/id", ec)) {
    // Mount it in a mount namespace of our own, so the machine's mounts stay as they were.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("nodev", tracing.c_str(), "tracefs", 0, nullptr) != 0) {
      MESSAGE("skipped the real tracepoint checks: cannot mount tracefs here: ", std::strerror(errno));
      return;
    }
  }
  REQUIRE(fs::exists(tracing / "events/sched/sched_switch/id"));
  EventSpec s = parse_event("sched:sched_switch");
  CHECK(s.type == PERF_TYPE_TRACEPOINT);
  CHECK(s.config == std::stoull(read_file(tracing / "events/sched/sched_switch/id")));
  check_error("sched:sched_swich", EventRoots{}, {"nearest: sched_switch"});

  selfperf::detail::Fd fd = selfperf::detail::open_event(selfperf::to_attr(s), s.name, 0, -1, -1);
  REQUIRE(::ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0) == 0);
  // Blocking in nanosleep always switches this task out: a deterministic context switch, not a race.
  timespec ts{0, 1000000};
  ::nanosleep(&ts, nullptr);
  REQUIRE(::ioctl(fd.get(), PERF_EVENT_IOC_DISABLE, 0) == 0);
  CHECK(read_counter(fd.get()) >= 1);
}
