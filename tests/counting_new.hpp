#pragma once
// Replaces the global operator new/delete of the test binary that includes this header (include it from one
// file only: these are the program's definitions) so a test can prove a stretch of code never allocates:
// compare selfperf::test::allocations before and after.
#include <atomic>
#include <cstdlib>
#include <new>

namespace selfperf::test {
inline std::atomic<unsigned long> allocations{0};
}

// GCC flags free() in a replaced operator delete as a mismatch with operator new; here they are the pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t size) {
  selfperf::test::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
