// The per-thread sample buffer between a signal handler (producer) and drain() (consumer): records come out in
// order and intact across wrap-around, a full buffer refuses instead of overwriting, and a producer and a
// consumer on two threads lose nothing they do not count.
#include <doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "sampling/sampler_buffer.hpp"
#include "test_support.hpp"

using selfperf::Sample;
using selfperf::detail::SampleBuffer;

namespace {

// Writes record number `seq`: (seq % 5) frames, each naming the record and its position.
bool produce(SampleBuffer& buffer, std::uint64_t seq) {
  std::span<std::uint64_t> frames = buffer.reserve();
  if (frames.empty()) return false;
  const std::size_t n = seq % 5;
  for (std::size_t i = 0; i < n && i < frames.size(); ++i) frames[i] = seq * 100 + i;
  buffer.commit(static_cast<pid_t>(seq % 1000 + 1), seq, seq * 3, static_cast<std::uint32_t>(seq % 7),
                std::min<std::size_t>(n, frames.size()));
  return true;
}

// Whether `s` is exactly what produce() wrote as record `seq`.
bool intact(const Sample& s, std::uint64_t seq) {
  if (s.time != seq || s.tid != static_cast<pid_t>(seq % 1000 + 1) || s.period != seq * 3 ||
      s.cpu != seq % 7 || s.pid != 42 || s.frames.size() != std::min<std::size_t>(seq % 5, 4))
    return false;
  for (std::size_t i = 0; i < s.frames.size(); ++i)
    if (s.frames[i] != seq * 100 + i) return false;
  return true;
}

}  // namespace

TEST_CASE("records come out in order and intact across many wrap-arounds; a full buffer refuses") {
  SampleBuffer buffer(3, 4);  // 27 words: three records of 4 frames (9 words), more of fewer frames
  const std::size_t full = SampleBuffer::kHeaderWords + 4;
  REQUIRE(buffer.size_words() == 3 * full);
  std::uint64_t written = 0, read = 0, refused = 0, unread_words = 0, most_unread = 0;
  selfperf::test::XorShift rng(0x9e3779b97f4a7c15u);
  for (int round = 0; round < 300; ++round) {
    const std::uint64_t attempts = rng.below(8);  // up to 7: more than fits
    for (std::uint64_t k = 0; k < attempts; ++k) {
      if (produce(buffer, written)) {
        unread_words += SampleBuffer::kHeaderWords + written % 5;
        most_unread = std::max(most_unread, written - read + 1);
        ++written;
      } else {
        ++refused;
        // Refused only when a full record no longer fits: in the words left, or (its start skipping the
        // ring's end, which is shorter than a full record) before the oldest unread record.
        CHECK(unread_words + full > buffer.size_words() - (full - 1));
        CHECK(written > read);
      }
    }
    const std::size_t n = buffer.consume(42, [&](const Sample& s) {
      CHECK(intact(s, read));
      unread_words -= SampleBuffer::kHeaderWords + read % 5;
      ++read;
    });
    CHECK(n <= 5);  // at least 5 words a record, 27 words in all
    CHECK(read == written);
    CHECK(buffer.empty());
  }
  CHECK(written > 400);  // the 27 words were reused many times over
  CHECK(refused > 10);
  CHECK(most_unread > 3);  // records shorter than max_depth took less room than a full one
}

TEST_CASE("a record takes the room of its frames, not of max_depth") {
  // 8 records of perf's depth 127 at fixed size would be 8 x 132 words; here the ring has room for 8 records
  // of 32 frames (296 words) and takes records of 3 frames (8 words) until a full one would not fit.
  SampleBuffer buffer(8, 127);
  CHECK(buffer.size_words() == 8 * (SampleBuffer::kHeaderWords + SampleBuffer::kTypicalDepth));
  std::uint64_t stored = 0;
  for (;;) {
    std::span<std::uint64_t> frames = buffer.reserve();
    if (frames.empty()) break;
    CHECK(frames.size() == 127);
    frames[0] = 1;
    frames[1] = 2;
    frames[2] = 3;
    buffer.commit(7, stored, 1, 0, 3);
    ++stored;
  }
  CHECK(stored == (buffer.size_words() - (SampleBuffer::kHeaderWords + 127)) / 8 + 1);  // 21
  std::uint64_t seen = 0;
  buffer.consume(1, [&](const Sample& s) {
    CHECK(s.time == seen);
    CHECK(s.frames.size() == 3);
    CHECK(s.frames[2] == 3);
    ++seen;
  });
  CHECK(seen == stored);
  // A buffer too small for two full records is made that big: a deep sample always fits an empty one.
  CHECK(SampleBuffer(1, 127).size_words() == 2 * (SampleBuffer::kHeaderWords + 127));
}

TEST_CASE("a producer and a consumer on two threads: records arrive in order and intact, refusals are counted") {
  // The producer retries a refused record until it goes in, so it finishes only after the consumer has read
  // all but the last 64: the two must run side by side, however the threads are scheduled.
  SampleBuffer buffer(64, 4);
  constexpr std::uint64_t kRecords = 50'000;
  std::atomic<bool> done{false};
  std::uint64_t refused = 0;
  std::thread producer([&] {
    for (std::uint64_t seq = 0; seq < kRecords;) {
      if (produce(buffer, seq)) {
        ++seq;
      } else {
        ++refused;
      }
    }
    done.store(true, std::memory_order_release);
  });
  std::uint64_t read = 0, corrupt = 0;
  auto consume = [&] {
    buffer.consume(42, [&](const Sample& s) {
      corrupt += intact(s, read) ? 0 : 1;
      ++read;
    });
  };
  while (!done.load(std::memory_order_acquire)) consume();
  producer.join();
  consume();
  CHECK(corrupt == 0);
  CHECK(read == kRecords);
  MESSAGE("records refused while the buffer was full: " << refused);
}

TEST_CASE("two producers interleaved (a handler interrupted by another): the consumer stops at garbage") {
  // What a second handler nested on the thread does: it reserves and commits between the first one's reserve
  // and commit, which then publishes a header over the other's record with stale positions.
  SampleBuffer buffer(8, 4);
  std::span<std::uint64_t> first = buffer.reserve();
  REQUIRE(!first.empty());
  std::span<std::uint64_t> second = buffer.reserve();
  REQUIRE(!second.empty());
  second[0] = 7;
  buffer.commit(2, 1, 1, 0, 1);
  first[0] = first[1] = first[2] = first[3] = 9;
  buffer.commit(1, 2, 1, 0, 4);
  // The same start twice: the ring's head says 15 words while one record of 9 lies there, followed by
  // whatever the mapping held (zeros: records of no frames, without end but for the head).
  std::size_t n = buffer.consume(1, [](const Sample&) {});
  CHECK(n <= 2);
  CHECK(buffer.corrupt());
  CHECK(buffer.consume(1, [](const Sample&) {}) == 0);
}
