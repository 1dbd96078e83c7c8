// Frame-pointer unwinding that never faults: bounds, alignment and monotonicity are checked before each load.
#include <pthread.h>

#include <cstring>

#include "selfperf/error.hpp"
#include "unwinding/stack_word.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

StackBounds StackBounds::of_this_thread() {
  pthread_attr_t attr;
  int rc = pthread_getattr_np(pthread_self(), &attr);
  if (rc != 0) throw Error("cannot read this thread's stack bounds (pthread_getattr_np failed)", rc);
  void* addr = nullptr;
  std::size_t size = 0;
  rc = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || addr == nullptr || size == 0)
    throw Error("cannot read this thread's stack bounds (pthread_attr_getstack failed)", rc);
  auto low = reinterpret_cast<std::uintptr_t>(addr);
  return StackBounds{low, low + size};
}

RegisterState RegisterState::from(const ucontext_t& uc) noexcept {
#if defined(__x86_64__)
  return RegisterState{static_cast<std::uint64_t>(uc.uc_mcontext.gregs[REG_RIP]),
                       static_cast<std::uint64_t>(uc.uc_mcontext.gregs[REG_RSP]),
                       static_cast<std::uint64_t>(uc.uc_mcontext.gregs[REG_RBP])};
#elif defined(__aarch64__)
  return RegisterState{static_cast<std::uint64_t>(uc.uc_mcontext.pc), static_cast<std::uint64_t>(uc.uc_mcontext.sp),
                       static_cast<std::uint64_t>(uc.uc_mcontext.regs[29]),
                       static_cast<std::uint64_t>(uc.uc_mcontext.regs[30])};
#else
#error "selfperf unwinding supports x86-64 and aarch64 only"
#endif
}

#if defined(__x86_64__)
namespace {

constexpr std::uintptr_t kPageSize = 4096;

// Where, relative to sp, the return address sits when IP is at an instruction that runs while the function
// has no frame of its own (rbp still the caller's). -1: IP is inside a set-up frame.
__attribute__((no_sanitize("address", "thread"))) int return_address_slot(std::uint64_t ip) noexcept {
  const auto* code = reinterpret_cast<const unsigned char*>(ip);
  std::uintptr_t room = kPageSize - (ip & (kPageSize - 1));  // bytes readable without leaving IP's page
  if (room >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa) return 0;  // endbr64
  if (code[0] == 0x55) return 0;                                                   // push %rbp
  if (code[0] == 0xc3) return 0;                                                   // ret
  if (room >= 3 && code[0] == 0x48 && code[1] == 0x89 && code[2] == 0xe5) return 8;  // mov %rsp,%rbp
  return -1;
}

// Follows the rbp chain from FP (aligned, at or below CEILING, above the stack pointer) into OUT, which is not
// empty. It stops where the plain rule says: a zero return address, a next frame that is not at least 16 bytes
// higher (a loop or garbage), misaligned or above CEILING, or OUT full. Returns the frames written.
//
// Written in assembly because it speculates on values, which a compiler undoes. Walked one by one, frames
// cost one L1 load-to-use latency each (4-5 cycles): each frame's address is the previous load's result.
// But in recursion, the usual reason for a deep stack, consecutive frames are the same size. After a
// few frames of one size the loop predicts the next frame at this one plus that size, and confirms the
// prediction with a compare and branch. The loads then no longer wait on each other (the CPU runs ahead on
// the predicted branch), so the loop runs at its instruction throughput, about 2 cycles a frame. A compiler
// would see that the confirmed value equals the loaded one and put the load back on the dependency chain.
// A wrong prediction costs one mispredicted branch, and the walk goes back to following the chain. A
// predicted frame is read only after it is checked against CEILING and the room left in OUT. Outside runs
// of equal frames this is the plain walk, with the load alone on the dependency chain.
// Earlier attempts: a memo of the previous walk, confirmed with independent loads (0.68-1.15x the plain
// walk at 130 frames, 1.3x at 15), and a prediction from the last frame's size alone, without waiting for a
// repeat (1.1-1.4x slower: a mispredicted branch at every change of size, and more instructions per frame).
__attribute__((no_sanitize("address", "thread"))) std::size_t walk_frame_chain(std::uintptr_t fp, std::uintptr_t ceiling,
                                                                      std::span<std::uint64_t> out) noexcept {
  std::uint64_t* o = out.data();
  std::uint64_t* const end = o + out.size();
  std::uint64_t size = 0;  // the size of the frame about to be read, once known
  // A run starts when kRepeats pairs of frames in a row were each two frames of one size. In a stack of mixed
  // frames that happens rarely by chance; a wrong start costs two mispredicted branches.
  constexpr std::uint64_t kRepeats = 2;
  std::uint64_t countdown = kRepeats;  // counted down at each pair; an unequal pair resets it to kRepeats + 1
  std::uint64_t frame, size_a, limit;
  asm volatile(
      // Following the chain, two frames an iteration (one loop branch and one size comparison per pair: in
      // a stack of mixed frames this loop is bound by its instruction count when the core's other hyperthread
      // is busy). frame: the record being read; fp: its saved rbp, the next frame.
      "1:\n\t"
      "mov %[fp], %[frame]\n\t"
      "mov (%[fp]), %[fp]\n\t"
      "mov 8(%[frame]), %%rax\n\t"
      "test %%rax, %%rax\n\t"
      "jz 9f\n\t"
      "mov %%rax, (%[o])\n\t"
      "add $8, %[o]\n"
      // Is fp a frame to read next? Room in OUT, at least 16 bytes higher (signed: lower wraps negative),
      // aligned, at or below the ceiling.
      "2:\n\t"
      "cmp %[o], %[end]\n\t"
      "je 9f\n\t"
      "mov %[fp], %[size_a]\n\t"
      "sub %[frame], %[size_a]\n\t"
      "cmp $16, %[size_a]\n\t"
      "jl 9f\n\t"
      "test $7, %b[size_a]\n\t"
      "jnz 9f\n\t"
      "cmp %[ceiling], %[fp]\n\t"
      "ja 9f\n\t"
      // The second frame of the pair, checked the same way.
      "mov %[fp], %[frame]\n\t"
      "mov (%[fp]), %[fp]\n\t"
      "mov 8(%[frame]), %%rax\n\t"
      "test %%rax, %%rax\n\t"
      "jz 9f\n\t"
      "mov %%rax, (%[o])\n\t"
      "add $8, %[o]\n\t"
      "cmp %[o], %[end]\n\t"
      "je 9f\n\t"
      "mov %[fp], %[size]\n\t"
      "sub %[frame], %[size]\n\t"
      "cmp $16, %[size]\n\t"
      "jl 9f\n\t"
      "test $7, %b[size]\n\t"
      "jnz 9f\n\t"
      "cmp %[ceiling], %[fp]\n\t"
      "ja 9f\n\t"
      // Count pairs of equal frames without a branch that could mispredict: a branch taken at every
      // accidental repeat in a stack of mixed frames would cost more than the runs save.
      "cmp %[size], %[size_a]\n\t"
      "cmovne %[reset], %[countdown]\n\t"
      "dec %[countdown]\n\t"
      "jnz 1b\n\t"
      // Frames of one size: predict. limit = the highest frame the run may read,
      // min(ceiling, fp + size * (slots left - 1)), saturating if the product or sum overflows.
      "mov %[end], %%rax\n\t"
      "sub %[o], %%rax\n\t"
      "shr $3, %%rax\n\t"
      "dec %%rax\n\t"
      "mul %[size]\n\t"
      "mov %[ceiling], %[limit]\n\t"
      "jc 3f\n\t"
      "add %[fp], %%rax\n\t"
      "jc 3f\n\t"
      "cmp %[ceiling], %%rax\n\t"
      "cmovb %%rax, %[limit]\n"
      // The run: read the frame at fp, predict the next at fp + size, confirm against the saved rbp.
      "3:\n\t"
      "mov 8(%[fp]), %%rax\n\t"
      "mov (%[fp]), %%rdx\n\t"
      "test %%rax, %%rax\n\t"
      "jz 9f\n\t"
      "mov %%rax, (%[o])\n\t"
      "add $8, %[o]\n\t"
      "add %[size], %[fp]\n\t"
      "cmp %[fp], %%rdx\n\t"
      "jne 4f\n\t"
      "cmp %[limit], %[fp]\n\t"
      "jbe 3b\n\t"
      "jmp 9f\n"
      // Mispredicted: the frame just read was fp - size, its saved rbp is the next; check it as above.
      "4:\n\t"
      "mov %[fp], %[frame]\n\t"
      "sub %[size], %[frame]\n\t"
      "mov %%rdx, %[fp]\n\t"
      "jmp 2b\n"
      "9:\n"
      : [fp] "+&r"(fp), [o] "+&r"(o), [size] "+&r"(size), [countdown] "+&r"(countdown), [frame] "=&r"(frame),
        [size_a] "=&r"(size_a), [limit] "=&r"(limit)
      : [end] "r"(end), [ceiling] "r"(ceiling), [reset] "r"(kRepeats + 1)
      : "rax", "rdx", "cc", "memory");
  return static_cast<std::size_t>(o - out.data());
}

}  // namespace

