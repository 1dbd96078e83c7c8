#pragma once
// One thread's sample buffer: the signal handler on that thread produces, drain() consumes. Fixed-size
// records allocated up front, so the producer never allocates, locks or blocks: a full buffer refuses.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>

#include "selfperf/sample.hpp"

namespace selfperf::detail {

class SampleBuffer {
 public:
  // A record: tid, time, period, cpu, frame count, then up to max_depth frames.
  static constexpr std::size_t kHeaderWords = 5;

  SampleBuffer(std::size_t capacity, std::size_t max_depth)
      : capacity_(capacity),
        max_depth_(max_depth),
        stride_(kHeaderWords + max_depth),
        words_(std::make_unique<std::uint64_t[]>(capacity * stride_)) {}

  std::size_t max_depth() const noexcept { return max_depth_; }

  // Producer: the frame area of the next free record, or an empty span when the buffer is full.
  std::span<std::uint64_t> reserve() noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    // Acquire pairs with the consumer's release: it finished reading the record we are about to reuse.
    if (head - tail_.load(std::memory_order_acquire) >= capacity_) return {};
    return {record(write_slot_) + kHeaderWords, max_depth_};
  }

  // Producer: fills the reserved record's header and publishes it.
  void commit(pid_t tid, std::uint64_t time, std::uint64_t period, std::uint32_t cpu, std::size_t frames) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    std::uint64_t* r = record(write_slot_);
    write_slot_ = write_slot_ + 1 == capacity_ ? 0 : write_slot_ + 1;
    r[0] = static_cast<std::uint64_t>(tid);
    r[1] = time;
    r[2] = period;
    r[3] = cpu;
    r[4] = frames;
    // Release: the record's words are visible before the consumer sees the new head.
    head_.store(head + 1, std::memory_order_release);
  }

  // Consumer (one at a time): calls fn(const Sample&) for each record; returns how many.
  template <typename Fn>
  std::size_t consume(pid_t pid, Fn&& fn) {
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t head = head_.load(std::memory_order_acquire);
    std::size_t n = 0;
    for (; tail != head; ++tail, ++n) {
      const std::uint64_t* r = record(read_slot_);
      read_slot_ = read_slot_ + 1 == capacity_ ? 0 : read_slot_ + 1;
      Sample s;
      s.pid = pid;
      s.tid = static_cast<pid_t>(r[0]);
      s.time = r[1];
      s.period = r[2];
      s.cpu = static_cast<std::uint32_t>(r[3]);
      s.frames = {r + kHeaderWords, static_cast<std::size_t>(r[4])};
      fn(s);
      tail_.store(tail + 1, std::memory_order_release);
    }
    return n;
  }

  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  std::uint64_t* record(std::size_t slot) const noexcept { return words_.get() + slot * stride_; }

  const std::size_t capacity_;
  const std::size_t max_depth_;
  const std::size_t stride_;
  std::unique_ptr<std::uint64_t[]> words_;
  // Counts of records ever written and read, and where each side is in the array: the slots advance by
  // compare and reset, not `count % capacity` (a 64-bit division, ~40-90 cycles, twice per sample).
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::size_t write_slot_ = 0;  // producer's own
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::size_t read_slot_ = 0;  // consumer's own
};

}  // namespace selfperf::detail
