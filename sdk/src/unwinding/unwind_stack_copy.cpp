// StackCopyUnwinder: libdwfl's frame walk (dwfl_getthread_frames) over a sample's registers and stack copy,
// the way perf's unwind-libdw does it, with one Dwfl per process kept across its samples (perf reports the
// modules again for each sample; re-reading the maps and the CFI per sample would cost more than the walk).
// The modules are reported as perf reports them, each ELF file at the bias its executable mapping implies,
// not by dwfl_linux_proc_report, which takes a file's first mapping for its start: a process that maps an
// ELF file itself (libelf maps the files it reads, rw-p at offset 0, often just below the loaded image)
// would shift the whole module.
#include "unwinding/unwind_stack_copy.hpp"

#include <asm/perf_regs.h>
#include <elfutils/libdwfl.h>
#include <linux/perf_event.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <set>
#include <utility>

#include "unwinding/elf_load_bias.hpp"

namespace selfperf::detail {
namespace {

#if defined(__x86_64__)
// DWARF register n of the x86-64 psABI (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, then 16: the return
// address column, rip) is perf register kPerfOfDwarf[n] (perf_regs.h numbers them in another order).
constexpr std::array<int, 17> kPerfOfDwarf = {
    PERF_REG_X86_AX, PERF_REG_X86_DX, PERF_REG_X86_CX,  PERF_REG_X86_BX,  PERF_REG_X86_SI,  PERF_REG_X86_DI,
    PERF_REG_X86_BP, PERF_REG_X86_SP, PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10, PERF_REG_X86_R11,
    PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15, PERF_REG_X86_IP};
constexpr int kPerfPc = PERF_REG_X86_IP;
constexpr int kPerfSp = PERF_REG_X86_SP;
#elif defined(__aarch64__)
// x0-x30 and sp are DWARF 0-31, numbered as perf numbers them; the pc has no DWARF number and is given apart.
constexpr std::array<int, 32> kPerfOfDwarf = [] {
  std::array<int, 32> a{};
  for (int i = 0; i < 32; ++i) a[static_cast<std::size_t>(i)] = i;
  return a;
}();
constexpr int kPerfPc = PERF_REG_ARM64_PC;
constexpr int kPerfSp = PERF_REG_ARM64_SP;
#else
#error "StackCopyUnwinder: no DWARF register table for this architecture (x86-64 and aarch64 have one)"
#endif

constexpr std::uint64_t bit(int perf_reg) { return std::uint64_t{1} << perf_reg; }

constexpr std::uint64_t kRegsMask = [] {
  std::uint64_t m = bit(kPerfPc) | bit(kPerfSp);
  for (int r : kPerfOfDwarf) m |= bit(r);
  return m;
}();

// The value of perf register `reg` in a REGS_USER block sampled with `mask` (one word per set bit, lowest
// bit first); false when the mask lacks it.
bool perf_register(std::span<const std::uint64_t> regs, std::uint64_t mask, int reg, std::uint64_t& out) {
  if (!(mask & bit(reg))) return false;
  const auto index = static_cast<std::size_t>(std::popcount(mask & (bit(reg) - 1)));
  if (index >= regs.size()) return false;
  out = regs[index];
  return true;
}

char* debuginfo_path = nullptr;  // libdwfl's default search path (.debug, /usr/lib/debug)

// Separate debug files by build ID only (/usr/lib/debug/.build-id): the walk needs .eh_frame, which the
// files themselves hold; .debug_frame from a -dbgsym package is taken where installed, nothing is downloaded.
const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_build_id_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

// The vdso: every 64-bit process of this kernel maps the same image, so this process's own (its auxv's
// AT_SYSINFO_EHDR, as long as the target's [vdso] mapping), copied into a memfd, stands for the target's,
// which /proc/PID/mem would give only with ptrace attach rights. Left out where that fails: the samples taken
// in it keep their ip.
void report_vdso(Dwfl* dwfl, const CodeMapping& target) {
  const auto* image = reinterpret_cast<const char*>(::getauxval(AT_SYSINFO_EHDR));
  const std::size_t size = target.len;
  if (image == nullptr || size == 0) return;
  const int fd = ::memfd_create("selfperf-vdso", MFD_CLOEXEC);
  if (fd < 0) return;
  bool ok = ::write(fd, image, size) == static_cast<ssize_t>(size);
  std::optional<std::uint64_t> bias;
  elf_version(EV_CURRENT);
  if (Elf* elf = ok ? elf_begin(fd, ELF_C_READ, nullptr) : nullptr) {
    bias = elf_load_bias(elf, target.start, target.pgoff);
    elf_end(elf);
  }
  // On success libdwfl owns the descriptor.
  ok = bias && dwfl_report_elf(dwfl, "[vdso]", "[vdso]", fd, *bias, false) != nullptr;
  if (!ok) ::close(fd);
}

}  // namespace

struct StackCopyUnwinder::Process {
  explicit Process(pid_t p) : pid(p) {}
  ~Process() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // A new Dwfl from `maps`; the old one stays where that fails.
  void report();

