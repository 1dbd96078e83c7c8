#pragma once
// Conversion between the timestamp counter (rdtsc on x86-64; on aarch64 the generic timer's virtual count,
// CNTVCT_EL0, which the kernel's sched clock runs on) and perf's clock (the timestamps of PERF_SAMPLE_TIME
// records), from the time_zero/time_mult/time_shift a perf mmap page publishes with cap_user_time_zero. Lets a
// program timestamp its own events with the counter and line them up with samples.
//
// aarch64 pages also set cap_user_time_short: the counter may be narrower than 64 bits (57 bits here) and
// time_cycles/time_mask extend it from the last update. The kernel subtracts time_cycles' share from time_zero
// so that this plain formula stays right for as long as the counter does not wrap (2^57 ticks: over 4 years at
// 1 GHz), and the plain formula, unlike the extension, also converts counts from before the page's update.
#include <cstdint>
#include <optional>

#include <linux/perf_event.h>

#include "selfperf/hw_read.hpp"
#include "selfperf/mmap_read.hpp"

namespace selfperf {

class TscClock {
 public:
  // The page's conversion, read under its seqlock; nullopt without cap_user_time_zero (e.g. the event
  // uses another clockid, the sched clock is not the TSC as in many VMs, or no timestamp counter on
  // this architecture), with time_mult 0 or time_shift >= 64, or when the page kept changing.
  static std::optional<TscClock> from_page(const volatile perf_event_mmap_page& page) noexcept {
    if (!kTimestampCounterSupported) return std::nullopt;
    for (int attempt = 0; attempt < kMaxSeqlockAttempts; ++attempt) {
      const std::uint32_t seq = detail::load(page.lock);
      if (seq & 1) continue;
      const bool has_time_zero = detail::capabilities(page).user_time_zero;
      const std::uint64_t time_zero = detail::load(page.time_zero);
      const std::uint32_t mult = detail::load(page.time_mult);
      const std::uint16_t shift = detail::load(page.time_shift);
      if (detail::load(page.lock) != seq) continue;
      if (!has_time_zero) return std::nullopt;
      return from_parameters(time_zero, mult, shift);
    }
    return std::nullopt;
  }

  // perf_ns = time_zero + tsc * mult / 2^shift; nullopt when mult is 0 or shift >= 64.
  static constexpr std::optional<TscClock> from_parameters(std::uint64_t time_zero, std::uint32_t mult,
                                                           std::uint16_t shift) noexcept {
    if (mult == 0 || shift >= 64) return std::nullopt;
    return TscClock(time_zero, mult, shift);
  }

  // The header's "timestamp = time_zero + quot * time_mult + ((rem * time_mult) >> time_shift)",
  // computed in 128 bits: the same value (floor of tsc * mult / 2^shift, modulo 2^64) for any shift.
  constexpr std::uint64_t to_perf_ns(std::uint64_t tsc) const noexcept {
    return time_zero_ + static_cast<std::uint64_t>((Wide{tsc} * mult_) >> shift_);
  }

  // The inverse: the FIRST tick whose perf time is >= perf_ns, i.e. ceil((perf_ns - time_zero) *
  // 2^shift / mult). The header's example rounds down instead (at most one tick earlier); rounding up
  // makes to_perf_ns(to_tsc(ns)) == ns exactly whenever a tick is at most 1 ns (mult <= 2^shift, a
  // counter of 1 GHz or more), otherwise it exceeds ns by less than one tick's ns. The other way,
  // to_tsc(to_perf_ns(tsc)) <= tsc, less than one ns' worth of ticks earlier: the ns lost the rest.
  // Valid for perf times after the counter's zero whose tick count fits 64 bits.
  constexpr std::uint64_t to_tsc(std::uint64_t perf_ns) const noexcept {
    const Wide since_zero = perf_ns - time_zero_;
    return static_cast<std::uint64_t>(((since_zero << shift_) + (mult_ - 1)) / mult_);
  }

  // rdtsc, or CNTVCT_EL0 on aarch64.
  static std::uint64_t now_tsc() noexcept { return detail::rdtsc(); }
  std::uint64_t now_perf_ns() const noexcept { return to_perf_ns(now_tsc()); }

  constexpr std::uint64_t time_zero() const noexcept { return time_zero_; }
  constexpr std::uint32_t time_mult() const noexcept { return mult_; }
  constexpr std::uint16_t time_shift() const noexcept { return shift_; }

 private:
  using Wide = unsigned __int128;
  constexpr TscClock(std::uint64_t time_zero, std::uint32_t mult, std::uint16_t shift) noexcept
      : time_zero_(time_zero), mult_(mult), shift_(shift) {}

  std::uint64_t time_zero_;
  std::uint32_t mult_;
  std::uint16_t shift_;
};

}  // namespace selfperf
