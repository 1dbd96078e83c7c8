// read_mmap_page / read_mmap_pages on synthetic perf_event_mmap_pages, checked against independent
// 128-bit reference arithmetic, plus a real software event's page and racing writer threads.
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include <doctest.h>
#include <linux/perf_event.h>
#include <sys/mman.h>

#include "events/perf_syscall.hpp"
#include "selfperf/mmap_read.hpp"

namespace {

using selfperf::MmapRefusal;
using selfperf::PageReading;
using u128 = unsigned __int128;
using i128 = __int128;

// A page as the kernel leaves it for a readable hardware event.
perf_event_mmap_page readable_page(std::uint32_t index, std::int64_t offset, std::uint16_t width) {
  perf_event_mmap_page page{};
  page.cap_bit0_is_deprecated = 1;
  page.cap_user_rdpmc = 1;
  page.index = index;
  page.offset = offset;
  page.pmc_width = width;
  page.time_enabled = 1000;
  page.time_running = 700;
  return page;
}

// Reference: the low `width` bits of raw as a two's complement number, plus offset, modulo 2^64.
std::uint64_t reference_count(std::int64_t offset, std::uint64_t raw, unsigned width) {
  const u128 modulus = u128{1} << width;
  i128 value = static_cast<i128>(u128{raw} % modulus);
  if (value >= static_cast<i128>(modulus / 2)) value -= static_cast<i128>(modulus);
  return static_cast<std::uint64_t>(static_cast<u128>(i128{offset} + value));
}

// Reference: time_offset + floor(cyc * mult / 2^shift), modulo 2^64.
std::uint64_t reference_delta(std::uint64_t time_offset, std::uint64_t cyc, std::uint32_t mult, unsigned shift) {
  return time_offset + static_cast<std::uint64_t>((u128{cyc} * mult) >> shift);
}

auto never_called_pmc(int& calls) {
  return [&calls](std::uint32_t) {
    ++calls;
    return std::uint64_t{0};
  };
}

std::uint64_t no_timestamp() { return 0; }

}  // namespace

TEST_CASE("sign extension at widths 32/40/44/48/64 near wrap, with negative and positive offsets") {
  const std::int64_t offsets[] = {0,
                                  1,
                                  -1,
                                  123456789,
                                  -987654321,
                                  std::int64_t{1} << 40,
                                  -(std::int64_t{1} << 40),
                                  std::numeric_limits<std::int64_t>::max(),
                                  std::numeric_limits<std::int64_t>::min()};
  for (unsigned width : {32u, 40u, 44u, 48u, 64u}) {
    const std::uint64_t top = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
    const std::uint64_t half = std::uint64_t{1} << (width - 1);
    const std::uint64_t raws[] = {0,        1,    2,        top,          top - 1,   top - 1000,
                                  half - 1, half, half + 1, half - 12345, 0x5a5a5a5a};
    for (std::int64_t offset : offsets) {
      for (std::uint64_t raw : raws) {
        const auto page = readable_page(7, offset, static_cast<std::uint16_t>(width));
        std::uint32_t asked = 99;
        const auto reading = selfperf::read_mmap_page(
            page,
            [&](std::uint32_t counter) {
              asked = counter;
              return raw;
            },
            no_timestamp);
        CAPTURE(width);
        CAPTURE(offset);
        CAPTURE(raw);
        REQUIRE(reading);
        CHECK(asked == 6);  // rdpmc takes index - 1
        CHECK(reading->count == reference_count(offset, raw, width));
        CHECK(reading->time_enabled == 1000);  // no cap_user_time: the page's own times
        CHECK(reading->time_running == 700);
      }
    }
  }
}

