#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fake_ring.hpp"
#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/record.hpp"
#include "selfperf/ring_buffer.hpp"
#include "selfperf/sampling_event.hpp"
#include "test_support.hpp"

using selfperf::RecordView;
using selfperf::RingBuffer;
using selfperf::testing::FakeRing;
using selfperf::testing::RecordBuilder;

namespace {

// A record of `bytes` total size whose payload words are seq, seq+1, …
std::vector<std::uint64_t> numbered(std::uint32_t type, std::size_t bytes, std::uint64_t seq) {
  RecordBuilder b(type);
  for (std::size_t i = 8; i < bytes; i += 8) b.u64(seq++);
  return b.finish();
}

std::uint64_t word(const RecordView& r, std::size_t i) {
  std::uint64_t v;
  std::memcpy(&v, r.payload().data() + i * 8, 8);
  return v;
}

}  // namespace

TEST_CASE("records are read in order and data_tail is published") {
  FakeRing fake(1024);
  RingBuffer ring = fake.ring();
  REQUIRE(fake.write(numbered(100, 16, 1)));
  REQUIRE(fake.write(numbered(101, 40, 10)));
  REQUIRE(fake.write(numbered(102, 8, 0)));
  CHECK(ring.pending_bytes() == 64);

  std::vector<std::uint32_t> types;
  std::vector<std::size_t> sizes;
  std::size_t n = ring.read([&](const RecordView& r) {
    types.push_back(r.type());
    sizes.push_back(r.bytes.size());
    CHECK(r.bytes.size() == r.header.size);
    if (r.type() == 101) {
      for (std::size_t i = 0; i < 4; ++i) CHECK(word(r, i) == 10 + i);
    }
  });
  CHECK(n == 3);
  CHECK(types == std::vector<std::uint32_t>{100, 101, 102});
  CHECK(sizes == std::vector<std::size_t>{16, 40, 8});
  CHECK(fake.control().data_tail == 64);
  CHECK(ring.empty());
  CHECK(ring.stats().records == 3);
  CHECK(ring.stats().corruptions == 0);
  CHECK(ring.read([](const RecordView&) { FAIL("nothing left to read"); }) == 0);
}

TEST_CASE("a record that wraps around the end is handed out whole, at every offset") {
  constexpr std::size_t kSize = 256;
  FakeRing fake(kSize);
  RingBuffer ring = fake.ring();
  std::uint64_t seq = 1000;
  std::size_t wrapped = 0;
  // Walk the start of a 72-byte record across the whole ring, so it straddles the end at each 8-byte split.
  for (int round = 0; round < 64; ++round) {
    const std::size_t filler = 8 * static_cast<std::size_t>(1 + round % 7);
    REQUIRE(fake.write(numbered(1, filler, 0)));
    const std::uint64_t start = fake.control().data_head;
    REQUIRE(fake.write(numbered(2, 72, seq)));
    if ((start % kSize) + 72 > kSize) ++wrapped;
    std::size_t seen = 0;
    ring.read([&](const RecordView& r) {
      if (r.type() != 2) return;
      ++seen;
      REQUIRE(r.bytes.size() == 72);
      CHECK(reinterpret_cast<std::uintptr_t>(r.bytes.data()) % 8 == 0);
      for (std::size_t i = 0; i < 8; ++i) CHECK(word(r, i) == seq + i);
    });
    CHECK(seen == 1);
    seq += 100;
  }
  CHECK(wrapped >= 5);  // the walk did exercise the copy-out path
  CHECK(ring.stats().corruptions == 0);
  CHECK(fake.control().data_tail == fake.control().data_head);
}

TEST_CASE("the writer cannot overwrite unread records: space frees only when data_tail moves") {
  FakeRing fake(128);
  RingBuffer ring = fake.ring();
  REQUIRE(fake.write(numbered(1, 64, 0)));
  REQUIRE(fake.write(numbered(1, 64, 0)));
  CHECK_FALSE(fake.write(numbered(1, 8, 0)));  // full until the reader publishes a tail
  CHECK(ring.read([](const RecordView&) {}, 1) == 1);
  CHECK(fake.control().data_tail == 64);
  CHECK(fake.write(numbered(1, 64, 0)));
}

