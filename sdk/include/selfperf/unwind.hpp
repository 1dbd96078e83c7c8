#pragma once
// Stack unwinders that are safe to call from a signal handler (no allocation, no locks once warmed, bounded
// depth). Each writes instruction addresses into `out`, leaf first (out[0] is the interrupted IP), and returns
// how many it wrote. The sampler uses them; anything else that holds a ucontext_t may too.
#include <cstddef>
#include <cstdint>
#include <span>

#include <ucontext.h>

namespace selfperf {

enum class Unwinder {
  frame_pointer,  // walk the rbp chain; needs code built with -fno-omit-frame-pointer
  libunwind,      // DWARF CFI (.eh_frame), no frame pointers needed: unwind_dwarf walks the frames whose rules
                  // are offsets from rsp/rbp (aarch64: sp/x29, the return address in x30 or its save slot;
                  // nearly all compiled code) from a cache of those rules; a sample
                  // that meets anything else (a PLT stub, a signal trampoline, code without an FDE) is unwound
                  // by libunwind's fast trace (unw_backtrace) instead, so the result is libunwind's
  kernel,         // the kernel's PERF_SAMPLE_CALLCHAIN (frame-pointer based for user space), no user unwinding;
                  // read from the ring buffer (selfperf::RingBuffer) in the handler, markers stripped by
                  // strip_context_markers (selfperf/record.hpp)
};

// The extent of one thread's stack: [low, high). Frames outside it are never read.
struct StackBounds {
  std::uintptr_t low = 0;
  std::uintptr_t high = 0;

  bool contains(std::uintptr_t addr, std::size_t bytes) const noexcept {
    return addr >= low && addr <= high && high - addr >= bytes;
  }
  // From pthread_getattr_np (reads /proc/self/maps for the main thread: allocates, not signal-safe).
  // Throws selfperf::Error when the bounds cannot be determined.
  static StackBounds of_this_thread();
};

// The registers an unwind starts from.
struct RegisterState {
  std::uint64_t ip = 0;
  std::uint64_t sp = 0;
  std::uint64_t fp = 0;
  std::uint64_t lr = 0;  // aarch64's link register (x30): a leaf's return address until it saves it; 0 on x86-64

  static RegisterState from(const ucontext_t& uc) noexcept;
};

// Where one loaded object's DWARF unwind tables lie: its .eh_frame_hdr, and the mapped segment holding it
// (every byte an evaluator reads must lie in [begin, end)). All zero where the object has none.
struct EhFrameSection {
  std::uint64_t hdr = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// The executable segments loaded in this process, for recognizing return addresses without touching
// unmapped memory. Snapshots are immutable and never freed, so a handler may use one while a newer one is
// built (dlopen after the snapshot: its code is simply not recognized).
class CodeMap {
 public:
  static constexpr std::size_t kMaxSegments = 512;
  // The newest snapshot, rebuilt through dl_iterate_phdr when objects were loaded or unloaded since the last
  // one. Not signal-safe (takes the loader lock, allocates); call it at thread attach.
  static const CodeMap* refresh();
  // The newest snapshot without rebuilding (signal-safe); null before the first refresh().
  static const CodeMap* current() noexcept;

  bool contains(std::uint64_t addr) const noexcept;
  // addr lies in a mapped code segment right after a call instruction (checked within that segment).
  // Most values a sampled stack holds (stack addresses, small integers) fall outside all code: rejected
  // inline, before any search.
  bool is_return_address(std::uint64_t addr) const noexcept {
    return addr >= lowest_ && addr < highest_ && follows_call(addr);
  }
  std::size_t size() const noexcept { return count_; }
  // The unwind tables of the object whose code holds addr (signal-safe; all zero outside every segment).
  EhFrameSection eh_frame_of(std::uint64_t addr) const noexcept;

