#pragma once
// RingBuffer: the reader side of a perf event's mmap (one control page + 2^n data pages).
//
// The kernel writes records at data_head; we read from data_tail up to data_head and then store data_tail
// back, which (the mapping being PROT_WRITE) tells the kernel it may reuse that space. The kernel never
// overwrites unread data: when the buffer is full it drops records and later emits PERF_RECORD_LOST
// (or PERF_RECORD_LOST_SAMPLES), which read() counts in stats().
//
// read() never allocates, takes no lock and makes no system call, so it may run in a signal handler (the
// sampler's kernel-callchain mode consumes its buffer from the overflow signal). One reader per buffer.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <utility>

#include <linux/perf_event.h>

namespace selfperf {

// One record as read from the ring: its header and all header.size bytes (header included). The bytes are
// 8-byte aligned and valid only during the read() callback (a record that wraps around the end of the
// ring is handed out from a scratch copy that the next record reuses).
struct RecordView {
  perf_event_header header{};
  std::span<const std::byte> bytes;

  std::uint32_t type() const noexcept { return header.type; }
  std::uint16_t misc() const noexcept { return header.misc; }
  // The record after its 8-byte header.
  std::span<const std::byte> payload() const noexcept { return bytes.subspan(sizeof(perf_event_header)); }
};

// What a ring buffer saw, over its lifetime. Lost counts come from the kernel's own records.
struct RingBufferStats {
  std::uint64_t records = 0;        // records handed to callbacks (all types)
  std::uint64_t samples = 0;        // of which PERF_RECORD_SAMPLE
  std::uint64_t lost = 0;           // sum of PERF_RECORD_LOST.lost (records the kernel could not write)
  std::uint64_t lost_records = 0;   // number of PERF_RECORD_LOST records
  std::uint64_t lost_samples = 0;   // sum of PERF_RECORD_LOST_SAMPLES.lost (dropped inside the PMU driver)
  std::uint64_t throttles = 0;      // PERF_RECORD_THROTTLE
  std::uint64_t unthrottles = 0;    // PERF_RECORD_UNTHROTTLE
  std::uint64_t corruptions = 0;    // times an impossible header forced a resync to data_head
  std::uint64_t bytes_dropped = 0;  // bytes skipped by those resyncs

  // Everything known lost: kernel-side drops plus those of the PMU driver.
  std::uint64_t total_lost() const noexcept { return lost + lost_samples; }
};

// Why the last resync happened (for a report; read() itself never throws).
struct RingCorruption {
  std::uint64_t position = 0;  // data_tail offset (not masked) of the bad header
  std::uint32_t type = 0;
  std::uint16_t size = 0;      // the header.size found there
  std::uint64_t available = 0; // bytes between tail and head at that time
};

class RingBuffer {
 public:
  // mmaps 1 + data_pages pages of the perf event `fd` (data_pages a power of two, ≥ 1), PROT_READ|PROT_WRITE.
  // Throws selfperf::Error: bad page count, EPERM/ENOMEM with the perf_event_mlock_kb limit, other errno.
  // Does not take ownership of fd (the caller keeps it open at least as long as the RingBuffer).
  RingBuffer(int fd, std::size_t data_pages);
  // Over caller memory: a (possibly fake) control page and the data area (size a power of two, ≥ 8,
  // 8-byte aligned). The memory must outlive the RingBuffer. Throws selfperf::Error on a bad size.
  RingBuffer(perf_event_mmap_page* control, std::span<std::byte> data);

  // A moved-from RingBuffer may only be destroyed or assigned to.
  RingBuffer(RingBuffer&& other) noexcept;
  RingBuffer& operator=(RingBuffer&& other) noexcept;
  RingBuffer(const RingBuffer&) = delete;
  RingBuffer& operator=(const RingBuffer&) = delete;
  ~RingBuffer();

  // Calls on_record(const RecordView&) for each record between data_tail and the data_head observed at
  // entry (at most max_records), then publishes the new data_tail. Returns the number of records handed
  // out. A header that cannot be right (size < 8, not a multiple of 8, larger than what is available or
  // than the buffer) counts a corruption, drops everything up to data_head and ends the call; the loop is
  // bounded by the head snapshot, so it always terminates. If on_record throws, that record and the ones
  // before it stay consumed (data_tail is published) and the exception propagates.
  template <class F>
  std::size_t read(F&& on_record, std::size_t max_records = std::numeric_limits<std::size_t>::max());

