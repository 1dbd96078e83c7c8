// Guest-only check of the emulated arm64 machine itself, with no selfperf code: it proves that the kernel's
// PMU driver, perf_user_access and the EL0 counter registers behave as the library's arm64 fast path assumes,
// so a failure of the library's guest tests can be told apart from a machine that cannot pass them.
// The expectation depends on the pass the guest's /init runs it in (SELFPERF_GUEST_PASS):
//   root, nobody            the cycle counter is readable with `mrs` and agrees with read(2) on the same fd
//   root_user_access0       kernel.perf_user_access=0: the page gives index 0 (the reader must fall back)
//   nobody_paranoid3        perf_event_paranoid=3: opening fails with EACCES for an unprivileged user
// Exit status: 0 pass, 1 fail, 77 skip (no arm64 PMU with the rdpmc format term).
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <optional>
#include <string>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

struct Pmu {
  std::string name;
  std::uint32_t type = 0;
  int rdpmc_bit = -1;  // config1 bit of the `rdpmc` format term
  int long_bit = -1;   // config1 bit of the `long` format term
};

// "config1:1" -> 1; anything else (another config word, a range) -> -1.
int config1_bit(const std::string& format) {
  if (format.rfind("config1:", 0) != 0 || format.find('-') != std::string::npos) return -1;
  return std::atoi(format.c_str() + 8);
}

std::optional<Pmu> find_arm_pmu() {
  const char* root = "/sys/bus/event_source/devices";
  DIR* dir = opendir(root);
  if (dir == nullptr) return std::nullopt;
  std::optional<Pmu> found;
  while (dirent* entry = readdir(dir)) {
    const std::string base = std::string(root) + "/" + entry->d_name;
    Pmu pmu{entry->d_name, 0, config1_bit(read_line(base + "/format/rdpmc")),
            config1_bit(read_line(base + "/format/long"))};
    if (pmu.rdpmc_bit < 0) continue;
    pmu.type = static_cast<std::uint32_t>(std::strtoul(read_line(base + "/type").c_str(), nullptr, 10));
    found = pmu;
    break;
  }
  closedir(dir);
  return found;
}

int open_cycles(const Pmu& pmu, bool with_long) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = pmu.type;
  attr.config = 0x11;  // CPU_CYCLES, the architected event number
  attr.config1 = 1ull << pmu.rdpmc_bit;
  if (with_long && pmu.long_bit >= 0) attr.config1 |= 1ull << pmu.long_bit;
  attr.exclude_kernel = 1;  // what an unprivileged user at paranoid 2 may count
  attr.exclude_hv = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

std::uint64_t read_syscall(int fd) {
  std::uint64_t value = 0;
  if (read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return 0;
  return value;
}

std::uint64_t read_cycle_counter() {
  std::uint64_t value;
  asm volatile("isb; mrs %0, pmccntr_el0" : "=r"(value));
  return value;
}

struct PageRead {
  std::uint32_t index;
  std::uint64_t value;
};

// The kernel's documented seqlock read of the event's user page (include/uapi/linux/perf_event.h).
PageRead read_page(volatile perf_event_mmap_page* page) {
  for (;;) {
    const std::uint32_t seq = page->lock;
    asm volatile("" ::: "memory");
    PageRead result{page->index, static_cast<std::uint64_t>(page->offset)};
    const std::uint16_t width = page->pmc_width;
    if (result.index == 32) {  // the cycle counter, PMCCNTR_EL0 (index - 1 = 31)
      std::uint64_t count = read_cycle_counter();
      if (width < 64) count = static_cast<std::uint64_t>(static_cast<std::int64_t>(count << (64 - width)) >> (64 - width));
      result.value += count;
    }
    asm volatile("" ::: "memory");
    if (page->lock == seq) return result;
  }
}

void burn(int rounds) {
  for (int i = 0; i < rounds; ++i) asm volatile("" ::: "memory");
}

int run_rdpmc(const Pmu& pmu, bool expect_index) {
  for (bool with_long : {true, false}) {
    const int fd = open_cycles(pmu, with_long);
    if (fd < 0) {
      std::printf("cycles on %s: %s\n", pmu.name.c_str(), std::strerror(errno));
      check(false, "cycles opens");
      return 1;
    }
    void* map = mmap(nullptr, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), PROT_READ, MAP_SHARED, fd, 0);
    check(map != MAP_FAILED, "event page maps");
    if (map == MAP_FAILED) return 1;
    auto* page = static_cast<volatile perf_event_mmap_page*>(map);
    std::printf("%s long=%d: cap_user_rdpmc=%d cap_user_time=%d cap_user_time_zero=%d cap_user_time_short=%d "
                "pmc_width=%u\n",
                pmu.name.c_str(), with_long, static_cast<int>(page->cap_user_rdpmc),
                static_cast<int>(page->cap_user_time), static_cast<int>(page->cap_user_time_zero),
                static_cast<int>(page->cap_user_time_short), static_cast<unsigned>(page->pmc_width));
    check(page->cap_user_rdpmc == 1, "cap_user_rdpmc is set");
    check(page->pmc_width == (with_long && pmu.long_bit >= 0 ? 64u : 32u), "pmc_width follows the `long` term");
    bool between = true;
    std::uint32_t index = 0;
    for (int round = 0; round < 5; ++round) {
      burn(100000);
      const std::uint64_t before = read_syscall(fd);
      const PageRead fast = read_page(page);
      const std::uint64_t after = read_syscall(fd);
      index = fast.index;
      if (!expect_index) continue;
      std::printf("read(2) %llu <= mrs %llu <= read(2) %llu\n", static_cast<unsigned long long>(before),
                  static_cast<unsigned long long>(fast.value), static_cast<unsigned long long>(after));
      between = between && before <= fast.value && fast.value <= after && before < after;
    }
    if (expect_index) {
      check(index == 32, "the cycle counter's page index is 32 (PMCCNTR_EL0)");
      check(between, "each mrs read falls between two read(2)s of the same fd");
    } else {
      check(index == 0, "perf_user_access=0: the page index is 0, so a reader must use read(2)");
    }
    munmap(map, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
    close(fd);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  const char* pass_env = std::getenv("SELFPERF_GUEST_PASS");
  const std::string pass = pass_env != nullptr ? pass_env : "root";
  const std::optional<Pmu> pmu = find_arm_pmu();
  if (!pmu) {
    std::printf("skipped: no PMU with an `rdpmc` format term under /sys/bus/event_source/devices\n");
    return 77;
  }
  std::printf("pass %s, PMU %s type %u, rdpmc=config1:%d long=config1:%d, perf_event_paranoid %s, "
              "perf_user_access %s\n",
              pass.c_str(), pmu->name.c_str(), pmu->type, pmu->rdpmc_bit, pmu->long_bit,
              read_line("/proc/sys/kernel/perf_event_paranoid").c_str(),
              read_line("/proc/sys/kernel/perf_user_access").c_str());
  if (pass == "nobody_paranoid3") {
    const int fd = open_cycles(*pmu, true);
    const int error = errno;
    check(fd < 0 && error == EACCES, "paranoid 3: an unprivileged open fails with EACCES");
    return failures == 0 ? 0 : 1;
  }
  return run_rdpmc(*pmu, pass != "root_user_access0");
}
