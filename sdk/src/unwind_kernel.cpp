// The kernel's user callchain (PERF_SAMPLE_CALLCHAIN) as a frame list: context markers dropped.
#include <linux/perf_event.h>

#include "selfperf/unwind.hpp"

namespace selfperf {

std::size_t copy_kernel_callchain(std::span<const std::uint64_t> chain, std::span<std::uint64_t> out,
                                  bool include_kernel) noexcept {
  std::size_t n = 0;
  bool in_user = true;  // chains without markers (never produced by perf, but harmless) count as user
  for (std::uint64_t addr : chain) {
    if (addr >= static_cast<std::uint64_t>(PERF_CONTEXT_MAX)) {  // PERF_CONTEXT_* markers are -32 .. -4095
      in_user = addr == static_cast<std::uint64_t>(PERF_CONTEXT_USER);
      continue;
    }
    if (!in_user && !include_kernel) continue;
    if (n == out.size()) break;
    out[n++] = addr;
  }
  return n;
}

}  // namespace selfperf
