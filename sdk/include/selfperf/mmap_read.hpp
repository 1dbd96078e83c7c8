#pragma once
// Reading a self-monitored counter from its perf_event_mmap_page without a system call: the seqlock
// loop described in the comment on struct perf_event_mmap_page in <linux/perf_event.h>.
//
// The PMC and timestamp reads are parameters, so the algorithm runs on synthetic pages in tests;
// selfperf/hw_read.hpp instantiates it with rdpmc and rdtsc.
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include <linux/perf_event.h>

namespace selfperf {

struct PageReading {
  std::uint64_t count;         // raw (unscaled) count
  std::uint64_t time_enabled;  // ns
  std::uint64_t time_running;  // ns
};

// Why a page does not allow a user-space read; the caller then falls back to read(2).
enum class MmapRefusal : std::uint8_t {
  none,            // the page allows a user-space read
  no_rdpmc,        // cap_user_rdpmc clear: no PMU, a software event, or rdpmc disabled in sysfs
  not_running,     // index 0: the event is not on a hardware counter right now
  bad_pmc_width,   // pmc_width 0 or > 64
  bad_time_shift,  // cap_user_time with time_shift >= 64: the time fields cannot be meaningful
  unstable,        // the page changed under every one of kMaxSeqlockAttempts attempts
};

constexpr std::string_view describe(MmapRefusal refusal) noexcept {
  switch (refusal) {
    case MmapRefusal::none: return "readable";
    case MmapRefusal::no_rdpmc: return "cap_user_rdpmc clear";
    case MmapRefusal::not_running: return "index 0 (event not running)";
    case MmapRefusal::bad_pmc_width: return "unusable pmc_width";
    case MmapRefusal::bad_time_shift: return "unusable time_shift";
    case MmapRefusal::unstable: return "page kept changing (seqlock retries exhausted)";
  }
  return "unknown";
}

// The kernel updates a self-monitored page on the monitored thread's own CPU with the reader
// interrupted, so a reader retries once per interrupting update, a handful of times at most. Only a
// writer on another CPU (or a corrupt page whose lock stays odd) keeps a reader retrying; after this
// many attempts read(2) is the better answer, and the read gives up instead of spinning forever.
inline constexpr int kMaxSeqlockAttempts = 64;

// The most pages read_mmap_pages() reads at once (their lock values live on the stack).
inline constexpr std::size_t kMaxMmapGroupPages = 16;

namespace detail {

// The kernel's READ_ONCE: one untorn load the compiler may neither repeat nor drop. Acquire ordering
// keeps every later load (and rdpmc, whose asm clobbers memory) after it, which is the kernel's
// barrier(); on x86-64 an acquire load is a plain mov. Being an atomic load it is also what makes a
// reader racing a writer thread (the synthetic tests) well defined and TSan-clean; volatile alone is
// neither. GCC/Clang's __atomic builtins accept the page's volatile fields.
template <class T>
[[gnu::always_inline]] inline T load(const volatile T& field) noexcept {
  return __atomic_load_n(&field, __ATOMIC_ACQUIRE);
}

// The kernel's capability bit-fields, declared the same way so that decoding one loaded word follows
// the same ABI as the page itself (a bit-field cannot be loaded atomically on its own).
struct Capabilities {
  std::uint64_t bit0 : 1, bit0_is_deprecated : 1, user_rdpmc : 1, user_time : 1, user_time_zero : 1,
      user_time_short : 1, reserved : 58;
};
static_assert(sizeof(Capabilities) == sizeof(std::uint64_t));

inline Capabilities capabilities(const volatile perf_event_mmap_page& page) noexcept {
  return std::bit_cast<Capabilities>(static_cast<std::uint64_t>(load(page.capabilities)));
}

constexpr MmapRefusal refusal(Capabilities caps, std::uint32_t index, std::uint16_t pmc_width,
                              std::uint16_t time_shift) noexcept {
  if (!caps.user_rdpmc) return MmapRefusal::no_rdpmc;
  if (index == 0) return MmapRefusal::not_running;
  if (pmc_width == 0 || pmc_width > 64) return MmapRefusal::bad_pmc_width;
  if (caps.user_time && time_shift >= 64) return MmapRefusal::bad_time_shift;
  return MmapRefusal::none;
}

// The header's "pmc <<= 64 - width; pmc >>= 64 - width", for width in [1, 64]. Both shifts stay below
// 64, and since C++20 the conversion to signed and the right shift of a negative value are defined.
constexpr std::uint64_t sign_extend(std::uint64_t value, unsigned width) noexcept {
  const unsigned unused = 64 - width;
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(value << unused) >> unused);
}

// The header's quot/rem split of cyc * mult >> shift, for shift in [0, 63]. It equals the exact
// floor(cyc * mult / 2^shift) modulo 2^64 while rem * mult fits, i.e. for shift <= 32 (the kernel
// publishes at most 32); beyond that it wraps exactly like the kernel's formula, defined but meaningless.
constexpr std::uint64_t scale_cycles(std::uint64_t cyc, std::uint32_t mult, unsigned shift) noexcept {
  const std::uint64_t quot = cyc >> shift;
  const std::uint64_t rem = cyc & ((std::uint64_t{1} << shift) - 1);
  return quot * mult + ((rem * mult) >> shift);
}

// One attempt's reads of one page, in the order of the header's loop; the caller brackets it with
// the lock. Unsigned arithmetic throughout: the kernel's own sums wrap modulo 2^64 as well.
template <class ReadPmc, class ReadTimestamp>
[[gnu::always_inline]] inline MmapRefusal read_fields(const volatile perf_event_mmap_page& page, ReadPmc& read_pmc,
                                                      ReadTimestamp& read_timestamp, PageReading& out) noexcept {
  // Locals until the end: the acquire loads would otherwise pin every store to `out` in place.
  const Capabilities caps = capabilities(page);
  const std::uint64_t enabled = load(page.time_enabled);
  const std::uint64_t running = load(page.time_running);

  // Time since the page's last update, 0 without cap_user_time (the times are then the page's own).
  // Computed right away so that only `delta` stays live, not the four fields it comes from.
  std::uint64_t delta = 0;
  std::uint16_t time_shift = 0;
  if (caps.user_time) {
    std::uint64_t cyc = read_timestamp();
    const std::uint64_t time_offset = load(page.time_offset);
    const std::uint32_t time_mult = load(page.time_mult);
    time_shift = load(page.time_shift);
    if (caps.user_time_short) {
      // The hardware clock is narrower than 64 bits: extend it from the last update's value.
      const std::uint64_t time_cycles = load(page.time_cycles);
      cyc = time_cycles + ((cyc - time_cycles) & load(page.time_mask));
    }
    // A time_shift >= 64 is refused below; the mask keeps this (then discarded) computation defined.
    delta = time_offset + scale_cycles(cyc, time_mult, time_shift & 63u);
  }

  const std::uint32_t index = load(page.index);
  const std::uint64_t offset = static_cast<std::uint64_t>(load(page.offset));
  const std::uint16_t width = load(page.pmc_width);
  if (const MmapRefusal r = refusal(caps, index, width, time_shift); r != MmapRefusal::none) return r;
  const std::uint64_t count = offset + sign_extend(read_pmc(index - 1), width);
  // index != 0 here: the event sits on a counter, so since the update it has been running for exactly
  // as long as it has been enabled (the header's "enabled += delta; if (index) running += delta").
  out = PageReading{count, enabled + delta, running + delta};
  return MmapRefusal::none;
}

}  // namespace detail

