#pragma once
// One word of a sampled thread's stack. The unwinders have bounds-checked the address; the sanitizers must not
// check it too: the stack holds ASan's redzones and other threads' writes TSan has no reason to expect.
#include <cstdint>
#include <cstring>

namespace selfperf::detail {

[[gnu::always_inline]] __attribute__((no_sanitize("address", "thread"))) inline std::uint64_t stack_word(
    std::uintptr_t addr) noexcept {
  std::uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
}

// The low 16 bits of the word at addr, zero-extended, as a load of their own: beside stack_word(addr) it
// gives them one load latency after addr is known, where masking the full word would add an `and`. In
// assembly because a compiler merges the two loads into one.
[[gnu::always_inline]] inline std::uint64_t stack_word_low16(std::uintptr_t addr) noexcept {
  std::uint64_t v;  // written as its 32-bit half, which zeroes the rest
#if defined(__aarch64__)
  asm("ldrh %w0, %1" : "=r"(v) : "Q"(*reinterpret_cast<const std::uint16_t*>(addr)));
#else
  asm("movzwl %1, %k0" : "=r"(v) : "m"(*reinterpret_cast<const std::uint16_t*>(addr)));
#endif
  return v;
}

}  // namespace selfperf::detail