  pid_t pid;
  std::vector<CodeMapping> maps;  // oldest first
  Dwfl* dwfl = nullptr;
  bool stale = true;  // maps has mappings the Dwfl lacks
  std::string error;  // why there is no Dwfl

  // The sample being unwound, for the thread callbacks.
  pid_t tid = 0;
  std::array<Dwarf_Word, kPerfOfDwarf.size()> regs{};
  std::uint64_t pc = 0;
  std::uint64_t sp = 0;
  std::span<const std::byte> stack;
  bool copy_full = false;  // the kernel copied all it was asked to: the stack may go on above the copy
  std::vector<std::uint64_t>* frames = nullptr;
  std::size_t max_frames = 0;
  bool read_beyond_copy = false;  // a read just above a full copy failed: the stack is deeper than the copy
  bool read_outside = false;      // another read failed (below sp, far away: a frame the CFI does not cover)
  bool no_pc = false;             // dwfl_frame_pc failed on a frame
};

namespace {

using Process = StackCopyUnwinder::Process;

pid_t next_thread(Dwfl*, void* dwfl_arg, void** thread_argp) {
  if (*thread_argp != nullptr) return 0;  // one thread: the sample's
  *thread_argp = dwfl_arg;
  return static_cast<Process*>(dwfl_arg)->tid;
}

bool get_thread(Dwfl*, pid_t tid, void* dwfl_arg, void** thread_argp) {
  if (tid != static_cast<Process*>(dwfl_arg)->tid) return false;
  *thread_argp = dwfl_arg;
  return true;
}

// The stack copy is the whole memory the walk sees: the thread has run on since, so anything else read from
// the live process would belong to a later moment. CFI comes from the ELF files, which libdwfl reads itself.
bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* dwfl_arg) {
  auto* p = static_cast<Process*>(dwfl_arg);
  if (addr < p->sp || p->stack.size() < sizeof *result || addr - p->sp > p->stack.size() - sizeof *result) {
    // Within a copy's length above the copy: where a deeper stack's frames would be.
    const bool above = addr >= p->sp && addr - p->sp < 2 * p->stack.size() + 4096;
    (p->copy_full && above ? p->read_beyond_copy : p->read_outside) = true;
    return false;
  }
  std::memcpy(result, p->stack.data() + (addr - p->sp), sizeof *result);
  return true;
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
  auto* p = static_cast<Process*>(thread_arg);
  if (!dwfl_thread_state_registers(thread, 0, static_cast<unsigned>(p->regs.size()), p->regs.data()))
    return false;
  dwfl_thread_state_register_pc(thread, p->pc);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = nullptr,
    .thread_detach = nullptr,
};

int on_frame(Dwfl_Frame* frame, void* arg) {
  auto* p = static_cast<Process*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation)) {
    p->no_pc = true;
    return DWARF_CB_ABORT;
  }
  // As the kernel's call chains: a caller's frame is its return address (the symbolizers step back a byte).
  p->frames->push_back(pc);
  return p->frames->size() < p->max_frames ? DWARF_CB_OK : DWARF_CB_ABORT;
}

}  // namespace

