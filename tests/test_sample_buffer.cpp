// The per-thread sample buffer between a signal handler (producer) and drain() (consumer): records come out in
// order and intact across wrap-around, a full buffer refuses instead of overwriting, and a producer and a
// consumer on two threads lose nothing they do not count.
#include <doctest.h>

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
  SampleBuffer buffer(3, 4);
  std::uint64_t written = 0, read = 0, refused = 0;
  selfperf::test::XorShift rng(0x9e3779b97f4a7c15u);
  for (int round = 0; round < 200; ++round) {
    const std::uint64_t attempts = rng.below(5);  // up to 4: one more than fits
    for (std::uint64_t k = 0; k < attempts; ++k) {
      if (produce(buffer, written)) {
        ++written;
      } else {
        ++refused;
        CHECK(written - read == 3);  // refused only when all three records are unread
      }
    }
    const std::size_t n = buffer.consume(42, [&](const Sample& s) {
      CHECK(intact(s, read));
      ++read;
    });
    CHECK(n <= 3);
    CHECK(read == written);
    CHECK(buffer.empty());
  }
  CHECK(written > 300);  // the three slots were reused many times over
  CHECK(refused > 10);
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
