#pragma once
// DWARF call-frame information (.eh_frame) reduced to what a signal handler needs to find a caller on x86-64
// and aarch64, and a lock-free cache of those rules shared by every thread.
#include <atomic>
#include <bit>
#include <cstdint>

#include "selfperf/unwind.hpp"

namespace selfperf::detail {

// How to find the caller's registers at one instruction: CFA = (rbp or rsp) + cfa_offset; the return address
// is at CFA - 8 (where `call` put it; any other place is left to libunwind); rbp is unchanged or was saved at
// CFA + rbp_offset; the caller's rsp is the CFA. 8 bytes, so a cache slot publishes it with one atomic store;
// cfa_offset in the low half, so the walk's critical path loads it sign-extended with nothing to decode.
// On aarch64 the same fields name its registers: rbp is x29 (the frame pointer), rsp is sp; the return address
// is x30's save slot, 8 * ra_slot bytes from x29's slot where x29 was saved (the frame record {x29, x30}: +8,
// wherever a large frame puts the record), else from the CFA; or x30 itself (kRaInLr: a leaf, or a prologue
// before it saves x30), which only the interrupted frame knows. On x86-64 ra_slot is 0 and kRaInLr never set.
struct CfiRule {
  static constexpr std::uint8_t kKnown = 1;        // a filled rule (a zero word is an empty cache slot)
  static constexpr std::uint8_t kWalk = 2;         // the caller is found with the offsets below
  static constexpr std::uint8_t kOutermost = 4;    // the return address is undefined: the stack ends here
  static constexpr std::uint8_t kCfaFromRbp = 8;   // CFA is rbp-based (else rsp-based); aarch64: x29 (else sp)
  static constexpr std::uint8_t kRbpSaved = 16;    // the caller's rbp (aarch64: x29) is at CFA + rbp_offset
  static constexpr std::uint8_t kRaInLr = 32;      // aarch64: the return address is still in x30
  // Neither kWalk nor kOutermost: no FDE covers the address, or its rules need more than offsets (a DWARF
  // expression, as PLT stubs and signal trampolines use; another register as CFA): leave it to libunwind.

  std::int32_t cfa_offset = 0;
  std::int16_t rbp_offset = 0;
  std::int8_t ra_slot = 0;  // aarch64: x30's slot, in words from x29's slot (kRbpSaved) or from the CFA
  std::uint8_t flags = 0;

  static CfiRule unsupported() noexcept { return CfiRule{0, 0, 0, kKnown}; }
  bool walks() const noexcept { return (flags & kWalk) != 0; }
  bool outermost() const noexcept { return (flags & kOutermost) != 0; }
};
static_assert(sizeof(CfiRule) == 8);

// The rule in effect at `pc` (for a caller frame: its return address - 1, inside the call instruction).
// Reads only the object's mapped tables, takes no lock and allocates nothing: callable from a signal handler.
CfiRule find_cfi_rule(const EhFrameSection& section, std::uint64_t pc) noexcept;

// Rules shared by all threads, keyed by return address (the rule is the one at address - 1, the call) or by
// an interrupted IP tagged with kExactIp (the rule at that very instruction: it may differ). Open addressing;
// empty slots are claimed with a compare-and-swap; when a key's whole neighbourhood is taken (a long profile
// of a large program samples more distinct addresses than there are slots) the home slot is replaced, so the
// cache keeps the addresses in use instead of filling up for good. Signal-safe (lock-free atomics only). The
// lookup is inline: the DWARF walk does one per frame, on the chain of dependent loads (return address -> rule
// -> next return address) that sets its speed.
namespace cfi_cache {

constexpr std::uint64_t kExactIp = std::uint64_t{1} << 63;  // above every user-space address
// 16: the walk takes a return address's home slot with a 16-bit load of its low bits (movzwl), beside the
// full load, instead of an `and` after it on the chain. 1 MiB of zero pages, of which only the pages holding
// sampled addresses' slots are ever touched.
constexpr unsigned kBits = 16;
constexpr std::uint64_t kSlots = std::uint64_t{1} << kBits;
constexpr std::uint64_t kProbes = 8;

// Two arrays, not an array of pairs: 8-byte elements are reached with a scaled index, one instruction less
// on that chain. A writer zeroes the rule before it changes the key and publishes the rule last; a reader
// takes a rule only when it is non-zero and the key reads the same before and after it. One object, hidden:
// both arrays are reached from one base address, without a GOT load.
struct Table {
  std::atomic<std::uint64_t> keys[kSlots];
  std::atomic<std::uint64_t> rules[kSlots];
};
[[gnu::visibility("hidden")]] extern Table g_table;

// The rule for key found in the slots after its home (a collision moved it there), as its word; 0 if none.
std::uint64_t lookup_past_home(std::uint64_t key, std::uint64_t home) noexcept;

// The cached rule for key as its word, or 0. Return addresses differ in their low bits: the home slot is those
// bits alone (`home`: key's low kBits bits, however the caller came by them). The home slot is probed inline
// and the rest out of line, so that the walk's chain holds no masking of a probe index. A word, not a
// CfiRule: joined from several returns, a struct was rebuilt field by field on the walk's path.
inline std::uint64_t lookup_word(std::uint64_t key, std::uint64_t home) noexcept {
  const std::uint64_t found = g_table.keys[home].load(std::memory_order_relaxed);
  if (found == key) [[likely]] {
    const std::uint64_t rule = g_table.rules[home].load(std::memory_order_acquire);
    // Off the walk's chain: the branch on this check is predicted.
    return g_table.keys[home].load(std::memory_order_relaxed) == key ? rule : 0;
  }
  return found == 0 ? 0 : lookup_past_home(key, home);
}
// The cached rule for key, or a rule without kKnown.
inline CfiRule lookup(std::uint64_t key) noexcept {
  return std::bit_cast<CfiRule>(lookup_word(key, key & (kSlots - 1)));
}
// Whether key's home slot holds exactly this rule (as a word): how the DWARF walk confirms the rule it went on
// with. A rule further along the probe sequence answers false; the caller then takes lookup's answer.
inline bool home_slot_holds(std::uint64_t key, std::uint64_t rule) noexcept {
  const std::uint64_t slot = key & (kSlots - 1);
  return g_table.keys[slot].load(std::memory_order_relaxed) == key &&
         g_table.rules[slot].load(std::memory_order_acquire) == rule &&
         g_table.keys[slot].load(std::memory_order_relaxed) == key;
}
void insert(std::uint64_t key, CfiRule rule) noexcept;
// Forgets every rule (objects were unloaded: their addresses may now hold other code). Not for handlers.
// A reader racing with it, or with two replacements of one slot between its loads, may take another
// address's rule for that one sample; the walk checks every address it derives against the stack bounds,
// so a wrong rule ends a walk early or misnames a frame, it never faults.
void clear() noexcept;

}  // namespace cfi_cache

}  // namespace selfperf::detail