void StackCopyUnwinder::Process::report() {
  stale = false;
  if (maps.empty()) {
    error = "no executable mapping of process " + std::to_string(pid) + " is known";
    return;
  }
  Dwfl* fresh = dwfl_begin(&kCallbacks);
  if (fresh == nullptr) {
    error = std::string("libdwfl could not start: ") + dwfl_errmsg(-1);
    return;
  }
  dwfl_report_begin(fresh);
  // Newest first: a mapping placed over older ones (a library unloaded, another loaded there) hides them.
  std::set<std::string> reported;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;
  for (auto m = maps.rbegin(); m != maps.rend(); ++m) {
    const std::uint64_t end = m->start + m->len;
    if (std::any_of(taken.begin(), taken.end(), [&](const auto& t) { return m->start < t.second && t.first < end; }))
      continue;
    taken.emplace_back(m->start, end);
    if (!reported.insert(m->path).second) continue;  // one executable mapping places the whole file
    if (m->path == "[vdso]") {
      report_vdso(fresh, *m);
    } else if (m->path.starts_with('/')) {
      if (auto bias = elf_load_bias(m->path, m->start, m->pgoff))
        dwfl_report_elf(fresh, m->path.c_str(), m->path.c_str(), -1, *bias, false);
    }
  }
  dwfl_report_end(fresh, nullptr, nullptr);
  // No ELF given: libdwfl takes the machine from the process's modules (a 32-bit process gets i386's rules).
  if (!dwfl_attach_state(fresh, nullptr, pid, &kThreadCallbacks, this)) {
    error = std::string("libdwfl cannot unwind process ") + std::to_string(pid) + ": " + dwfl_errmsg(-1);
    dwfl_end(fresh);
    return;
  }
  if (dwfl != nullptr) dwfl_end(dwfl);
  dwfl = fresh;
  error.clear();
}

std::uint64_t stack_copy_regs_mask() noexcept { return kRegsMask; }

void sample_stack_copies(perf_event_attr& attr, std::size_t copy) noexcept {
  attr.sample_type &= ~std::uint64_t{PERF_SAMPLE_CALLCHAIN};
  attr.sample_max_stack = 0;
  attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  attr.sample_regs_user = kRegsMask;
  attr.sample_stack_user = static_cast<std::uint32_t>(copy);
}

StackCopyUnwinder::StackCopyUnwinder(std::size_t max_frames) : max_frames_(max_frames < 1 ? 1 : max_frames) {
  frames_.reserve(max_frames_);
}

StackCopyUnwinder::~StackCopyUnwinder() = default;

StackCopyUnwinder::Process* StackCopyUnwinder::process(pid_t pid) {
  const auto it = processes_.find(pid);
  if (it == processes_.end()) return nullptr;
  Process* p = it->second.get();
  if (p->dwfl == nullptr && p->stale) p->report();
  return p;
}

void StackCopyUnwinder::add_process(pid_t pid, std::vector<CodeMapping> maps) {
  auto& slot = processes_[pid];
  slot = std::make_unique<Process>(pid);
  slot->maps = std::move(maps);
  slot->report();
}

void StackCopyUnwinder::add_mapping(pid_t pid, CodeMapping map) {
  const auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  it->second->maps.push_back(std::move(map));
  it->second->stale = true;
}

void StackCopyUnwinder::exec(pid_t pid) {
  const auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  Process& p = *it->second;
  p.maps.clear();
  if (p.dwfl != nullptr) dwfl_end(p.dwfl);  // the old image's modules: wrong for every sample from here on
  p.dwfl = nullptr;
  p.stale = true;
}