  // Bytes between data_tail and data_head now.
  std::uint64_t pending_bytes() const noexcept;
  bool empty() const noexcept { return pending_bytes() == 0; }
  // Drops everything currently in the buffer (counts nothing as lost: the caller chose to skip it).
  void discard() noexcept;

  const RingBufferStats& stats() const noexcept { return stats_; }
  // The latest resync's details; valid when stats().corruptions > 0.
  const RingCorruption& last_corruption() const noexcept { return corruption_; }

  perf_event_mmap_page* control() const noexcept { return control_; }
  std::size_t data_size() const noexcept { return mask_ + 1; }
  // Whether this RingBuffer mmapped the memory itself (vs. caller-provided).
  bool owns_mapping() const noexcept { return map_ != nullptr; }
  // Forgets the mapping without unmapping it; afterwards the RingBuffer may only be destroyed or assigned
  // to (stats() stays readable). For a forked child: the kernel does not copy a perf mapping into the child
  // (VM_DONTCOPY), so that address range is free there and may by now hold something else of the child's.
  void forget_mapping() noexcept;

 private:
  std::uint64_t load_head() const noexcept;
  void store_tail(std::uint64_t tail) noexcept;
  // Bookkeeping common to every record (lost/throttle counters); defined in ring_buffer.cpp.
  void account(const RecordView& record) noexcept;
  void resync(std::uint64_t tail, std::uint64_t head, const perf_event_header& bad) noexcept;
  void release() noexcept;

  perf_event_mmap_page* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t mask_ = 0;
  void* map_ = nullptr;           // non-null when we own the mmap
  std::size_t map_length_ = 0;
  // Records that wrap around the end are copied here (size: min(data size, 64 KiB), the most a u16
  // header.size can describe); allocated once at construction.
  std::unique_ptr<std::uint64_t[]> scratch_;
  std::size_t scratch_bytes_ = 0;
  RingBufferStats stats_{};
  RingCorruption corruption_{};
};

// ---- implementation of the template ----

template <class F>
std::size_t RingBuffer::read(F&& on_record, std::size_t max_records) {
  const std::uint64_t head = load_head();
  std::uint64_t tail = control_->data_tail;  // only we write it
  const std::uint64_t size = mask_ + 1;

  // Publishes how far we got even if on_record throws, so consumed records are not read twice.
  struct TailGuard {
    RingBuffer* ring;
    std::uint64_t* tail;
    std::uint64_t start;
    ~TailGuard() {
      if (*tail != start) ring->store_tail(*tail);
    }
  } guard{this, &tail, tail};

  std::size_t count = 0;
  while (count < max_records && head - tail != 0) {
    const std::uint64_t available = head - tail;
    const std::uint64_t offset = tail & mask_;
    perf_event_header header{};
    // Records are 8-aligned and at least 8 bytes, so a header never straddles the end of the ring unless
    // the tail itself is corrupt; check that before reading it.
    if (available > size || available < sizeof header || (tail & 7u) != 0) {
      resync(tail, head, header);
      tail = head;
      break;
    }
    std::memcpy(&header, data_ + offset, sizeof header);
    if (header.size < sizeof header || (header.size & 7u) != 0 || header.size > available ||
        header.size > size) {
      resync(tail, head, header);
      tail = head;
      break;
    }
    RecordView view;
    view.header = header;
    if (offset + header.size <= size) {
      view.bytes = {data_ + offset, header.size};
    } else {
      auto* out = reinterpret_cast<std::byte*>(scratch_.get());
      const std::size_t first = static_cast<std::size_t>(size - offset);
      std::memcpy(out, data_ + offset, first);
      std::memcpy(out + first, data_, header.size - first);
      view.bytes = {out, header.size};
    }
    account(view);
    tail += header.size;  // before the callback: a throwing callback still consumed this record
    ++count;
    on_record(static_cast<const RecordView&>(view));
  }
  return count;
}

}  // namespace selfperf
