#pragma once
// Unwinds samples of another process after the fact, as `perf record --call-graph dwarf` does: each sample
// carries the thread's user registers (PERF_SAMPLE_REGS_USER, stack_copy_regs_mask()) and a copy of the top of
// its stack (PERF_SAMPLE_STACK_USER), and libdwfl walks the frames with the CFI of the process's ELF files
// (one Dwfl per process, each file placed by its executable mapping as the caller reports them: /proc/PID/maps
// at the attach, MMAP2 records later), reading saved registers and return addresses from that copy alone.
// Not signal-safe (libdwfl allocates): for a recorder's read loop.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <linux/perf_event.h>
#include <sys/types.h>

#include "selfperf/record.hpp"

namespace selfperf::detail {

// attr.sample_regs_user for this architecture: every register that has a DWARF number (x86-64: the sixteen
// general registers and ip; aarch64: x0-x30, sp and pc), so that a CFA rule or a saved-register rule naming
// any of them can be followed, as perf samples them for --call-graph dwarf.
std::uint64_t stack_copy_regs_mask() noexcept;

// Makes a sampling attr take what unwind() needs instead of the kernel's call chain: the user registers
// (stack_copy_regs_mask) and `copy` bytes of stack (a multiple of 8), as perf record --call-graph dwarf does.
// The kernel-chain fields (CALLCHAIN, sample_max_stack) are cleared: the walk finds every user frame they
// would hold, and a user-only event has no other.
void sample_stack_copies(perf_event_attr& attr, std::size_t copy) noexcept;

// One executable mapping of a process (a line of /proc/PID/maps, an MMAP2 record): where a file's code lies.
struct CodeMapping {
  std::uint64_t start = 0;
  std::uint64_t len = 0;
  std::uint64_t pgoff = 0;
  std::string path;  // an ELF file, or "[vdso]"; anything else ("//anon": JIT code) has no CFI to read
};

struct StackCopyUnwindStats {
  std::uint64_t full = 0;     // unwound to the outermost frame (the CFI says the caller is undefined)
  std::uint64_t partial = 0;  // at least one caller, then the walk stopped (last_partial says why)
  std::uint64_t ip_only = 0;  // no caller found: only the sampled ip (last_ip_only says why)
  std::uint64_t partial_beyond_copy = 0;  // of the partial ones: stopped at a frame above the stack copy
  std::string last_partial;
  std::string last_ip_only;
};

class StackCopyUnwinder {
 public:
  explicit StackCopyUnwinder(std::size_t max_frames = 512);
  ~StackCopyUnwinder();
  StackCopyUnwinder(const StackCopyUnwinder&) = delete;
  StackCopyUnwinder& operator=(const StackCopyUnwinder&) = delete;

  // `pid` and its executable mappings at the attach. A sample of a process never added keeps its ip only.
  void add_process(pid_t pid, std::vector<CodeMapping> maps);
  // `pid` mapped code since: the Dwfl is built again with it when a walk next fails without it (a library
  // loaded later is rarely on the stack; building costs more than many walks). A newer mapping hides the
  // older ones it overlaps.
  void add_mapping(pid_t pid, CodeMapping map);
  // `pid` exec'd: its mappings are gone; the new image's come as add_mapping.
  void exec(pid_t pid);
  // `pid` exited and has no sample left to unwind: its Dwfl is freed.
  void forget(pid_t pid);

  // The sample's frames, leaf first, return addresses as the kernel's call chains hold them: unwound from
  // its registers and stack copy, else its ip alone (counted in stats()). Valid until the next call.
  std::span<const std::uint64_t> unwind(const SampleRecord& sample, std::uint64_t regs_mask);

  const StackCopyUnwindStats& stats() const noexcept { return stats_; }

  struct Process;  // a Dwfl of one process, with the sample being unwound (unwind_stack_copy.cpp)

 private:
  Process* process(pid_t pid);
  std::span<const std::uint64_t> ip_only(const SampleRecord& sample, std::string why);

  std::size_t max_frames_;
  std::vector<std::uint64_t> frames_;
  std::unordered_map<pid_t, std::unique_ptr<Process>> processes_;
  StackCopyUnwindStats stats_;
};

}  // namespace selfperf::detail
