#pragma once
// Workload functions for the sampler tests, each in its own named section so that the linker's
// __start_<section>/__stop_<section> symbols give its exact address range (no symbol table needed).
#include <cstdint>
#include <mutex>
#include <span>

#if defined(__SANITIZE_THREAD__)
#define SELFPERF_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SELFPERF_TEST_TSAN 1
#endif
#endif
#ifndef SELFPERF_TEST_TSAN
#define SELFPERF_TEST_TSAN 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define SELFPERF_TEST_ASAN 1
#else
#define SELFPERF_TEST_ASAN 0
#endif

namespace selfperf_test {

// ASan's allocator is an order of magnitude slower: allocation-heavy loops scale their work down.
inline constexpr bool kAsan = SELFPERF_TEST_ASAN != 0;

// TSan delays asynchronous signals to its next safe point, so the interrupted IP is not where time is spent.
inline constexpr bool kTsan = SELFPERF_TEST_TSAN != 0;

// TSan runs a signal's handler when the thread next leaves one of its interceptors, with the context saved at
// delivery. Workloads call this between short bursts (shorter than the sampling period) so that each
// overflow is handled, and attributed to the burst it interrupted, before the next one. A no-op otherwise.
inline void signal_point() {
  if constexpr (kTsan) {
    static std::mutex m;
    m.lock();  // an intercepted call
    m.unlock();
  }
}

struct CodeRange {
  const char* name;
  std::uintptr_t begin;
  std::uintptr_t end;
  bool contains(std::uint64_t addr) const noexcept { return addr >= begin && addr < end; }
};

// Every workload function starts on a 64-byte boundary. Identical instructions are not identical cost when they
// sit differently against the front end's 32/64-byte fetch windows: packed one after another, sp_burn_b's loop
// (ASan build) began on a 32-byte boundary, sp_burn_c's spanned three windows and sp_burn_a's loop branch ended
// on one (the case Intel's JCC-erratum microcode slows). In one CI run (a machine whose CPU this session could
// not see) c's samples per iteration were 1.2-1.7x b's with both unwinders, the 50/30/20 split came out
// 49/24/27 and 51/27/22; this AMD VM runs the three alike. Aligned, every copy meets the same boundaries at the
// same instructions.
#define SELFPERF_TEST_CODE_ALIGN 64

// A register-only dependent chain: identical cost per iteration in every copy, nothing for sanitizers to
// instrument inside the loop. `salt` keeps the copies distinct.
#define SELFPERF_TEST_BURN(name, salt)                                               \
  extern "C" [[gnu::noipa, gnu::noinline, gnu::used, gnu::section("text_" #name),      \
               gnu::aligned(SELFPERF_TEST_CODE_ALIGN)]] std::uint64_t name(std::uint64_t n) { \
    std::uint64_t x = salt;                                                          \
    for (std::uint64_t i = 0; i < n; ++i) {                                          \
      x = x * 6364136223846793005u + 1442695040888963407u;                           \
      asm volatile("" : "+r"(x));                                                    \
    }                                                                                \
    return x;                                                                        \
  }                                                                                  \
  extern "C" char __start_text_##name[], __stop_text_##name[];                                 \
  inline CodeRange name##_range() {                                                  \
    return {#name, reinterpret_cast<std::uintptr_t>(__start_text_##name),                 \
            reinterpret_cast<std::uintptr_t>(__stop_text_##name)};                        \
  }

// A caller in its own section: `name` calls `callee`.
#define SELFPERF_TEST_CALLER(name, callee)                                           \
  extern "C" [[gnu::noipa, gnu::noinline, gnu::used, gnu::section("text_" #name),      \
               gnu::aligned(SELFPERF_TEST_CODE_ALIGN)]] std::uint64_t name(std::uint64_t n) { \
    return callee(n) + 1;                                                            \
  }                                                                                  \
  extern "C" char __start_text_##name[], __stop_text_##name[];                                 \
  inline CodeRange name##_range() {                                                  \
    return {#name, reinterpret_cast<std::uintptr_t>(__start_text_##name),                 \
            reinterpret_cast<std::uintptr_t>(__stop_text_##name)};                        \
  }

// The first frame, leaf first, that lies in one of `ranges`; -1 when none does.
inline int attribute(std::span<const std::uint64_t> frames, std::span<const CodeRange> ranges) {
  for (std::uint64_t f : frames)
    for (std::size_t i = 0; i < ranges.size(); ++i)
      if (ranges[i].contains(f)) return static_cast<int>(i);
  return -1;
}

}  // namespace selfperf_test