__attribute__((no_sanitize("address", "thread"))) std::size_t unwind_frame_pointer(const RegisterState& regs,
                                                                          const StackBounds& stack,
                                                                          std::span<std::uint64_t> out,
                                                                          const CodeMap* code) noexcept {
  if (out.empty()) return 0;
  std::size_t n = 0;
  out[n++] = regs.ip;
  // On another stack (sigaltstack, fiber) or a stack too small for one frame: the leaf alone.
  if (regs.ip == 0 || !stack.contains(regs.sp, 8) || stack.high - stack.low < 16) return n;

  std::uintptr_t fp = regs.fp;
  const bool fp_valid = fp >= regs.sp && (fp & 7u) == 0 && stack.contains(fp, 16);
  int slot = return_address_slot(regs.ip);
  if (slot >= 0 && n < out.size() && stack.contains(regs.sp + slot, 8)) {
    std::uint64_t ret = detail::stack_word(regs.sp + slot);
    if (ret != 0) out[n++] = ret;
  } else if (code != nullptr && n < out.size()) {
    // A leaf without a frame of its own: [sp] is its return address, and rbp still the caller's frame.
    std::uint64_t top = detail::stack_word(regs.sp);
    std::uint64_t next = fp_valid ? detail::stack_word(fp + 8) : 0;
    if (top != next && code->is_return_address(top)) out[n++] = top;
  }

  // Every frame lies above the interrupted stack pointer (itself inside the stack) and leaves room for its
  // 16-byte record below the top.
  const std::uintptr_t ceiling = stack.high - 16;
  if (n == out.size() || fp < regs.sp || fp > ceiling || (fp & 7u) != 0) return n;
  return n + walk_frame_chain(fp, ceiling, out.subspan(n));
}
#endif  // __x86_64__

}  // namespace selfperf
