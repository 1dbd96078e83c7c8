// selfperf record -p --call-graph dwarf: the attr, the rings and the summary for samples with stack copies.
#include "record_pid_dwarf.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "events/perf_syscall.hpp"

namespace selfperf::tool {
namespace {

constexpr int kCapIpcLock = 14;
// A sample beyond its stack copy: header, ids, time, cpu, period, the registers, the copy's two sizes.
constexpr std::size_t kSampleOverhead = 512;

// The locked memory this user's rings may take: perf_event_mlock_kb per online CPU, then RLIMIT_MEMLOCK
// (the kernel's perf_mmap rule); no limit with CAP_IPC_LOCK. Rings the user holds elsewhere are not known.
std::size_t ring_lock_budget() {
  if (detail::has_capability(kCapIpcLock)) return std::numeric_limits<std::size_t>::max();
  const std::string kb = detail::read_text_file("/proc/sys/kernel/perf_event_mlock_kb");
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::size_t budget = kb.empty() ? 516 * 1024 : std::strtoul(kb.c_str(), nullptr, 10) * 1024;
  budget *= static_cast<std::size_t>(std::max(1L, cpus));
  rlimit memlock{};
  if (::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0) {
    if (memlock.rlim_cur == RLIM_INFINITY) return std::numeric_limits<std::size_t>::max();
    budget += static_cast<std::size_t>(memlock.rlim_cur);
  }
  return budget;
}

}  // namespace

bool parse_stack_copy_size(const std::string& text, std::size_t& out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || *end != '\0' || v == 0 ||
      v % 8 != 0 || v > kMaxStackCopy)
    return false;
  out = v;
  return true;
}

std::size_t stack_copy_ring_pages(std::size_t copy, std::size_t threads) {
  // 16 pages, the kernel-call-chain rings, would hold 7 samples of 8 KiB, and the wakeup at a quarter ring
  // would come every other sample; 24 samples leave the reader 24 ms per thread at 999 Hz.
  const std::size_t page = static_cast<std::size_t>(::getpagesize());
  const std::size_t sample = copy + kSampleOverhead;
  const std::size_t want = std::bit_ceil((24 * sample + page - 1) / page);
  const std::size_t least = std::bit_ceil((sample + page - 1) / page);  // one sample
  // An unprivileged user has ~9 MiB here (516 KiB x 2 CPUs, then ulimit -l 8 MiB): 35 rings of 64 pages.
  // Leave room for threads started later: half as many again.
  const std::size_t budget = ring_lock_budget();
  const std::size_t rings = threads + threads / 2 + 4;
  const std::size_t fit = budget / rings / page;  // pages per ring, its header page included
  if (fit >= want + 1) return want;
  return std::max(least, fit > 2 ? std::bit_floor(fit - 1) : std::size_t{1});
}

void print_unwind_summary(const detail::StackCopyUnwindStats& u, std::uint64_t lost, std::size_t copy,
                          std::size_t ring_pages) {
  std::fprintf(stderr,
               "  call chains from stack copies: %llu samples unwound fully, %llu partially, %llu to their ip only\n",
               static_cast<unsigned long long>(u.full), static_cast<unsigned long long>(u.partial),
               static_cast<unsigned long long>(u.ip_only));
  if (u.partial > 0) std::fprintf(stderr, "  (why the last partial one stopped: %s)\n", u.last_partial.c_str());
  if (u.ip_only > 0) std::fprintf(stderr, "  (the last ip-only one: %s)\n", u.last_ip_only.c_str());
  if (u.partial_beyond_copy > 0 && copy < kMaxStackCopy)
    std::fprintf(stderr, "  (%llu stopped above the stack copy: copy more, as in --call-graph dwarf,%zu)\n",
                 static_cast<unsigned long long>(u.partial_beyond_copy), std::min(copy * 2, kMaxStackCopy));
  if (lost > 0)
    std::fprintf(stderr,
                 "  (samples with stack copies fill the rings (%zu pages per thread) fast: sample less often (-F) "
                 "or copy less (--call-graph dwarf,%zu) to lose fewer)\n",
                 ring_pages, std::max<std::size_t>(copy / 2 & ~std::size_t{7}, 8));
}

}  // namespace selfperf::tool