TEST_CASE("max_records bounds one read") {
  FakeRing fake(512);
  RingBuffer ring = fake.ring();
  for (int i = 0; i < 5; ++i) REQUIRE(fake.write(numbered(7, 24, static_cast<std::uint64_t>(i))));
  CHECK(ring.read([](const RecordView&) {}, 2) == 2);
  CHECK(fake.control().data_tail == 48);
  CHECK(ring.read([](const RecordView&) {}) == 3);
}

TEST_CASE("corrupt headers are reported and the reader resyncs to data_head without reading out of bounds") {
  struct Case {
    const char* what;
    int size;  // header.size written
    std::uint64_t extra_head = 0;
  };
  const Case cases[] = {
      {"size 0", 0},
      {"size below a header", 4},
      {"size not a multiple of 8", 12},
      {"size past data_head", 64},
      {"size larger than the ring", 65528, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    FakeRing fake(256);
    RingBuffer ring = fake.ring();
    REQUIRE(fake.write(numbered(1, 16, 5)));
    REQUIRE(fake.write(RecordBuilder(9).u64(1).u64(2).finish(c.size)));  // a 24-byte record lying about its size
    REQUIRE(fake.write(numbered(3, 16, 6)));
    std::vector<std::uint32_t> types;
    std::size_t n = ring.read([&](const RecordView& r) { types.push_back(r.type()); });
    CHECK(n == 1);
    CHECK(types == std::vector<std::uint32_t>{1});
    CHECK(ring.stats().corruptions == 1);
    CHECK(ring.stats().bytes_dropped == 40);
    CHECK(ring.last_corruption().position == 16);
    CHECK(ring.last_corruption().size == static_cast<std::uint16_t>(c.size));
    CHECK(fake.control().data_tail == fake.control().data_head);
    // The stream goes on after the resync.
    REQUIRE(fake.write(numbered(4, 24, 0)));
    types.clear();
    CHECK(ring.read([&](const RecordView& r) { types.push_back(r.type()); }) == 1);
    CHECK(types == std::vector<std::uint32_t>{4});
  }
}

TEST_CASE("impossible positions (misaligned tail, head more than a ring ahead) resync too") {
  FakeRing fake(256);
  RingBuffer ring = fake.ring();
  fake.set_positions(4, 4 + 64);
  CHECK(ring.read([](const RecordView&) { FAIL("no record from a misaligned tail"); }) == 0);
  CHECK(ring.stats().corruptions == 1);
  CHECK(fake.control().data_tail == 68);

  fake.set_positions(1024, 1024 + 512);  // the kernel never gets more than a ring ahead of the reader
  CHECK(ring.read([](const RecordView&) { FAIL("no record when head - tail > size"); }) == 0);
  CHECK(ring.stats().corruptions == 2);
  CHECK(fake.control().data_tail == 1536);

  // Garbage all over the ring with a valid-looking head: every read terminates, nothing crashes.
  for (std::uint64_t i = 0; i < 32; ++i) fake.poke(i * 8, 0x0123456789abcdefULL * (i + 1));
  for (std::uint64_t start = 0; start < 256; start += 8) {
    fake.set_positions(start, start + 256);
    ring.read([](const RecordView& r) { CHECK(r.bytes.size() <= 256); });
  }
}

TEST_CASE("kernel loss and throttle records are counted in stats") {
  FakeRing fake(512);
  RingBuffer ring = fake.ring();
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_LOST).u64(77).u64(5).finish()));
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_LOST).u64(77).u64(3).finish()));
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_LOST_SAMPLES).u64(11).finish()));
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_THROTTLE).u64(1).u64(77).u64(0).finish()));
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_UNTHROTTLE).u64(2).u64(77).u64(0).finish()));
  REQUIRE(fake.write(RecordBuilder(PERF_RECORD_SAMPLE).u64(0x1234).finish()));
  CHECK(ring.read([](const RecordView&) {}) == 6);
  const auto& s = ring.stats();
  CHECK(s.lost == 8);
  CHECK(s.lost_records == 2);
  CHECK(s.lost_samples == 11);
  CHECK(s.total_lost() == 19);
  CHECK(s.throttles == 1);
  CHECK(s.unthrottles == 1);
  CHECK(s.samples == 1);
}

TEST_CASE("a throwing callback leaves the records it saw consumed") {
  FakeRing fake(512);
  RingBuffer ring = fake.ring();
  for (int i = 0; i < 4; ++i) REQUIRE(fake.write(numbered(static_cast<std::uint32_t>(10 + i), 16, 0)));
  int calls = 0;
  CHECK_THROWS_AS(ring.read([&](const RecordView& r) {
    ++calls;
    if (r.type() == 11) throw std::runtime_error("stop");
  }),
                  std::runtime_error);
  CHECK(calls == 2);
  CHECK(fake.control().data_tail == 32);
  std::vector<std::uint32_t> rest;
  ring.read([&](const RecordView& r) { rest.push_back(r.type()); });
  CHECK(rest == std::vector<std::uint32_t>{12, 13});
}

