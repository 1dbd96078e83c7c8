// Frame-pointer unwinding that never faults: bounds, alignment and monotonicity are checked before each load.
#include <pthread.h>

#include <cstring>

#include "selfperf/error.hpp"
#include "stack_word.hpp"
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
#else
#error "selfperf unwinding supports x86-64 only"
#endif
}

namespace {

constexpr std::uintptr_t kPageSize = 4096;

// Where, relative to sp, the return address sits when IP is at an instruction that runs while the function
// has no frame of its own (rbp still the caller's). -1: IP is inside a set-up frame.
[[gnu::no_sanitize("address", "thread")]] int return_address_slot(std::uint64_t ip) noexcept {
  const auto* code = reinterpret_cast<const unsigned char*>(ip);
  std::uintptr_t room = kPageSize - (ip & (kPageSize - 1));  // bytes readable without leaving IP's page
  if (room >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa) return 0;  // endbr64
  if (code[0] == 0x55) return 0;                                                   // push %rbp
  if (code[0] == 0xc3) return 0;                                                   // ret
  if (room >= 3 && code[0] == 0x48 && code[1] == 0x89 && code[2] == 0xe5) return 8;  // mov %rsp,%rbp
  return -1;
}

}  // namespace

[[gnu::no_sanitize("address", "thread")]] std::size_t unwind_frame_pointer(const RegisterState& regs,
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

  // The loop runs at the L1 load-to-use latency (4-5 cycles a frame): each frame's address is the previous
  // load's result. Confirming the unchanged outer frames against a memo of the previous walk with
  // independent loads was tried (bench_sampler, interleaved): 0.68-1.15x this loop at 130 frames depending
  // on how busy the core's other hyperthread was, 1.3x at 15 frames, so it was not kept. Value speculation
  // (predict the next frame at this one plus the last frame's size, confirmed by a branch, so that the loads
  // need not wait for each other) was tried as well: 1.1-1.4x slower at 133 frames. The loop then runs at
  // its instruction throughput, no better than the load latency, and each frame of another size costs a
  // mispredicted branch.
  // Every frame lies above the interrupted stack pointer (itself inside the stack) and leaves room for its
  // 16-byte record below the top: two compares per frame keep each load inside the stack.
  std::uintptr_t floor = regs.sp;
  const std::uintptr_t ceiling = stack.high - 16;
  while (n < out.size()) {
    if (fp < floor || fp > ceiling || (fp & 7u) != 0) break;
    std::uint64_t next = detail::stack_word(fp);
    std::uint64_t ret = detail::stack_word(fp + 8);
    if (ret == 0) break;
    out[n++] = ret;
    floor = fp + 16;  // strictly growing: a frame at or below this one is a loop or garbage
    fp = next;
  }
  return n;
}

}  // namespace selfperf