void StackCopyUnwinder::forget(pid_t pid) { processes_.erase(pid); }

std::span<const std::uint64_t> StackCopyUnwinder::ip_only(const SampleRecord& sample, std::string why) {
  frames_.clear();
  if (sample.has(PERF_SAMPLE_IP)) frames_.push_back(sample.ip);
  ++stats_.ip_only;
  stats_.last_ip_only = std::move(why);
  return frames_;
}

std::span<const std::uint64_t> StackCopyUnwinder::unwind(const SampleRecord& sample, std::uint64_t regs_mask) {
  if (sample.regs_user_abi == PERF_SAMPLE_REGS_ABI_NONE || sample.regs_user.empty())
    return ip_only(sample, "the sample has no user registers");
  if (sample.regs_user_abi != PERF_SAMPLE_REGS_ABI_64)
    return ip_only(sample, "a 32-bit process (only 64-bit ones are unwound from stack copies)");
  Process* p = process(static_cast<pid_t>(sample.pid));
  if (p == nullptr) return ip_only(sample, "process " + std::to_string(sample.pid) + " was not attached");
  if (!perf_register(sample.regs_user, regs_mask, kPerfPc, p->pc) ||
      !perf_register(sample.regs_user, regs_mask, kPerfSp, p->sp))
    return ip_only(sample, "the sampled registers lack the pc or the sp");
  for (std::size_t i = 0; i < kPerfOfDwarf.size(); ++i)
    if (!perf_register(sample.regs_user, regs_mask, kPerfOfDwarf[i], p->regs[i])) p->regs[i] = 0;
  p->tid = static_cast<pid_t>(sample.tid);
  p->stack = sample.stack_user.first(std::min<std::size_t>(sample.stack_user.size(), sample.stack_user_dyn_size));
  p->copy_full = p->stack.size() == sample.stack_user.size();
  p->frames = &frames_;
  p->max_frames = max_frames_;

  // A stale Dwfl (the process mapped code since) is re-read only when the walk fails with it: a library
  // loaded later is rarely on the stack, and reading the maps and the CFI again costs more than many walks.
  int rc = -1;
  for (bool retried = false;; retried = true) {
    frames_.clear();
    p->read_beyond_copy = false;
    p->read_outside = false;
    p->no_pc = false;
    if (p->dwfl == nullptr) break;
    rc = dwfl_getthread_frames(p->dwfl, p->tid, on_frame, p);
    if ((rc == 0 && !p->read_beyond_copy && !p->read_outside) || retried || !p->stale) break;
    p->report();
  }
  if (p->dwfl == nullptr) return ip_only(sample, p->error);
  // libdwfl takes a register it could not read for an undefined one, and an undefined return address for
  // the outermost frame: a walk that ran off the copy ends "cleanly" (rc 0), so a failed read is what tells.
  if (rc == 0 && !p->read_beyond_copy && !p->read_outside) {
    ++stats_.full;
    return frames_;
  }
  std::string why;
  if (p->no_pc)
    why = "a frame without a pc";
  else if (rc == DWARF_CB_ABORT)
    why = "more than " + std::to_string(max_frames_) + " frames";
  else if (p->read_beyond_copy)
    why = "a frame lies beyond the " + std::to_string(p->stack.size()) + "-byte stack copy";
  else if (p->read_outside)
    why = "a read outside the stack copy (" + std::to_string(p->stack.size()) +
          " bytes from sp): a frame its CFI does not cover, or a corrupt stack";
  else
    why = dwfl_errmsg(-1);
  if (frames_.size() < 2) return ip_only(sample, std::move(why));
  ++stats_.partial;
  if (p->read_beyond_copy) ++stats_.partial_beyond_copy;
  stats_.last_partial = std::move(why);
  return frames_;
}

}  // namespace selfperf::detail
