#pragma once
// The handler's view of a sampling event's kernel ring buffer: walks the records between data_tail and
// data_head and gives the space back. Signal-safe: no allocation, no system call. Records are 8-byte aligned
// and the data area a power of two long, so every 8-byte word is contiguous even when a record wraps.
#include <cstddef>
#include <cstdint>

#include <linux/perf_event.h>

namespace selfperf::detail {

struct KernelRing {
  perf_event_mmap_page* page = nullptr;  // null: the event has no ring buffer
  const unsigned char* data = nullptr;
  std::uint64_t mask = 0;                // data size - 1

  std::uint64_t word(std::uint64_t offset) const noexcept {
    return *reinterpret_cast<const std::uint64_t*>(data + (offset & mask));
  }

  // Calls visit(type, offset of the record's first word after the header, size in bytes) for each record,
  // then releases them to the kernel.
  template <typename Visit>
  void consume(Visit&& visit) noexcept {
    // Acquire: the record bytes the kernel wrote before publishing data_head are visible (perf_event.h asks
    // for an rmb after reading data_head).
    std::uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
    std::uint64_t tail = page->data_tail;
    while (tail < head) {
      std::uint64_t header = word(tail);
      auto type = static_cast<std::uint32_t>(header);
      auto size = static_cast<std::uint16_t>(header >> 48);
      if (size < sizeof(perf_event_header) || tail + size > head) break;  // torn or corrupt: give up the rest
      visit(type, tail + sizeof(perf_event_header), size);
      tail += size;
    }
    // Release: our reads of the records complete before the kernel may overwrite them (the mb perf_event.h
    // asks for before writing data_tail). Everything up to head is given back, even after a corrupt record.
    __atomic_store_n(&page->data_tail, head, __ATOMIC_RELEASE);
  }
};

}  // namespace selfperf::detail
