#pragma once
// The production fast path: read_mmap_page() instantiated with rdpmc and rdtsc (x86-64), or with mrs of the
// PMU's counter registers and of CNTVCT_EL0 (aarch64). Elsewhere it compiles and always answers
// nullopt/false, so callers fall back to read(2).
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include <linux/perf_event.h>

#include "selfperf/mmap_read.hpp"

namespace selfperf {

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool kUserPmcReadSupported = true;
inline constexpr bool kTimestampCounterSupported = true;
#else
inline constexpr bool kUserPmcReadSupported = false;
inline constexpr bool kTimestampCounterSupported = false;
#endif

namespace detail {

#if defined(__x86_64__)
// Only executed when the page's cap_user_rdpmc says the kernel let this process use rdpmc
// (CR4.PCE); otherwise it would fault. "memory": the read must stay between the two lock loads.
[[gnu::always_inline]] inline std::uint64_t rdpmc(std::uint32_t counter) noexcept {
  std::uint32_t lo, hi;
  asm volatile("rdpmc" : "=a"(lo), "=d"(hi) : "c"(counter) : "memory");
  return (std::uint64_t{hi} << 32) | lo;
}

// Plain rdtsc as the kernel's comment uses: perf's time_{offset,mult,shift} scale this counter.
[[gnu::always_inline]] inline std::uint64_t rdtsc() noexcept {
  std::uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
  return (std::uint64_t{hi} << 32) | lo;
}
#elif defined(__aarch64__)
// PMEVCNTR<n>_EL0 by its encoding (op0 3, op1 3, CRn 14, CRm 0b10:n[4:3], op2 n[2:0]): the register is part
// of the instruction, so each n is its own mrs.
template <unsigned N>
[[gnu::always_inline]] inline std::uint64_t read_pmevcntr() noexcept {
  static_assert(N < 31);
  std::uint64_t v;
  asm volatile("mrs %0, s3_3_c14_c%c1_%c2" : "=r"(v) : "i"(8 + (N >> 3)), "i"(N & 7) : "memory");
  return v;
}

template <unsigned... N>
[[gnu::always_inline]] inline std::uint64_t read_pmevcntr_n(std::uint32_t n,
                                                            std::integer_sequence<unsigned, N...>) noexcept {
  std::uint64_t v = 0;
  // One comparison per counter, folded by the compiler into a jump table over straight-line reads.
  (void)((n == N ? (v = read_pmevcntr<N>(), true) : false) || ...);
  return v;
}

// The page's index - 1: 31 is the cycle counter (PMCCNTR_EL0), 0-30 the event counters. Only executed when
// the page gave a non-zero index, which the kernel does only when kernel.perf_user_access lets EL0 read the
// counters (PMUSERENR_EL0); otherwise the mrs would trap (SIGILL). "memory": it must stay between the two
// lock loads.
[[gnu::always_inline]] inline std::uint64_t rdpmc(std::uint32_t counter) noexcept {
  if (counter == 31) {
    std::uint64_t v;
    asm volatile("mrs %0, pmccntr_el0" : "=r"(v) : : "memory");
    return v;
  }
  return read_pmevcntr_n(counter, std::make_integer_sequence<unsigned, 31>{});
}

// The virtual count of the generic timer, which the page's time_{mult,shift,cycles,mask} scale on arm64
// (cap_user_time_short: it may be narrower than 64 bits). No isb before it, as in the kernel's own user-space
// reader (tools/lib/perf): the seqlock, not the instant, makes the reading consistent.
[[gnu::always_inline]] inline std::uint64_t rdtsc() noexcept {
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v) : : "memory");
  return v;
}

// The reads as always-inlined callables: with 31 counter registers the read is a jump table, which GCC would
// otherwise keep out of line in the group read (a call on the fast path; check_fastpath_disasm.sh).
struct ReadPmc {
  [[gnu::always_inline]] std::uint64_t operator()(std::uint32_t counter) const noexcept { return rdpmc(counter); }
};
struct ReadTimestamp {
  [[gnu::always_inline]] std::uint64_t operator()() const noexcept { return rdtsc(); }
};
#else
inline std::uint64_t rdtsc() noexcept { return 0; }
#endif

}  // namespace detail

// The calling thread's own event behind `page`, read with rdpmc/rdtsc; nullopt: use read(2).
[[gnu::always_inline]] inline std::optional<PageReading> read_self(const volatile perf_event_mmap_page& page) noexcept {
#if defined(__x86_64__)
  return read_mmap_page(
      page, [](std::uint32_t counter) noexcept { return detail::rdpmc(counter); },
      []() noexcept { return detail::rdtsc(); });
#elif defined(__aarch64__)
  return read_mmap_page(page, detail::ReadPmc{}, detail::ReadTimestamp{});
#else
  (void)page;
  return std::nullopt;
#endif
}

// The members of one group of the calling thread, as one snapshot (see read_mmap_pages).
[[gnu::always_inline]] inline bool read_self_group(std::span<const volatile perf_event_mmap_page* const> pages,
                                                   PageReading* out) noexcept {
#if defined(__x86_64__)
  return read_mmap_pages(
      pages, out, [](std::uint32_t counter) noexcept { return detail::rdpmc(counter); },
      []() noexcept { return detail::rdtsc(); });
#elif defined(__aarch64__)
  return read_mmap_pages(pages, out, detail::ReadPmc{}, detail::ReadTimestamp{});
#else
  (void)pages;
  (void)out;
  return false;
#endif
}

namespace detail {
// Out-of-line copies of the two reads, compiled into the library. They exist so that
// tests/check_fastpath_disasm.sh can disassemble the production instantiation and prove that it
// contains no call; callers should use the inline functions above.
std::optional<PageReading> read_self_out_of_line(const volatile perf_event_mmap_page& page) noexcept;
bool read_self_group_out_of_line(std::span<const volatile perf_event_mmap_page* const> pages,
                                 PageReading* out) noexcept;
}  // namespace detail

}  // namespace selfperf