TEST_CASE("bits above pmc_width are ignored") {
  for (unsigned width : {32u, 40u, 44u, 48u}) {
    const auto page = readable_page(1, 5000, static_cast<std::uint16_t>(width));
    const std::uint64_t low = (std::uint64_t{1} << width) - 3;  // -3 in `width` bits
    const auto clean = selfperf::read_mmap_page(
        page, [&](std::uint32_t) { return low; }, no_timestamp);
    const auto dirty = selfperf::read_mmap_page(
        page, [&](std::uint32_t) { return low | (0xdeadbeefULL << width); }, no_timestamp);
    REQUIRE(clean);
    REQUIRE(dirty);
    CHECK(clean->count == 4997);
    CHECK(dirty->count == 4997);
  }
}

TEST_CASE("time scaling, shifts 0..31, large cyc, against 128-bit arithmetic") {
  const std::uint64_t cycs[] = {0,
                                1,
                                999,
                                std::uint64_t{1} << 31,
                                0x123456789abcdefULL,
                                std::uint64_t{1} << 62,
                                0x8000000000000001ULL,
                                ~std::uint64_t{0} - 7,
                                ~std::uint64_t{0}};
  const std::uint32_t mults[] = {1, 3, 0x15555555, 0x7fffffff, 0x80000000, 0xffffffff};
  const std::uint64_t time_offsets[] = {0, 5, static_cast<std::uint64_t>(-1234567890123LL), 1ULL << 63};
  for (unsigned shift = 0; shift < 32; ++shift) {
    for (std::uint64_t cyc : cycs) {
      for (std::uint32_t mult : mults) {
        for (std::uint64_t time_offset : time_offsets) {
          auto page = readable_page(3, 100, 48);
          page.cap_user_time = 1;
          page.time_shift = static_cast<std::uint16_t>(shift);
          page.time_mult = mult;
          page.time_offset = time_offset;
          page.time_enabled = 5'000'000'000ULL;
          page.time_running = 4'000'000'000ULL;
          int timestamps = 0;
          const auto reading = selfperf::read_mmap_page(
              page, [](std::uint32_t) { return std::uint64_t{11}; },
              [&] {
                ++timestamps;
                return cyc;
              });
          CAPTURE(shift);
          CAPTURE(cyc);
          CAPTURE(mult);
          CAPTURE(time_offset);
          REQUIRE(reading);
          const std::uint64_t delta = reference_delta(time_offset, cyc, mult, shift);
          CHECK(timestamps == 1);
          CHECK(reading->count == 111);
          CHECK(reading->time_enabled == 5'000'000'000ULL + delta);
          CHECK(reading->time_running == 4'000'000'000ULL + delta);  // index != 0: running too
        }
      }
    }
  }
}

TEST_CASE("a realistic TSC page: 3 GHz, shift 32") {
  auto page = readable_page(1, 0, 48);
  page.cap_user_time = 1;
  page.time_shift = 32;
  page.time_mult = 1431655765;                                      // 2^32 / 3: three ticks per ns
  page.time_offset = static_cast<std::uint64_t>(-1'000'000'000LL);  // the kernel stores offset - now
  page.time_enabled = 10'000;
  page.time_running = 10'000;
  const std::uint64_t cyc = 9'000'000'000ULL;  // 3 s of ticks; the page was last updated at 1 s
  const auto reading = selfperf::read_mmap_page(
      page, [](std::uint32_t) { return std::uint64_t{0}; }, [&] { return cyc; });
  REQUIRE(reading);
  CHECK(reading->time_enabled == 10'000 + reference_delta(page.time_offset, cyc, page.time_mult, 32));
  // 3e9 ticks at exactly 1/3 ns minus a rounding of mult below 2^32/3: within a microsecond of 2 s.
  CHECK(reading->time_enabled - 10'000 > 1'999'999'000ULL);
  CHECK(reading->time_enabled - 10'000 <= 2'000'000'000ULL);
}

TEST_CASE("cap_user_time_short extends a narrow clock from time_cycles") {
  auto page = readable_page(2, 0, 48);
  page.cap_user_time = 1;
  page.time_shift = 0;
  page.time_mult = 1;  // 1 ns per cycle keeps the expectation readable
  page.time_offset = 0;
  page.time_cycles = 0xfffffff0;  // a 32-bit clock, last update just before it wrapped
  page.time_mask = 0xffffffff;
  const std::uint64_t raw = 0x10;  // it wrapped since: 0x20 cycles later
  SUBCASE("with cap_user_time_short") {
    page.cap_user_time_short = 1;
    const auto reading = selfperf::read_mmap_page(
        page, [](std::uint32_t) { return std::uint64_t{0}; }, [&] { return raw; });
    REQUIRE(reading);
    CHECK(reading->time_enabled == 1000 + 0x100000010ULL);  // cyc = 0xfffffff0 + 0x20
    CHECK(reading->time_running == 700 + 0x100000010ULL);
  }
  SUBCASE("without it the fields are ignored") {
    const auto reading = selfperf::read_mmap_page(
        page, [](std::uint32_t) { return std::uint64_t{0}; }, [&] { return raw; });
    REQUIRE(reading);
    CHECK(reading->time_enabled == 1000 + raw);
  }
  SUBCASE("a 56-bit clock, the arm64 case") {
    page.cap_user_time_short = 1;
    page.time_mask = (std::uint64_t{1} << 56) - 1;
    page.time_cycles = (std::uint64_t{1} << 56) - 100;
    const auto reading = selfperf::read_mmap_page(
        page, [](std::uint32_t) { return std::uint64_t{0}; }, [] { return std::uint64_t{50}; });
    REQUIRE(reading);
    CHECK(reading->time_enabled == 1000 + (std::uint64_t{1} << 56) + 50);
  }
}

TEST_CASE("pages that refuse: nullopt, no rdpmc, and the reason") {
  int pmc_calls = 0;
  SUBCASE("cap_user_rdpmc clear") {
    auto page = readable_page(1, 0, 48);
    page.cap_user_rdpmc = 0;
    CHECK_FALSE(selfperf::read_mmap_page(page, never_called_pmc(pmc_calls), no_timestamp));
    CHECK(selfperf::check_mmap_page(page) == MmapRefusal::no_rdpmc);
    CHECK(selfperf::mmap_page_refusal_reason(page) == "cap_user_rdpmc clear");
  }
  SUBCASE("index 0") {
    const auto page = readable_page(0, 0, 48);
    CHECK_FALSE(selfperf::read_mmap_page(page, never_called_pmc(pmc_calls), no_timestamp));
    CHECK(selfperf::mmap_page_refusal_reason(page) == "index 0 (event not running)");
  }
  SUBCASE("pmc_width 0, 65 and 65535") {
    for (std::uint16_t width : {std::uint16_t{0}, std::uint16_t{65}, std::uint16_t{65535}}) {
      const auto page = readable_page(1, 0, width);
      CHECK_FALSE(selfperf::read_mmap_page(page, never_called_pmc(pmc_calls), no_timestamp));
      CHECK(selfperf::check_mmap_page(page) == MmapRefusal::bad_pmc_width);
      CHECK(selfperf::mmap_page_refusal_reason(page) == "unusable pmc_width");
    }
  }
  SUBCASE("time_shift >= 64 with cap_user_time") {
    for (std::uint16_t shift : {std::uint16_t{64}, std::uint16_t{200}, std::uint16_t{65535}}) {
      auto page = readable_page(1, 0, 48);
      page.cap_user_time = 1;
      page.time_mult = 0xffffffff;
      page.time_shift = shift;
      CHECK_FALSE(selfperf::read_mmap_page(page, never_called_pmc(pmc_calls), [] { return ~std::uint64_t{0}; }));
      CHECK(selfperf::check_mmap_page(page) == MmapRefusal::bad_time_shift);
    }
  }
  CHECK(pmc_calls == 0);  // rdpmc with a bad index would fault
}

TEST_CASE("odd pages stay defined: shifts 32..63, time_shift ignored without cap_user_time, width 1") {
  for (unsigned shift = 32; shift < 64; ++shift) {
    auto page = readable_page(1, -1, 64);
    page.cap_user_time = 1;
    page.cap_user_time_short = 1;
    page.time_mask = ~std::uint64_t{0};
    page.time_cycles = 12345;
    page.time_mult = 0xffffffff;
    page.time_shift = static_cast<std::uint16_t>(shift);
    const auto reading = selfperf::read_mmap_page(
        page, [](std::uint32_t) { return ~std::uint64_t{0}; }, [] { return ~std::uint64_t{0}; });
    REQUIRE(reading);  // the value is as meaningless as the page, but computing it is defined (UBSan)
    CHECK(reading->count == static_cast<std::uint64_t>(-2));
  }
  auto page = readable_page(1, 10, 1);
  page.time_shift = 300;  // no cap_user_time: not used
  const auto reading = selfperf::read_mmap_page(
      page, [](std::uint32_t) { return std::uint64_t{1}; }, no_timestamp);
  REQUIRE(reading);
  CHECK(reading->count == 9);  // a 1-bit counter holding 1 is -1
  CHECK(selfperf::check_mmap_page(page) == MmapRefusal::none);
  CHECK(selfperf::mmap_page_refusal_reason(page) == "readable");
}

TEST_CASE("seqlock: an update between the lock reads is retried, an update in flight is never returned") {
  auto page = readable_page(4, 1000, 48);
  page.lock = 6;
  int pmc_calls = 0;
  SUBCASE("the kernel's case: an interrupt updates the page during the read") {
    const auto reading = selfperf::read_mmap_page(
        page,
        [&](std::uint32_t counter) {
          if (pmc_calls++ == 0) {  // the first read is interrupted: the counter moved to another index
            page.lock += 2;
            page.index = 2;
            page.offset = 5000;
          }
          return std::uint64_t{counter} * 100;
        },
        no_timestamp);
    REQUIRE(reading);
    CHECK(pmc_calls == 2);
    CHECK(reading->count == 5000 + 100);  // all from the new generation: offset 5000, counter 1
  }
  SUBCASE("a writer started during the read and never finished") {
    const auto reading = selfperf::read_mmap_page(
        page,
        [&](std::uint32_t) {
          page.lock += 1;
          page.offset = -1;
          ++pmc_calls;
          return std::uint64_t{0};
        },
        no_timestamp);
    CHECK_FALSE(reading);  // bounded: gives up instead of spinning on the odd lock forever
    CHECK(pmc_calls == 1);
    CHECK(selfperf::check_mmap_page(page) == MmapRefusal::unstable);
  }
}

TEST_CASE("group read: all pages, one timestamp, retried when any lock moves") {
  std::vector<perf_event_mmap_page> storage;
  for (std::uint32_t i = 0; i < 3; ++i) {
    auto page = readable_page(i + 1, 1000 * (i + 1), 48);
    page.cap_user_time = 1;
    page.time_mult = 1;
    page.time_offset = i;
    storage.push_back(page);
  }
  const volatile perf_event_mmap_page* pages[] = {&storage[0], &storage[1], &storage[2]};
  PageReading out[3] = {};
  int timestamps = 0, pmc_calls = 0;
  auto fake_pmc = [&](std::uint32_t counter) {
    if (pmc_calls++ == 2) {  // while reading the last member, the first one is updated
      storage[0].lock += 2;
      storage[0].offset = 7000;
    }
    return std::uint64_t{counter} + 10;
  };
  const bool ok = selfperf::read_mmap_pages(pages, out, fake_pmc, [&] { return std::uint64_t{100} + timestamps++; });
  REQUIRE(ok);
  CHECK(pmc_calls == 6);   // two full attempts
  CHECK(timestamps == 2);  // one timestamp per attempt, shared by the members
  CHECK(out[0].count == 7000 + 10);
  CHECK(out[1].count == 2000 + 11);
  CHECK(out[2].count == 3000 + 12);
  for (std::uint64_t i = 0; i < 3; ++i) {
    CHECK(out[i].time_enabled == 1000 + i + 101);  // the second attempt's timestamp, 101
    CHECK(out[i].time_running == 700 + i + 101);
  }

  SUBCASE("one refusing member fails the whole read") {
    storage[1].index = 0;
    CHECK_FALSE(selfperf::read_mmap_pages(pages, out, fake_pmc, no_timestamp));
    CHECK(selfperf::check_mmap_page(*pages[1]) == MmapRefusal::not_running);
  }
  SUBCASE("an update in flight on any member is never returned") {
    storage[2].lock = 1;
    const int before = pmc_calls;
    CHECK_FALSE(selfperf::read_mmap_pages(pages, out, fake_pmc, no_timestamp));
    CHECK(pmc_calls == before);
  }
  SUBCASE("more pages than kMaxMmapGroupPages") {
    std::vector<const volatile perf_event_mmap_page*> many(selfperf::kMaxMmapGroupPages + 1, &storage[0]);
    CHECK_FALSE(selfperf::read_mmap_pages(many, out, fake_pmc, no_timestamp));
  }
  SUBCASE("one page reads like read_mmap_page") {
    const auto single = selfperf::read_mmap_page(*pages[1], fake_pmc, [] { return std::uint64_t{500}; });
    REQUIRE(single);
    PageReading one{};
    REQUIRE(selfperf::read_mmap_pages(std::span(pages + 1, 1), &one, fake_pmc, [] { return std::uint64_t{500}; }));
    CHECK(one.count == single->count);
    CHECK(one.time_enabled == single->time_enabled);
    CHECK(one.time_running == single->time_running);
    storage[1].cap_user_rdpmc = 0;
    CHECK_FALSE(selfperf::read_mmap_pages(std::span(pages + 1, 1), &one, fake_pmc, no_timestamp));
  }
  SUBCASE("no pages") { CHECK(selfperf::read_mmap_pages({}, out, fake_pmc, no_timestamp)); }
}

TEST_CASE("a real software event's page refuses, and says why") {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const selfperf::detail::Fd fd = selfperf::detail::open_event(attr, "task-clock:u", 0, -1, -1);
  void* map = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd.get(), 0);
  REQUIRE_MESSAGE(map != MAP_FAILED, "mmap of the event's page failed, errno ", errno);
  const auto& page = *static_cast<const volatile perf_event_mmap_page*>(map);
  int pmc_calls = 0;
  // A software event is never on a hardware counter: no rdpmc for it, whatever the machine.
  CHECK_FALSE(selfperf::read_mmap_page(page, never_called_pmc(pmc_calls), [] { return std::uint64_t{0}; }));
  CHECK(pmc_calls == 0);
  const MmapRefusal refusal = selfperf::check_mmap_page(page);
  CHECK(refusal != MmapRefusal::none);
  std::printf("task-clock page: %.*s\n", static_cast<int>(selfperf::describe(refusal).size()),
              selfperf::describe(refusal).data());
  munmap(map, 4096);
}

// ---- Racing writers: the kernel's update protocol from another thread -------------------------------

namespace {

// Every field of generation g is a distinct function of g, so a reading mixing two generations shows.
// time_enabled carries g in its upper 32 bits and the time delta stays below 2^32, so the reader can
// tell which generation a reading claims to be and recompute it whole.
struct Generation {
  std::uint32_t index;
  std::int64_t offset;
  std::uint16_t width;
  std::uint64_t time_enabled, time_running, time_offset;
  std::uint32_t time_mult;
  std::uint16_t time_shift;
};

Generation generation(std::uint64_t g, std::uint64_t page) {
  const std::uint64_t s = g * 3 + page;  // pages of one group differ too
  Generation gen;
  gen.index = static_cast<std::uint32_t>(1 + s % 5);
  gen.offset = (s % 2 ? -1 : 1) * static_cast<std::int64_t>(s * 1000003);
  gen.width = s % 3 ? 40 : 48;
  gen.time_enabled = g << 32;
  gen.time_running = (g << 32) / 3 + s;
  gen.time_offset = (s * 31) % (1 << 20);
  gen.time_mult = static_cast<std::uint32_t>(1 + (s * 7) % (1 << 20));
  gen.time_shift = static_cast<std::uint16_t>(s % 24);
  return gen;
}

constexpr std::uint64_t kFakeTimestamp = 1000;  // delta < 2^20 + 1000 * 2^20 < 2^32
// Depends on the counter, and reads as negative at width 40 but positive at width 48.
std::uint64_t fake_pmc(std::uint32_t counter) { return 0xfffffffff0ULL | counter; }

PageReading expected(std::uint64_t g, std::uint64_t page) {
  const Generation gen = generation(g, page);
  const std::uint64_t delta = reference_delta(gen.time_offset, kFakeTimestamp, gen.time_mult, gen.time_shift);
  return {reference_count(gen.offset, fake_pmc(gen.index - 1), gen.width), gen.time_enabled + delta,
          gen.time_running + delta};
}

bool same(const PageReading& a, const PageReading& b) {
  return a.count == b.count && a.time_enabled == b.time_enabled && a.time_running == b.time_running;
}

template <class T>
void publish(T& field, std::type_identity_t<T> value) {
  // Release: whoever reads this value also sees the odd lock stored before it, so a reader that
  // mixed it into a reading sees the lock moved. (A standalone release fence would say the same, but
  // TSan does not model fences and GCC warns about them under -fsanitize=thread.)
  std::atomic_ref<T>(field).store(value, std::memory_order_release);
}

// The kernel's perf_event_update_userpage(): lock+1, fields, lock+1.
void write_generation(perf_event_mmap_page& page, std::uint64_t g, std::uint64_t page_number) {
  std::atomic_ref<std::uint32_t> lock(page.lock);
  const std::uint32_t seq = lock.load(std::memory_order_relaxed);
  lock.store(seq + 1, std::memory_order_relaxed);
  const Generation gen = generation(g, page_number);
  publish(page.index, gen.index);
  publish(page.offset, gen.offset);
  publish(page.pmc_width, gen.width);
  publish(page.time_enabled, gen.time_enabled);
  publish(page.time_running, gen.time_running);
  publish(page.time_offset, gen.time_offset);
  publish(page.time_mult, gen.time_mult);
  publish(page.time_shift, gen.time_shift);
  lock.store(seq + 2, std::memory_order_release);  // the fields before the even lock
}

perf_event_mmap_page racing_page(std::uint64_t page_number) {
  perf_event_mmap_page page{};
  page.cap_user_rdpmc = 1;
  page.cap_user_time = 1;
  write_generation(page, 0, page_number);
  return page;
}

// Runs `writer_round` (one generation g) on another thread until the reader is done and the writer
// has made at least kMinWriterRounds rounds, so the two really overlapped.
constexpr std::uint64_t kReads = 1'000'000;
constexpr std::uint64_t kMinWriterRounds = 20'000;

struct RaceStats {
  std::uint64_t reads = 0, fallbacks = 0, torn = 0, backwards = 0, generations_seen = 0;
};

template <class WriterRound, class Read>
RaceStats race(WriterRound writer_round, Read read) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> rounds{0};
  // Reads finished (kept or fallen back). A writer racing flat out on a core of its own kept a slow reader
  // (TSan, three seqlocks) from ever completing: after each round it waits for the read in flight to end,
  // so every read overlaps at most one round and its retries get through, while the next round still
  // starts as the next read does.
  std::atomic<std::uint64_t> attempts{0};
  std::thread writer([&] {
    for (std::uint64_t g = 1; !stop.load(std::memory_order_relaxed); ++g) {
      writer_round(g);
      rounds.store(g, std::memory_order_relaxed);
      // Give readers a window between updates; the updates themselves still race the reads.
      for (int i = 0; i < 32 && !stop.load(std::memory_order_relaxed); ++i) {
      }
      const std::uint64_t seen = attempts.load(std::memory_order_acquire);
      while (attempts.load(std::memory_order_acquire) == seen && !stop.load(std::memory_order_relaxed)) {
      }
    }
  });
  RaceStats stats;
  std::uint64_t last_g = 0;
  while (stats.reads < kReads || rounds.load(std::memory_order_relaxed) < kMinWriterRounds) {
    read(stats, last_g);
    attempts.fetch_add(1, std::memory_order_release);
  }
  stop = true;
  writer.join();
  std::printf("%" PRIu64 " reads, %" PRIu64 " fallbacks, %" PRIu64 " generations seen, %" PRIu64 " writer rounds\n",
              stats.reads, stats.fallbacks, stats.generations_seen, rounds.load());
  return stats;
}

}  // namespace

TEST_CASE("a writer thread updating the page the kernel's way never yields a torn reading") {
  perf_event_mmap_page page = racing_page(0);
  const RaceStats stats = race([&](std::uint64_t g) { write_generation(page, g, 0); },
                               [&](RaceStats& s, std::uint64_t& last_g) {
                                 const auto reading =
                                     selfperf::read_mmap_page(page, fake_pmc, [] { return kFakeTimestamp; });
                                 if (!reading) {
                                   ++s.fallbacks;
                                   return;
                                 }
                                 ++s.reads;
                                 const std::uint64_t g = reading->time_enabled >> 32;
                                 if (!same(*reading, expected(g, 0))) ++s.torn;
                                 if (g < last_g) ++s.backwards;
                                 if (g != last_g) ++s.generations_seen;
                                 last_g = g;
                               });
  CHECK(stats.reads >= kReads);
  CHECK(stats.torn == 0);
  CHECK(stats.backwards == 0);
}

TEST_CASE("the group read across 3 pages returns a snapshot that existed at one instant") {
  perf_event_mmap_page storage[3] = {racing_page(0), racing_page(1), racing_page(2)};
  const volatile perf_event_mmap_page* pages[] = {&storage[0], &storage[1], &storage[2]};
  std::uint64_t inconsistent = 0;
  // The writer updates page 0, then 1, then 2 for each round, so the states that exist are
  // (r, r, r), (r+1, r, r) and (r+1, r+1, r): g0 >= g1 >= g2 >= g0 - 1. Reading the pages one after
  // the other, each under its own lock, can also give g0 < g1 (page 0 read before the writer moved on).
  const RaceStats stats = race(
      [&](std::uint64_t g) {
        for (std::uint64_t p = 0; p < 3; ++p) write_generation(storage[p], g, p);
      },
      [&](RaceStats& s, std::uint64_t& last_g) {
        PageReading out[3];
        if (!selfperf::read_mmap_pages(pages, out, fake_pmc, [] { return kFakeTimestamp; })) {
          ++s.fallbacks;
          return;
        }
        ++s.reads;
        std::uint64_t g[3];
        for (std::uint64_t p = 0; p < 3; ++p) {
          g[p] = out[p].time_enabled >> 32;
          if (!same(out[p], expected(g[p], p))) ++s.torn;
        }
        if (!(g[0] >= g[1] && g[1] >= g[2] && g[2] + 1 >= g[0])) ++inconsistent;
        if (g[2] < last_g) ++s.backwards;
        if (g[2] != last_g) ++s.generations_seen;
        last_g = g[2];
      });
  CHECK(stats.reads >= kReads);
  CHECK(stats.torn == 0);
  CHECK(inconsistent == 0);
  CHECK(stats.backwards == 0);
}
