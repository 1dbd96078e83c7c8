#pragma once
// A leaf without call-frame information (hand-written, no FDE): every sample taken in it needs libunwind.
#include <cstdint>

// Counts n down to 0 (n > 0).
extern "C" void selfperf_test_spin_without_cfi(std::uint64_t n);
