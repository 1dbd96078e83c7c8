#pragma once
// One word of a sampled thread's stack. The unwinders have bounds-checked the address; the sanitizers must not
// check it too: the stack holds ASan's redzones and other threads' writes TSan has no reason to expect.
#include <cstdint>
#include <cstring>

namespace selfperf::detail {

[[gnu::no_sanitize("address", "thread"), gnu::always_inline]] inline std::uint64_t stack_word(
    std::uintptr_t addr) noexcept {
  std::uint64_t v;
  std::memcpy(&v, reinterpret_cast<const void*>(addr), sizeof v);
  return v;
}

}  // namespace selfperf::detail
