// The body of selfperf_test_spin_without_cfi (spin_without_cfi.hpp), linked into the tests that use it.
#include "spin_without_cfi.hpp"

// A leaf without call-frame information (hand-written, no FDE): every sample taken in it needs libunwind.
#if defined(__aarch64__)
asm(R"(
  .text
  .globl selfperf_test_spin_without_cfi
  .type selfperf_test_spin_without_cfi, %function
selfperf_test_spin_without_cfi:
1:
  subs x0, x0, #1
  b.ne 1b
  ret
  .size selfperf_test_spin_without_cfi, .-selfperf_test_spin_without_cfi
)");
#else
asm(R"(
  .text
  .globl selfperf_test_spin_without_cfi
  .type selfperf_test_spin_without_cfi, @function
selfperf_test_spin_without_cfi:
1:
  dec %rdi
  jnz 1b
  ret
  .size selfperf_test_spin_without_cfi, .-selfperf_test_spin_without_cfi
)");
#endif