TEST_CASE("bad construction arguments are clear errors") {
  FakeRing fake(256);
  std::vector<std::uint64_t> odd(13);
  CHECK_THROWS_WITH_AS(RingBuffer(&fake.control(), std::as_writable_bytes(std::span(odd))),
                       doctest::Contains("power of two"), selfperf::Error);
  CHECK_THROWS_AS(RingBuffer(nullptr, std::as_writable_bytes(std::span(odd))), selfperf::Error);

  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  CHECK_THROWS_WITH_AS(RingBuffer(devnull, 3), doctest::Contains("power of two"), selfperf::Error);
  try {
    RingBuffer ring(devnull, 1);
    FAIL("mmap of /dev/null as a perf ring should fail");
  } catch (const selfperf::Error& e) {
    CHECK(std::string(e.what()).find("cannot mmap the ring buffer") != std::string::npos);
    CHECK(e.errno_value() != 0);
  }
  ::close(devnull);
}

TEST_CASE("a ring larger than the locked-memory allowance names perf_event_mlock_kb") {
  if (selfperf::detail::has_perf_privilege() || ::geteuid() == 0) {
    MESSAGE("privileged (CAP_IPC_LOCK/CAP_SYS_ADMIN): the mlock limit does not apply; checked as nobody");
    return;
  }
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  auto fd = selfperf::detail::open_event(attr, "dummy:u", 0, -1, -1);
  // Beyond perf_event_mlock_kb the rest is charged to RLIMIT_MEMLOCK; make that 0 for this mapping.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_MEMLOCK, &old) == 0);
  rlimit none = old;
  none.rlim_cur = 0;
  REQUIRE(::setrlimit(RLIMIT_MEMLOCK, &none) == 0);
  // The allowance is perf_event_mlock_kb per online CPU: take the first power of two of pages beyond it.
  const long allowance_kb = std::stol(selfperf::detail::read_text_file("/proc/sys/kernel/perf_event_mlock_kb")) *
                            ::sysconf(_SC_NPROCESSORS_ONLN);
  std::size_t pages = 1;
  while (static_cast<long>(pages) * (::sysconf(_SC_PAGESIZE) / 1024) <= allowance_kb) pages *= 2;
  std::string message;
  int err = 0;
  try {
    RingBuffer ring(fd.get(), pages);
  } catch (const selfperf::Error& e) {
    message = e.what();
    err = e.errno_value();
  }
  ::setrlimit(RLIMIT_MEMLOCK, &old);
  CHECK(err == EPERM);
  CHECK(message.find("perf_event_mlock_kb") != std::string::npos);
  CHECK(message.find("online CPUs") != std::string::npos);
}

// ---- a real software event ----

namespace {

volatile std::uint64_t g_sink;

using selfperf::test::thread_cpu_ns;

// Return addresses recorded by the burn functions themselves: a kernel callchain taken while they run must
// contain exactly these.
std::uintptr_t g_return_into_outer;
std::uintptr_t g_return_into_caller;

[[gnu::noinline]] void burn_inner(std::uint64_t cpu_ns) {
  g_return_into_outer = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  const std::uint64_t end = thread_cpu_ns() + cpu_ns;
  std::uint64_t x = 1;
  while (thread_cpu_ns() < end) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    g_sink = x;
  }
}

[[gnu::noinline]] void burn_outer(std::uint64_t cpu_ns) {
  g_return_into_caller = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
  burn_inner(cpu_ns);
  g_sink = g_sink + 1;  // keeps the call above from becoming a tail call
}

selfperf::SamplingEvent open_cpu_clock(std::uint64_t period_ns, std::size_t pages) {
  selfperf::CallchainSamplingOptions options;
  options.period = period_ns;
  options.kernel_frames = selfperf::KernelFrames::exclude;
  perf_event_attr attr = selfperf::callchain_sampling_attr(selfperf::parse_event("cpu-clock"), options);
  attr.exclude_kernel = 1;  // the same as an unprivileged process gets, whoever runs the test
  attr.exclude_hv = 1;
  return selfperf::SamplingEvent(attr, "cpu-clock:u", 0, pages);
}

}  // namespace

