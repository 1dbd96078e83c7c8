// The DWARF walk: each frame's rule from the shared cache (or .eh_frame on a miss), then two loads from the
// stack, every address checked against the thread's stack bounds first. The aarch64 walk, whose return address
// may be in the link register, is in unwind_dwarf_aarch64.cpp.
#if !defined(__aarch64__)
#include <cstddef>

#include "unwinding/dwarf_cfi.hpp"
#include "unwinding/stack_word.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

namespace {

using detail::CfiRule;

// Out of line: the walk's loop keeps its registers for the common case, a cached rule.
[[gnu::noinline, gnu::cold]] std::uint64_t evaluate_and_cache(const CodeMap& code, std::uint64_t key,
                                                              std::uint64_t pc) noexcept {
  const CfiRule rule = detail::find_cfi_rule(code.eh_frame_of(pc), pc);
  detail::cfi_cache::insert(key, rule);
  return std::bit_cast<std::uint64_t>(rule);
}

// The rule for key as its word. key: a return address, whose rule is the call's (address - 1), or an
// interrupted IP tagged kExactIp; home: its low kBits bits.
inline std::uint64_t rule_for(const CodeMap& code, std::uint64_t key, std::uint64_t home) noexcept {
  const std::uint64_t word = detail::cfi_cache::lookup_word(key, home);
  if (word & (std::uint64_t{CfiRule::kKnown} << 56)) [[likely]]
    return word;
  const bool exact = (key & detail::cfi_cache::kExactIp) != 0;
  return evaluate_and_cache(code, key, exact ? key & ~detail::cfi_cache::kExactIp : key - 1);
}

static_assert(detail::cfi_cache::kBits == 16, "the walk reads a return address's home slot as its low 16 bits");

// Where a walk stands: the frame whose caller comes next (its rsp, and rbp as the walk knows it), and the next
// free output slot.
struct Cursor {
  std::uint64_t sp;
  std::uint64_t fp;
  std::uint64_t* next;
};

// The predicting walk: callers keep taking `rule`, whose parts are constants here (its flags in the code: one
// loop per kind), while each caller's cached rule is only compared with it. Returns the return address whose
// rule differed, 0 when the walk ended. The checks on the CFA bound every read, for the rules it is entered
// with: the return address at CFA - 8 lies in [sp, high - 8]; an rbp slot at CFA - 16 .. CFA - 8 (CFA from
// rbp) at or above sp - 8, inside the stack because the walk enters here two frames or more above its start;
// an rbp slot inside an rsp-based frame in [sp, CFA - 8].
template <bool kFromRbp, bool kRbpSaved>
[[gnu::noinline]] __attribute__((no_sanitize("address", "thread"))) std::uint64_t predict(Cursor& cursor, std::uint64_t* end,
                                                                               std::uint64_t high,
                                                                               std::uint64_t rule) noexcept {
  const auto r = std::bit_cast<CfiRule>(rule);
  const auto offset = static_cast<std::uint64_t>(static_cast<std::int64_t>(r.cfa_offset));
  const auto rbp_offset = static_cast<std::uint64_t>(static_cast<std::int64_t>(r.rbp_offset));
  std::uint64_t sp = cursor.sp, fp = cursor.fp;
  std::uint64_t* next = cursor.next;
  std::uint64_t differed = 0;
  while (next != end) {
    const std::uint64_t cfa = (kFromRbp ? fp : sp) + offset;
    if ((kFromRbp && cfa < sp + 8) || cfa > high) break;
    const std::uint64_t ret = detail::stack_word(cfa - 8);
    if (kRbpSaved) fp = detail::stack_word(cfa + rbp_offset);
    if (ret == 0) break;
    *next++ = ret;
    sp = cfa;
    if (!detail::cfi_cache::home_slot_holds(ret, rule)) [[unlikely]] {
      differed = ret;
      break;
    }
  }
  cursor = Cursor{sp, fp, next};
  return differed;
}

// Whether the predicting loops can take this rule (see predict), and which one. A CFA from rbp that nobody saved,
// or an offset below 8, never passes the following walk twice in a row; those are refused all the same.
using PredictLoop = std::uint64_t (*)(Cursor&, std::uint64_t*, std::uint64_t, std::uint64_t) noexcept;
PredictLoop predicting_loop_for(const CfiRule& r) noexcept {
  const bool from_rbp = (r.flags & CfiRule::kCfaFromRbp) != 0;
  const bool rbp_saved = (r.flags & CfiRule::kRbpSaved) != 0;
  if (from_rbp) {
    if (!rbp_saved || r.rbp_offset < -16 || r.rbp_offset > -8) return nullptr;
    return predict<true, true>;
  }
  if (r.cfa_offset < 8) return nullptr;
  if (!rbp_saved) return predict<false, false>;
  if (r.rbp_offset < -r.cfa_offset || r.rbp_offset > -8) return nullptr;
  return predict<false, true>;
}

}  // namespace