// Reads the counter behind `page` (the calling thread's own event) without a system call.
//   read_pmc(counter) -> uint64_t: the raw hardware counter `counter` (index - 1), e.g. rdpmc.
//   read_timestamp() -> uint64_t: the clock the time fields scale, e.g. rdtsc; called only with
//   cap_user_time.
// nullopt when the page does not allow it (see check_mmap_page for why) or kept changing for
// kMaxSeqlockAttempts attempts: fall back to read(2). Times are advanced to now with cap_user_time
// (always, not only when enabled != running as in the header's example, so that time deltas between
// two fast reads are right); without it they are the page's own, as of its last update.
// Any page contents give defined behaviour. Always inlined: it is the hot path of every fast read, and
// inlining is what lets the PMC/timestamp callables (function references included) become plain code.
template <class ReadPmc, class ReadTimestamp>
[[gnu::always_inline]] inline std::optional<PageReading> read_mmap_page(const volatile perf_event_mmap_page& page,
                                                                        ReadPmc&& read_pmc,
                                                                        ReadTimestamp&& read_timestamp) noexcept {
  for (int attempt = 0; attempt < kMaxSeqlockAttempts; ++attempt) {
    const std::uint32_t seq = detail::load(page.lock);
    if (seq & 1) continue;  // an update is in flight on another CPU
    PageReading reading{};
    const MmapRefusal refusal = detail::read_fields(page, read_pmc, read_timestamp, reading);
    if (detail::load(page.lock) != seq) continue;  // the page changed under us: retry
    if (refusal != MmapRefusal::none) return std::nullopt;
    return reading;
  }
  return std::nullopt;
}

