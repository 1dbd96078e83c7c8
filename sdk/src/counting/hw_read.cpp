// Out-of-line instantiations of the production fast path, for tests/check_fastpath_disasm.sh.
#include "selfperf/hw_read.hpp"

namespace selfperf::detail {

std::optional<PageReading> read_self_out_of_line(const volatile perf_event_mmap_page& page) noexcept {
  return read_self(page);
}

bool read_self_group_out_of_line(std::span<const volatile perf_event_mmap_page* const> pages,
                                 PageReading* out) noexcept {
  return read_self_group(pages, out);
}

}  // namespace selfperf::detail
