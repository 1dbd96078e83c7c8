#pragma once
// The production fast path: read_mmap_page() instantiated with rdpmc and rdtsc (x86-64). Elsewhere it
// compiles and always answers nullopt/false, so callers fall back to read(2).
#include <cstdint>
#include <optional>
#include <span>

#include <linux/perf_event.h>

#include "selfperf/mmap_read.hpp"

namespace selfperf {

#if defined(__x86_64__)
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
