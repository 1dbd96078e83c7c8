#pragma once
// One thread's sample buffer: the signal handler on that thread produces, drain() consumes. A ring of words
// mapped up front, so the producer never allocates, locks or blocks: a full buffer refuses.
//
// Records are as long as their stacks (header + the frames actually unwound), not max_depth long: at perf's
// depth of 127 a fixed-size record is 1 KiB where a typical stack needs 200-300 bytes. And the ring is an
// anonymous mapping nobody writes before a sample does, so a thread costs the pages its samples have
// touched, not its capacity: a program that starts a thousand mostly idle threads, or a process that ends
// before its first sample, pays almost nothing (the old zero-filled array cost 1 MiB and ~2 ms a thread).
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>

#include "selfperf/sample.hpp"

namespace selfperf::detail {

class SampleBuffer {
 public:
  // A record: tid, time, period, cpu, frame count, then that many frames.
  static constexpr std::size_t kHeaderWords = 5;
  // The stack depth that buffer_capacity counts in: samples of deeper stacks take more room (at most
  // kHeaderWords + max_depth words each), shallower ones less.
  static constexpr std::size_t kTypicalDepth = 32;

  // Room for `capacity` records of kTypicalDepth frames (fewer if max_depth is smaller), and never less than
  // two of the deepest.
  static std::size_t words_for(std::size_t capacity, std::size_t max_depth) noexcept {
    const std::size_t full = kHeaderWords + max_depth;
    return std::max(capacity * (kHeaderWords + std::min(max_depth, kTypicalDepth)), 2 * full);
  }

  // Throws std::bad_alloc when the mapping fails (the thread then runs unsampled, see attach_this_thread).
  SampleBuffer(std::size_t capacity, std::size_t max_depth)
      : max_depth_(max_depth), full_record_(kHeaderWords + max_depth), size_(words_for(capacity, max_depth)) {
    void* p = ::mmap(nullptr, size_ * sizeof(std::uint64_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    words_ = static_cast<std::uint64_t*>(p);
  }
  ~SampleBuffer() { ::munmap(words_, size_ * sizeof(std::uint64_t)); }
  SampleBuffer(const SampleBuffer&) = delete;
  SampleBuffer& operator=(const SampleBuffer&) = delete;

  std::size_t max_depth() const noexcept { return max_depth_; }
  std::size_t size_words() const noexcept { return size_; }

  // Producer: the frame area of the next record (room for max_depth frames), or an empty span when the
  // unread records leave no room for a full one.
  std::span<std::uint64_t> reserve() noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    // A record never wraps: where fewer than a full record's words remain before the end, it starts at 0
    // and the rest of the end is skipped. drain() applies the same rule, so no marker is written.
    skip_ = write_pos_ + full_record_ > size_ ? size_ - write_pos_ : 0;
    // Acquire pairs with the consumer's release: it finished reading the words we are about to reuse.
    if (head - tail_.load(std::memory_order_acquire) + skip_ + full_record_ > size_) return {};
    record_ = skip_ ? 0 : write_pos_;
    return {words_ + record_ + kHeaderWords, max_depth_};
  }

  // Producer: fills the reserved record's header and publishes it.
  void commit(pid_t tid, std::uint64_t time, std::uint64_t period, std::uint32_t cpu, std::size_t frames) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    std::uint64_t* r = words_ + record_;
    r[0] = static_cast<std::uint64_t>(tid);
    r[1] = time;
    r[2] = period;
    r[3] = cpu;
    r[4] = frames;
    write_pos_ = record_ + kHeaderWords + frames;
    // Release: the record's words are visible before the consumer sees the new head.
    head_.store(head + skip_ + kHeaderWords + frames, std::memory_order_release);
  }

  // Consumer (one at a time): calls fn(const Sample&) for each record; returns how many.
  template <typename Fn>
  std::size_t consume(pid_t pid, Fn&& fn) {
    if (corrupt_) return 0;
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    std::size_t n = 0;
    while (tail < head) {
      if (read_pos_ + full_record_ > size_) {  // the producer's rule: this record starts at 0
        tail += size_ - read_pos_;
        read_pos_ = 0;
      }
      const std::uint64_t* r = words_ + read_pos_;
      const std::size_t frames = static_cast<std::size_t>(r[4]);
      // A record that is not one: two producers interleaved (a handler interrupted by another on its thread).
      // Positions are lost from here on, so nothing more is read: without the stop, a consumer that missed
      // the head read garbage records without end (8 million in one run, 580 MB of perf.data).
      if (frames > max_depth_ || tail + kHeaderWords + frames > head) {
        corrupt_ = true;
        break;
      }
      Sample s;
      s.pid = pid;
      s.tid = static_cast<pid_t>(r[0]);
      s.time = r[1];
      s.period = r[2];
      s.cpu = static_cast<std::uint32_t>(r[3]);
      s.frames = {r + kHeaderWords, frames};
      fn(s);
      read_pos_ += kHeaderWords + frames;
      tail += kHeaderWords + frames;
      ++n;
      tail_.store(tail, std::memory_order_release);
    }
    return n;
  }

  // Consumer: whether consume() found a record that was not one and stopped reading for good.
  bool corrupt() const noexcept { return corrupt_; }

  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  const std::size_t max_depth_;
  const std::size_t full_record_;  // kHeaderWords + max_depth_
  const std::size_t size_;         // words in the ring
  std::uint64_t* words_ = nullptr;
  // Words ever written and read (a record's skipped end included), and where each side is in the ring.
  alignas(64) std::atomic<std::uint64_t> head_{0};
  std::size_t write_pos_ = 0;  // producer's own
  std::size_t record_ = 0;     // producer's own: where reserve() put the record commit() publishes
  std::size_t skip_ = 0;       // producer's own: words reserve() skipped at the ring's end
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::size_t read_pos_ = 0;  // consumer's own
  bool corrupt_ = false;      // consumer's own
};

}  // namespace selfperf::detail