TEST_CASE("a reader slower than the writer: the kernel drops and counts, never overwrites") {
  auto event = open_cpu_clock(10000, 1);  // 10 µs, one 4 KiB data page: full in well under a millisecond
  CHECK(event.attr().exclude_callchain_kernel == 1);
  const pid_t tid = selfperf::detail::current_tid();
  std::size_t samples = 0;
  std::size_t wrong_tid = 0;
  std::uint64_t last_time = 0;
  std::size_t time_went_back = 0;
  std::size_t lost_decoded = 0, lost_wrong_tid = 0, undecodable = 0;
  // The raw reader: samples and the kernel's LOST records, whose sample_id trailer (sample_id_all) names
  // the thread too.
  auto consume = [&](const RecordView& r) {
    if (r.type() == PERF_RECORD_LOST) {
      selfperf::LostRecord lost;
      if (selfperf::decode_lost(r, event.format(), lost) != selfperf::DecodeStatus::ok) ++undecodable;
      ++lost_decoded;
      if (static_cast<pid_t>(lost.sample_id.tid) != tid || lost.lost == 0) ++lost_wrong_tid;
      return;
    }
    if (r.type() != PERF_RECORD_SAMPLE) return;
    selfperf::SampleRecord s;
    if (selfperf::decode_sample(r, event.format(), s) != selfperf::DecodeStatus::ok) {
      ++undecodable;
      return;
    }
    ++samples;
    if (static_cast<pid_t>(s.tid) != tid || static_cast<pid_t>(s.pid) != ::getpid()) ++wrong_tid;
    if (s.time < last_time) ++time_went_back;
    last_time = s.time;
    CHECK(s.has(PERF_SAMPLE_CALLCHAIN));
    CHECK(s.period > 0);
  };
  event.enable();
  // The kernel writes PERF_RECORD_LOST once the reader has made room again, so alternate burning (without
  // reading) and draining until a loss record arrives; bounded by rounds, not by time.
  for (int round = 0; round < 50 && event.ring().stats().lost == 0; ++round) {
    burn_outer(20'000'000);  // 20 ms of this thread's CPU: far more samples than the ring holds
    event.ring().read(consume);
  }
  event.disable();
  event.ring().read(consume);
  const auto& stats = event.ring().stats();
  MESSAGE("samples " << samples << ", lost " << stats.lost << " in " << stats.lost_records
                     << " LOST records, throttled " << stats.throttles);
  CHECK(stats.lost > 0);
  CHECK(stats.lost_records > 0);
  CHECK(samples > 0);
  CHECK(wrong_tid == 0);
  CHECK(time_went_back == 0);  // nothing overwritten or misread: timestamps stay ordered
  CHECK(stats.corruptions == 0);
  CHECK(undecodable == 0);
  CHECK(lost_decoded == stats.lost_records);
  CHECK(lost_wrong_tid == 0);
}

TEST_CASE("a real kernel callchain holds this test's own return addresses, leaf first") {
  auto event = open_cpu_clock(100000, 16);  // 100 µs, 64 KiB: room for every sample of the burn
  event.enable();
  burn_outer(30'000'000);
  event.disable();
  std::size_t samples = 0, user_marked = 0, in_burn = 0;
  std::uint64_t frames[128];
  event.read_samples([&](const selfperf::SampleRecord& s) {
    ++samples;
    if (!s.callchain.empty() && s.callchain[0] == PERF_CONTEXT_USER) ++user_marked;
    selfperf::Sample sample = selfperf::to_sample(s, frames);
    REQUIRE(!sample.frames.empty());
    CHECK(sample.frames[0] == s.ip);  // the interrupted IP comes first
    for (std::size_t i = 0; i + 1 < sample.frames.size(); ++i) {
      if (sample.frames[i] == g_return_into_outer && sample.frames[i + 1] == g_return_into_caller) {
        ++in_burn;
        break;
      }
    }
  });
  MESSAGE("samples " << samples << ", with burn_inner <- burn_outer <- test: " << in_burn);
  REQUIRE(samples > 0);
  CHECK(user_marked == samples);  // exclude_callchain_kernel: every chain is the user part alone
  // Nearly all the samples land inside the burn loop; prologue/epilogue hits may miss a frame.
  CHECK(in_burn * 2 > samples);
  CHECK(event.ring().stats().lost == 0);
}
