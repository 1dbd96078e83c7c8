// The DWARF walk on aarch64: each frame's rule from the shared cache (or .eh_frame on a miss), every address
// checked against the thread's stack bounds before it is read. Unlike x86-64, where `call` leaves the return
// address on the stack, `bl` leaves it in x30: the interrupted frame's return address may be x30 itself (a leaf,
// a prologue before `stp x29, x30, ...`, an epilogue after `ldp`), which the signal gave us; any other frame has
// made a call and saved it. The x86-64 walk, with its rule prediction, is in unwind_dwarf.cpp; this one only
// follows the rules (no timings are measured on aarch64 to tune it by).
#if defined(__aarch64__)
#include <bit>
#include <cstddef>

#include "unwinding/dwarf_cfi.hpp"
#include "unwinding/stack_word.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

namespace {

using detail::CfiRule;

// Out of line: the walk's loop keeps its registers for the common case, a cached rule.
[[gnu::noinline, gnu::cold]] CfiRule evaluate_and_cache(const CodeMap& code, std::uint64_t key,
                                                        std::uint64_t pc) noexcept {
  const CfiRule rule = detail::find_cfi_rule(code.eh_frame_of(pc), pc);
  detail::cfi_cache::insert(key, rule);
  return rule;
}

// The rule for key: a return address, whose rule is the call's (address - 1), or an interrupted IP tagged
// kExactIp.
inline CfiRule rule_for(const CodeMap& code, std::uint64_t key) noexcept {
  const CfiRule cached = detail::cfi_cache::lookup(key);
  if (cached.flags & CfiRule::kKnown) [[likely]]
    return cached;
  const bool exact = (key & detail::cfi_cache::kExactIp) != 0;
  return evaluate_and_cache(code, key, exact ? key & ~detail::cfi_cache::kExactIp : key - 1);
}

// A return address without its pointer-authentication code: functions built with -mbranch-protection sign x30
// (paciasp) before they save it, with a code in the address's unused top bits. xpaclri clears exactly those
// bits, however many the kernel's address-space size leaves (a fixed mask would have to guess it), and is in
// the hint space: a no-op on cores without pointer authentication, where nothing is signed. An unsigned address
// comes back unchanged, so every return address goes through it and the rules need not track the signing
// state (DW_CFA_AARCH64_negate_ra_state).
[[gnu::always_inline]] inline std::uint64_t strip_pac(std::uint64_t address) noexcept {
  register std::uint64_t x30 asm("x30") = address;
  asm("hint #7" : "+r"(x30));  // xpaclri
  return x30;
}

}  // namespace

__attribute__((no_sanitize("address", "thread"))) DwarfWalk unwind_dwarf(const RegisterState& regs,
                                                                 const StackBounds& stack,
                                                                 std::span<std::uint64_t> out,
                                                                 const CodeMap* code) noexcept {
  if (out.empty()) return DwarfWalk{0, true};
  out[0] = regs.ip;
  // Another stack (sigaltstack, a fiber) than the one recorded: leave it to libunwind.
  if (code == nullptr || regs.ip == 0 || !stack.contains(regs.sp, 8)) return DwarfWalk{1, false};

  const std::uint64_t high = stack.high;
  std::uint64_t sp = regs.sp, fp = regs.fp;
  std::uint64_t* next = out.data() + 1;
  std::uint64_t* const end = out.data() + out.size();
  const auto done = [&](bool complete) {
    return DwarfWalk{static_cast<std::size_t>(next - out.data()), complete};
  };
  // A saved register's slot lies in the frame: at or above sp (aarch64 Linux has no red zone: the kernel
  // writes signal frames right below sp) and below the stack's top.
  const auto in_frame = [&](std::uint64_t at) { return at >= sp && at <= high - 8; };

  std::uint64_t key = regs.ip | detail::cfi_cache::kExactIp;
  for (;;) {
    if (next == end) return done(true);
    const CfiRule rule = rule_for(*code, key);
    if (!rule.walks()) [[unlikely]]
      return done(rule.outermost());
    const std::uint64_t base = (rule.flags & CfiRule::kCfaFromRbp) ? fp : sp;
    const std::uint64_t cfa = base + static_cast<std::uint64_t>(std::int64_t{rule.cfa_offset});
    if (cfa < sp || cfa > high) return done(true);
    // x29's slot, and where x30's is counted from (see CfiRule).
    const std::uint64_t fp_at = cfa + static_cast<std::uint64_t>(std::int64_t{rule.rbp_offset});
    const bool fp_saved = (rule.flags & CfiRule::kRbpSaved) != 0;
    std::uint64_t ret;
    if (rule.flags & CfiRule::kRaInLr) {
      // Only the interrupted frame's x30 is known. A caller's rule cannot say so (its `bl` overwrote x30),
      // unless x30 went to another register, which the rules do not model: libunwind's.
      if (next != out.data() + 1) return done(false);
      ret = regs.lr;
    } else {
      // The slot lies below the CFA, so a caller's frame is strictly above this one.
      const std::uint64_t ra_at =
          (fp_saved ? fp_at : cfa) + static_cast<std::uint64_t>(std::int64_t{rule.ra_slot} * 8);
      if (!in_frame(ra_at) || ra_at >= cfa) return done(true);
      ret = detail::stack_word(ra_at);
    }
    if (fp_saved) {
      if (!in_frame(fp_at)) return done(true);
      fp = detail::stack_word(fp_at);
    }
    ret = strip_pac(ret);
    if (ret == 0) return done(true);
    *next++ = ret;
    sp = cfa;
    key = ret;
  }
}

}  // namespace selfperf
#endif  // __aarch64__