// Reads several pages (the members of one group, all the calling thread's own events) as one
// snapshot: every lock is read, then every member, then every lock again, and the attempt is retried
// if any lock was odd or moved. The readings therefore held all at once at one instant (one
// scheduling interval); one timestamp serves all members. Pointers must not be null.
// false when any page refuses, there are more than kMaxMmapGroupPages pages, or kMaxSeqlockAttempts
// attempts failed: fall back to read(2) (check_mmap_page tells which member refuses and why).
// `out` receives pages.size() readings; on false its contents are unspecified.
template <class ReadPmc, class ReadTimestamp>
[[gnu::always_inline]] inline bool read_mmap_pages(std::span<const volatile perf_event_mmap_page* const> pages,
                                                   PageReading* out, ReadPmc&& read_pmc,
                                                   ReadTimestamp&& read_timestamp) noexcept {
  const std::size_t n = pages.size();
  if (n == 1) {  // the common one-event group: the single-page loop is a third cheaper than the general one
    const std::optional<PageReading> reading = read_mmap_page(*pages[0], read_pmc, read_timestamp);
    if (reading) out[0] = *reading;
    return reading.has_value();
  }
  if (n > kMaxMmapGroupPages) return false;
  std::array<std::uint32_t, kMaxMmapGroupPages> seqs;
  for (int attempt = 0; attempt < kMaxSeqlockAttempts; ++attempt) {
    bool in_flight = false;
    for (std::size_t i = 0; i < n; ++i) {
      seqs[i] = detail::load(pages[i]->lock);
      in_flight |= (seqs[i] & 1) != 0;
    }
    if (in_flight) continue;

    std::uint64_t cyc = 0;
    bool have_cyc = false;
    auto shared_timestamp = [&]() noexcept {
      if (!have_cyc) {
        cyc = read_timestamp();
        have_cyc = true;
      }
      return cyc;
    };
    MmapRefusal refusal = MmapRefusal::none;
    for (std::size_t i = 0; i < n && refusal == MmapRefusal::none; ++i)
      refusal = detail::read_fields(*pages[i], read_pmc, shared_timestamp, out[i]);

    bool moved = false;
    for (std::size_t i = 0; i < n; ++i) moved |= detail::load(pages[i]->lock) != seqs[i];
    if (moved) continue;
    return refusal == MmapRefusal::none;
  }
  return false;
}

// Whether `page` allows a user-space read now and, if not, why (decided on one consistent snapshot).
inline MmapRefusal check_mmap_page(const volatile perf_event_mmap_page& page) noexcept {
  for (int attempt = 0; attempt < kMaxSeqlockAttempts; ++attempt) {
    const std::uint32_t seq = detail::load(page.lock);
    if (seq & 1) continue;
    const detail::Capabilities caps = detail::capabilities(page);
    const std::uint32_t index = detail::load(page.index);
    const std::uint16_t width = detail::load(page.pmc_width);
    const std::uint16_t time_shift = detail::load(page.time_shift);
    if (detail::load(page.lock) != seq) continue;
    return detail::refusal(caps, index, width, time_shift);
  }
  return MmapRefusal::unstable;
}

// describe(check_mmap_page(page)): "readable" or why not, e.g. "cap_user_rdpmc clear".
inline std::string_view mmap_page_refusal_reason(const volatile perf_event_mmap_page& page) noexcept {
  return describe(check_mmap_page(page));
}

}  // namespace selfperf
