// The frame-pointer walk on aarch64: AAPCS64 frame records {caller's x29, return address} linked through x29.
// The x86-64 walk and its hand-scheduled loop are in unwind_frame_pointer.cpp.
#if defined(__aarch64__)
#include <cstdint>

#include "unwinding/stack_word.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

namespace {

// Whether IP is at an instruction that runs while the function's own frame record is not linked (x29 still the
// caller's) and its return address is still in x30: the entry (bti c / paciasp, or the `stp x29, x30, [sp, #-n]!`
// that saves the record), the `mov x29, sp` right after that store, and the final `ret` after `ldp x29, x30`.
// IP was executing, so its (aligned, 4-byte) instruction is mapped.
__attribute__((no_sanitize("address", "thread"))) bool caller_in_link_register(std::uint64_t ip) noexcept {
  if ((ip & 3u) != 0) return false;
  const auto insn = *reinterpret_cast<const std::uint32_t*>(ip);
  if (insn == 0xd503245f || insn == 0xd503233f || insn == 0xd503237f) return true;  // bti c, paciasp, pacibsp
  if ((insn & 0xffc07fff) == 0xa9807bfd) return true;                               // stp x29, x30, [sp, #-n]!
  if (insn == 0x910003fd) return true;                                              // mov x29, sp
  if (insn == 0xd65f03c0) return true;                                              // ret
  return false;
}

}  // namespace

__attribute__((no_sanitize("address", "thread"))) std::size_t unwind_frame_pointer(const RegisterState& regs,
                                                                          const StackBounds& stack,
                                                                          std::span<std::uint64_t> out,
                                                                          const CodeMap* code) noexcept {
  if (out.empty()) return 0;
  std::size_t n = 0;
  out[n++] = regs.ip;
  if (regs.ip == 0 || !stack.contains(regs.sp, 8) || stack.high - stack.low < 16) return n;

  std::uintptr_t fp = regs.fp;
  const bool fp_valid = fp >= regs.sp && (fp & 7u) == 0 && stack.contains(fp, 16);
  // The caller of a function that has not linked its record (or has unlinked it) is in the link register.
  // Elsewhere x30 may be stale (the return address of the last call this function made), so without a code
  // map it is not trusted at all, and with one only when it follows a call and is not the return address the
  // chain yields next: a frameless leaf's caller. A framed function that has made a call can then show one
  // extra frame of itself: the limit of the method without the function bounds.
  if (regs.lr != 0 && n < out.size()) {
    if (caller_in_link_register(regs.ip)) {
      out[n++] = regs.lr;
    } else if (code != nullptr) {
      const std::uint64_t next = fp_valid ? detail::stack_word(fp + 8) : 0;
      if (regs.lr != next && code->is_return_address(regs.lr)) out[n++] = regs.lr;
    }
  }

  // Records lie above the interrupted stack pointer, 16 bytes each, at least 16 bytes apart, below the top.
  const std::uintptr_t ceiling = stack.high - 16;
  if (fp < regs.sp || fp > ceiling || (fp & 7u) != 0) return n;
  while (n < out.size()) {
    const std::uint64_t next = detail::stack_word(fp);
    const std::uint64_t ret = detail::stack_word(fp + 8);
    if (ret == 0) break;
    out[n++] = ret;
    if (next < fp + 16 || next > ceiling || (next & 7u) != 0) break;
    fp = next;
  }
  return n;
}

}  // namespace selfperf
#endif  // __aarch64__