 private:
  struct Segment {
    std::uint64_t begin;
    std::uint64_t end;
  };
  const Segment* find(std::uint64_t addr) const noexcept;
  bool follows_call(std::uint64_t addr) const noexcept;
  Segment segments_[kMaxSegments];
  EhFrameSection eh_frames_[kMaxSegments];  // of segments_[i]'s object
  std::size_t count_ = 0;
  std::uint64_t lowest_ = 0;   // [lowest_, highest_) spans every segment
  std::uint64_t highest_ = 0;
  unsigned long long generation_ = 0;
};

// Frame-pointer walk that never faults: every frame must lie inside `stack`, be 8-byte aligned, and lie
// strictly above the previous one; the walk stops at the first frame that does not.
//
// Leaf recovery: when the sample lands where the function has not (or no longer) set up its frame, rbp still
// points at the caller's caller and the direct caller would be skipped. The walk reads the instruction bytes at
// IP and, when they are `endbr64`, `push %rbp` or `ret` (entry / exit: return address at [sp]) or
// `mov %rsp,%rbp` (rbp just pushed: return address at [sp+8]), records that return address as frame 1. Code
// bytes are only read within IP's page (mapped, since the CPU just executed it). Elsewhere, and only with a
// `code` map, [sp] is taken as frame 1 when it is a return address (in a code segment, right after a call)
// other than the one the frame chain yields next: that is a leaf that never sets up a frame (gcc 12 omits it in
// leaves that use no stack, even with -mno-omit-leaf-frame-pointer). A frameless function that has pushed
// registers or locals still loses its caller; that is the limit of the method.
std::size_t unwind_frame_pointer(const RegisterState& regs, const StackBounds& stack,
                                 std::span<std::uint64_t> out, const CodeMap* code = nullptr) noexcept;

// DWARF CFI walk from the registers, for signal handlers: each frame's rule (CFA = rsp or rbp + offset,
// return address and saved rbp at offsets from the CFA; on aarch64 sp or x29, and x30 itself for the
// interrupted frame, return addresses stripped of pointer-authentication codes) comes from a process-wide cache, filled on a miss by
// evaluating the object's .eh_frame in place (no lock, no allocation; a few microseconds, once per address).
// Every address derived from the stack is checked against `stack` before it is read. `complete` is false when
// a frame needed a rule beyond those offsets or had no FDE (or `code` is null): the frames are then only a
// prefix, and unwind_libunwind should redo the sample. A stack that ends (undefined return address, as at
// _start and a thread's clone) or turns invalid, or `out` filling up, is complete.
struct DwarfWalk {
  std::size_t frames = 0;
  bool complete = false;
};
DwarfWalk unwind_dwarf(const RegisterState& regs, const StackBounds& stack, std::span<std::uint64_t> out,
                       const CodeMap* code) noexcept;

// libunwind's fast path (unw_backtrace: per-thread trace cache, no cursor/unw_step loop) from inside a
// signal handler: it traces from the handler itself through the signal trampoline and the frames above the
// interrupted IP (`interrupted` = the ucontext's registers) are returned. Call prepare_libunwind_this_thread()
// before the first sample on a thread. A trace-cache miss (an address never unwound before on this thread)
// makes libunwind look the address up through dl_iterate_phdr, which takes the loader's recursive lock, and
// may grow its cache with mmap; warm-up keeps that off the common path but cannot rule it out. Because of that
// lock, fork() (once the process's set-up is made) waits for every thread to be out of libunwind, and a call
// that meets a fork under way returns 0 at once, leaving `out` untouched.
std::size_t unwind_libunwind(const RegisterState& interrupted, std::span<std::uint64_t> out) noexcept;

// Per-thread cache policy; the process's first call traces once. A thread's trace cache (256 KiB) is made by its
// first unwind_libunwind, in the handler, where libunwind's key lets pthread_setspecific store it without
// allocating; otherwise here, and then true is returned: a first trace from a signal handler on this thread
// (through the signal frame) is worth making before samples come. Call where allocation is allowed (thread
// attach), before unwind_libunwind.
bool prepare_libunwind_this_thread() noexcept;

// Where the process's libunwind set-up stands: not_yet (no first trace; under the preload library, which loads
// libunwind at the set-up, also where it could not be loaded), lazy (each thread's trace cache is
// made by its first unwind_libunwind, in the handler), per_thread (only threads that called
// prepare_libunwind_this_thread afterwards may call unwind_libunwind).
enum class LibunwindSetup { not_yet, lazy, per_thread };
LibunwindSetup libunwind_setup() noexcept;
// The process's set-up alone (the first trace: ~2 ms of CPU on a VM, its cache filled), where allocation is
// allowed, for a caller that put it off (Sampler::Options::defer_libunwind_setup). Once per process.
void prepare_libunwind_process() noexcept;

// The cursor/unw_step loop from a ucontext (5–60 µs per sample): for comparison and non-signal use only.
std::size_t unwind_libunwind_cursor(const ucontext_t& uc, std::span<std::uint64_t> out) noexcept;

}  // namespace selfperf
