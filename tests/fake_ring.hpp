#pragma once
// Test helpers: a fake perf mmap (control page + data area) that a test writes records into the way the
// kernel does, and a builder for records laid out by hand.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include <linux/perf_event.h>

#include "selfperf/ring_buffer.hpp"

namespace selfperf::testing {

// Builds one record: header then 8-byte words (and raw bytes padded by the caller as the kernel does).
class RecordBuilder {
 public:
  RecordBuilder(std::uint32_t type, std::uint16_t misc = 0) : type_(type), misc_(misc) { words_.push_back(0); }
  RecordBuilder& u64(std::uint64_t v) {
    words_.push_back(v);
    return *this;
  }
  RecordBuilder& u32_pair(std::uint32_t lo, std::uint32_t hi) {
    return u64(static_cast<std::uint64_t>(lo) | (static_cast<std::uint64_t>(hi) << 32));
  }
  // Appends raw bytes, zero-padded to the next multiple of 8.
  RecordBuilder& bytes(const void* p, std::size_t n) {
    std::size_t at = words_.size();
    words_.resize(at + (n + 7) / 8, 0);
    std::memcpy(words_.data() + at, p, n);
    return *this;
  }
  // The finished record; header.size = the bytes written unless `size_override` is given.
  std::vector<std::uint64_t> finish(int size_override = -1) const {
    std::vector<std::uint64_t> out = words_;
    perf_event_header h{};
    h.type = type_;
    h.misc = misc_;
    h.size = static_cast<std::uint16_t>(size_override >= 0 ? size_override : out.size() * 8);
    std::memcpy(out.data(), &h, sizeof h);
    return out;
  }

 private:
  std::uint32_t type_;
  std::uint16_t misc_;
  std::vector<std::uint64_t> words_;
};

// A fake mmap: a control page and a data area of `data_bytes` (a power of two). write() plays the kernel.
class FakeRing {
 public:
  explicit FakeRing(std::size_t data_bytes)
      : control_(std::make_unique<perf_event_mmap_page>()), data_(data_bytes / 8, 0) {
    control_->data_offset = 4096;
    control_->data_size = data_bytes;
  }

  RingBuffer ring() { return RingBuffer(control_.get(), std::as_writable_bytes(std::span(data_))); }
  perf_event_mmap_page& control() { return *control_; }
  std::size_t size() const { return data_.size() * 8; }

  // Copies the words at data_head (wrapping) if they fit before data_tail, like perf_output_begin, then
  // publishes the new head with a release store. Returns false (writes nothing) when there is no room.
  bool write(std::span<const std::uint64_t> words) {
    const std::uint64_t head = control_->data_head;
    const std::uint64_t tail = std::atomic_ref<__u64>(control_->data_tail).load(std::memory_order_acquire);
    const std::size_t n = words.size() * 8;
    if (head - tail + n > size()) return false;
    auto* bytes = reinterpret_cast<std::byte*>(data_.data());
    const std::size_t off = head & (size() - 1);
    const std::size_t first = std::min(n, size() - off);
    std::memcpy(bytes + off, words.data(), first);
    std::memcpy(bytes, reinterpret_cast<const std::byte*>(words.data()) + first, n - first);
    std::atomic_ref<__u64>(control_->data_head).store(head + n, std::memory_order_release);
    return true;
  }
  bool write(const std::vector<std::uint64_t>& words) { return write(std::span<const std::uint64_t>(words)); }

  // Moves data_head by `bytes` without writing anything there (for corrupt-state tests).
  void advance_head(std::uint64_t bytes) { control_->data_head += bytes; }
  void set_positions(std::uint64_t tail, std::uint64_t head) {
    control_->data_tail = tail;
    control_->data_head = head;
  }
  // Writes raw words at an absolute ring offset without touching the head.
  void poke(std::uint64_t position, std::uint64_t word) {
    std::memcpy(reinterpret_cast<std::byte*>(data_.data()) + (position & (size() - 1)), &word, 8);
  }

 private:
  std::unique_ptr<perf_event_mmap_page> control_;
  std::vector<std::uint64_t> data_;
};

}  // namespace selfperf::testing