// The walk's speed is its chain of dependent loads. Following the rules, it is return address -> cached rule
// -> next CFA, ~11 cycles a frame. But many callers share one rule (every frame-pointer function: CFA = rbp +
// 16, rbp at CFA - 16; every level of a recursion: its own), so once two frames in a row had one rule and the
// next has it too, the walk predicts: it goes on with that rule and only checks it against the cache with a
// branch, which the CPU predicts and runs ahead of. The lookup leaves the chain, which becomes the rbp load
// (or nothing, for rsp-based rules). A wrong prediction costs a mispredict and returns to following; code
// without frame pointers, where every function has its own CFA offset, mostly stays there and pays nothing.
__attribute__((no_sanitize("address", "thread"))) DwarfWalk unwind_dwarf(const RegisterState& regs,
                                                                 const StackBounds& stack,
                                                                 std::span<std::uint64_t> out,
                                                                 const CodeMap* code) noexcept {
  if (out.empty()) return DwarfWalk{0, true};
  out[0] = regs.ip;
  // Another stack (sigaltstack, a fiber) than the one recorded: leave it to libunwind.
  if (code == nullptr || regs.ip == 0 || !stack.contains(regs.sp, 8)) return DwarfWalk{1, false};

  // Locals, not stack.low/high: stores to out could alias them, and the loop would reload them every frame.
  const std::uint64_t low = stack.low, high = stack.high;
  // Registers, not a Cursor: an object whose address the predicting loops take would live in memory.
  std::uint64_t sp = regs.sp, fp = regs.fp;
  std::uint64_t* next = out.data() + 1;
  std::uint64_t* const end = out.data() + out.size();
  const auto done = [&](bool complete) {
    return DwarfWalk{static_cast<std::size_t>(next - out.data()), complete};
  };

  std::uint64_t key = regs.ip | detail::cfi_cache::kExactIp;
  std::uint64_t home = key & (detail::cfi_cache::kSlots - 1);
  std::uint64_t previous = 0;  // the frame below's rule, as a word (compared whole)
  for (;;) {
    // Following: each frame's rule looked up from its return address, then used.
    if (next == end) return done(true);
    // The rule as its word: flags tested in place (bt), fields taken where used, so that a frame costs few
    // instructions besides its chain.
    const std::uint64_t word = rule_for(*code, key, home);
    const auto has = [word](std::uint8_t flag) { return (word & (std::uint64_t{flag} << 56)) != 0; };
    if (!has(CfiRule::kWalk)) [[unlikely]]
      return done(has(CfiRule::kOutermost));
    // Positive (find_cfi_rule refuses others), so zero-extended: a 32-bit move, which the core eliminates,
    // instead of a sign extension on the chain.
    const auto offset = static_cast<std::uint64_t>(static_cast<std::uint32_t>(word));
    std::uint64_t cfa = sp + offset;
    if (has(CfiRule::kCfaFromRbp)) {
      // A branch, not a conditional move: predicted, it keeps the flag test off the chain (that alone once took
      // 130 frames from 1.55 to 0.85 µs). The empty asm is a side effect gcc will not if-convert across.
      asm volatile("");
      cfa = fp + offset;
    }
    // The caller's frame lies strictly above this one (no loops) and inside the stack, so the return address
    // below it does too.
    if (cfa < sp + 8 || cfa > high) return done(true);
    const std::uint64_t ret = detail::stack_word(cfa - 8);
    const std::uint64_t ret_home = detail::stack_word_low16(cfa - 8);
    if (has(CfiRule::kRbpSaved)) {
      // Between `pop %rbp`/`leave` and `ret` the rule still names the slot it was popped from, now just below
      // rsp: the red zone, which the kernel leaves intact when it builds a signal frame. Only the stack's
      // bounds limit this read.
      const auto rbp_offset = static_cast<std::int16_t>(word >> 32);
      const std::uint64_t fp_at = cfa + static_cast<std::uint64_t>(static_cast<std::int64_t>(rbp_offset));
      if (fp_at < low || fp_at > high - 8) return done(true);
      fp = detail::stack_word(fp_at);
    }
    if (ret == 0) return done(true);
    *next++ = ret;
    sp = cfa;
    key = ret;
    home = ret_home;
    if (word != previous) [[likely]] {  // predicted: in code without frame pointers neighbours rarely share one
      previous = word;
      continue;
    }
    // Two frames with one rule: when the next has it too, predict from there on.
    if (!detail::cfi_cache::home_slot_holds(key, word)) continue;
    if (PredictLoop loop = predicting_loop_for(std::bit_cast<CfiRule>(word))) {
      Cursor at{sp, fp, next};
      key = loop(at, end, high, word);
      sp = at.sp, fp = at.fp, next = at.next;
      if (key == 0) return done(true);
      home = key & (detail::cfi_cache::kSlots - 1);
    }
  }
}

}  // namespace selfperf
#endif  // !__aarch64__
