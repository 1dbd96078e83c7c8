// libunwind's cursor loop, for comparison with the unwinders (tests, bench_sampler): its own file, so that
// the preload library, which loads libunwind on demand for unw_backtrace alone, does not link it.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "selfperf/unwind.hpp"

namespace selfperf {

std::size_t unwind_libunwind_cursor(const ucontext_t& uc, std::span<std::uint64_t> out) noexcept {
  unw_cursor_t cursor;
  auto* context = const_cast<unw_context_t*>(reinterpret_cast<const unw_context_t*>(&uc));
  if (unw_init_local2(&cursor, context, UNW_INIT_SIGNAL_FRAME) < 0) return 0;
  std::size_t n = 0;
  while (n < out.size()) {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    out[n++] = ip;
    if (unw_step(&cursor) <= 0) break;
  }
  return n;
}

}  // namespace selfperf
