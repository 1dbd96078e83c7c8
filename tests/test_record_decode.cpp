#include <doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "fake_ring.hpp"
#include "selfperf/record.hpp"

using namespace selfperf;
using selfperf::testing::FakeRing;
using selfperf::testing::RecordBuilder;

namespace {

RecordView view_of(const std::vector<std::uint64_t>& words) {
  RecordView v;
  std::memcpy(&v.header, words.data(), sizeof v.header);
  v.bytes = std::as_bytes(std::span(words)).first(v.header.size);
  return v;
}

constexpr std::uint64_t kEverySampleField =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
    PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ |
    PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER |
    PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT_STRUCT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION |
    PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP | PERF_SAMPLE_DATA_PAGE_SIZE |
    PERF_SAMPLE_CODE_PAGE_SIZE | PERF_SAMPLE_AUX;

SampleFormat every_field_format() {
  perf_event_attr attr{};
  attr.sample_type = kEverySampleField;
  attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                     PERF_FORMAT_ID | PERF_FORMAT_LOST;
  attr.branch_sample_type = PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_HW_INDEX;
  attr.sample_regs_user = 0b1011;  // 3 registers
  attr.sample_regs_intr = 0b110;   // 2 registers
  return SampleFormat::from_attr(attr);
}

// A sample with every field, laid out in the kernel's order with distinct values.
std::vector<std::uint64_t> every_field_sample() {
  const char raw[5] = {'a', 'b', 'c', 'd', 'e'};
  unsigned char raw_field[4 + sizeof raw];
  const std::uint32_t raw_size = sizeof raw;
  std::memcpy(raw_field, &raw_size, 4);
  std::memcpy(raw_field + 4, raw, sizeof raw);
  const std::uint64_t stack[2] = {0x5151, 0x5252};
  return RecordBuilder(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER | PERF_RECORD_MISC_EXACT_IP)
      .u64(0x1d)                        // IDENTIFIER
      .u64(0x401000)                    // IP
      .u32_pair(4242, 4343)             // pid, tid
      .u64(123456789)                   // TIME
      .u64(0x7fff0000)                  // ADDR
      .u64(0x1d)                        // ID
      .u64(0x5e)                        // STREAM_ID
      .u32_pair(3, 0)                   // cpu, res
      .u64(10007)                       // PERIOD
      .u64(2).u64(900).u64(800)         // READ: nr, time_enabled, time_running
      .u64(11).u64(0x1d).u64(0)         //   value, id, lost
      .u64(22).u64(0x1e).u64(1)         //   value, id, lost
      .u64(4).u64(PERF_CONTEXT_KERNEL).u64(0xffffffff81000000).u64(PERF_CONTEXT_USER).u64(0x401000)  // CALLCHAIN
      .bytes(raw_field, sizeof raw_field)                                       // RAW (padded to 16)
      .u64(2).u64(7).u64(0xa1).u64(0xa2).u64(0xa3).u64(0xb1).u64(0xb2).u64(0xb3)  // BRANCH nr, hw_idx, lbr[2]
      .u64(PERF_SAMPLE_REGS_ABI_64).u64(0x11).u64(0x12).u64(0x13)  // REGS_USER
      .u64(sizeof stack).bytes(stack, sizeof stack).u64(12)                      // STACK_USER size, data, dyn
      .u64(0x0003000200000064)          // WEIGHT_STRUCT: var1 100, var2 2, var3 3
      .u64(0x29c0a8142)                 // DATA_SRC
      .u64(0x7a)                        // TRANSACTION
      .u64(PERF_SAMPLE_REGS_ABI_64).u64(0x21).u64(0x22)  // REGS_INTR
      .u64(0x1234000)                   // PHYS_ADDR
      .u64(0xc6)                        // CGROUP
      .u64(4096)                        // DATA_PAGE_SIZE
      .u64(2097152)                     // CODE_PAGE_SIZE
      .u64(8).u64(0xa0a0a0a0)           // AUX size, data
      .finish();
}

}  // namespace

TEST_CASE("every PERF_RECORD_SAMPLE field decodes in kernel order") {
  const SampleFormat format = every_field_format();
  const auto words = every_field_sample();
  SampleRecord s;
  REQUIRE(decode_sample(view_of(words), format, s) == DecodeStatus::ok);
  CHECK(s.present == kEverySampleField);
  CHECK(s.misc == (PERF_RECORD_MISC_USER | PERF_RECORD_MISC_EXACT_IP));
  CHECK(s.identifier == 0x1d);
  CHECK(s.ip == 0x401000);
  CHECK(s.pid == 4242);
  CHECK(s.tid == 4343);
  CHECK(s.time == 123456789);
  CHECK(s.addr == 0x7fff0000);
  CHECK(s.id == 0x1d);
  CHECK(s.stream_id == 0x5e);
  CHECK(s.cpu == 3);
  CHECK(s.period == 10007);
  REQUIRE(s.read_values.size() == 9);
  CHECK(s.read_values[0] == 2);
  CHECK(s.read_values[6] == 22);
  REQUIRE(s.callchain.size() == 4);
  CHECK(s.callchain[1] == 0xffffffff81000000);
  CHECK(s.callchain[3] == 0x401000);
  REQUIRE(s.raw.size() == 5);
  CHECK(std::memcmp(s.raw.data(), "abcde", 5) == 0);
  CHECK(s.branch_nr == 2);
  CHECK(s.branch_hw_idx == 7);
  REQUIRE(s.branches.size() == 6);
  CHECK(s.branches[0] == 0xa1);
  CHECK(s.branches[5] == 0xb3);
  CHECK(s.regs_user_abi == PERF_SAMPLE_REGS_ABI_64);
  REQUIRE(s.regs_user.size() == 3);
  CHECK(s.regs_user[2] == 0x13);
  REQUIRE(s.stack_user.size() == 16);
  CHECK(s.stack_user_dyn_size == 12);
  CHECK(s.weight == 100);
  CHECK(s.weight_var2 == 2);
  CHECK(s.weight_var3 == 3);
  CHECK(s.data_src == 0x29c0a8142);
  CHECK(s.transaction == 0x7a);
  REQUIRE(s.regs_intr.size() == 2);
  CHECK(s.regs_intr[1] == 0x22);
  CHECK(s.phys_addr == 0x1234000);
  CHECK(s.cgroup == 0xc6);
  CHECK(s.data_page_size == 4096);
  CHECK(s.code_page_size == 2097152);
  REQUIRE(s.aux.size() == 8);
}

TEST_CASE("a record cut anywhere is rejected as truncated, never read past") {
  const SampleFormat format = every_field_format();
  const auto full = every_field_sample();
  for (std::size_t words = 1; words < full.size(); ++words) {
    CAPTURE(words);
    // Its own exact-size buffer, so a sanitizer would catch a read past the end.
    std::vector<std::uint64_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(words));
    perf_event_header h{};
    std::memcpy(&h, cut.data(), sizeof h);
    h.size = static_cast<std::uint16_t>(words * 8);
    std::memcpy(cut.data(), &h, sizeof h);
    SampleRecord s;
    CHECK(decode_sample(view_of(cut), format, s) == DecodeStatus::truncated);
    CHECK(s.present == 0);
  }
}

TEST_CASE("lengths inside a record that overflow it are rejected") {
  SampleFormat chain{PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN};
  SampleRecord s;
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(1).u64(1ull << 61).u64(5).finish()), chain,
                      s) == DecodeStatus::truncated);
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(1).u64(~0ull).finish()), chain, s) ==
        DecodeStatus::truncated);
  SampleFormat branches{PERF_SAMPLE_BRANCH_STACK};
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(0x0aaaaaaaaaaaaaab).u64(1).finish()),
                      branches, s) == DecodeStatus::truncated);
  SampleFormat raw{PERF_SAMPLE_RAW};
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(0xffffffff).finish()), raw, s) ==
        DecodeStatus::truncated);
  SampleFormat stack{PERF_SAMPLE_STACK_USER};
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(8).u64(0).u64(9).finish()), stack, s) ==
        DecodeStatus::truncated);  // dyn_size larger than the copied stack
  SampleFormat group{PERF_SAMPLE_READ, PERF_FORMAT_GROUP};
  CHECK(decode_sample(view_of(RecordBuilder(PERF_RECORD_SAMPLE).u64(1ull << 62).u64(1).finish()), group, s) ==
        DecodeStatus::truncated);
  // A header whose size disagrees with the bytes handed over.
  auto words = RecordBuilder(PERF_RECORD_SAMPLE).u64(1).finish();
  RecordView v = view_of(words);
  v.header.size = 64;
  CHECK(decode_sample(v, SampleFormat{PERF_SAMPLE_IP}, s) == DecodeStatus::truncated);
}

TEST_CASE("optional parts: no registers, empty user stack, plain READ, full WEIGHT") {
  perf_event_attr attr{};
  attr.sample_type = PERF_SAMPLE_READ | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT |
                     PERF_SAMPLE_BRANCH_STACK;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID;
  attr.sample_regs_user = 0xff;
  const SampleFormat format = SampleFormat::from_attr(attr);
  auto words = RecordBuilder(PERF_RECORD_SAMPLE)
                   .u64(500).u64(400).u64(9)             // READ value, time_running, id
                   .u64(0)                               // BRANCH_STACK nr 0 (no hw_idx: not requested)
                   .u64(PERF_SAMPLE_REGS_ABI_NONE)       // REGS_USER: a kernel thread has none
                   .u64(0)                               // STACK_USER size 0: no data, no dyn_size
                   .u64(0x123456789abc)                  // WEIGHT
                   .finish();
  SampleRecord s;
  REQUIRE(decode_sample(view_of(words), format, s) == DecodeStatus::ok);
  CHECK(s.read_values.size() == 3);
  CHECK(s.read_values[0] == 500);
  CHECK(s.branch_nr == 0);
  CHECK(s.branches.empty());
  CHECK(s.regs_user.empty());
  CHECK(s.stack_user.empty());
  CHECK(s.weight == 0x123456789abc);
  // Extra bytes after the known fields mean the format does not match the event.
  words = RecordBuilder(PERF_RECORD_SAMPLE).u64(1).u64(2).finish();
  CHECK(decode_sample(view_of(words), SampleFormat{PERF_SAMPLE_IP}, s) == DecodeStatus::trailing_bytes);
  CHECK(s.present == 0);
  CHECK(decode_sample(view_of(words), SampleFormat{PERF_SAMPLE_IP | PERF_SAMPLE_TIME}, s) == DecodeStatus::ok);
  CHECK(s.time == 2);
}

TEST_CASE("unknown formats and other record types are refused with a reason") {
  SampleRecord s;
  auto sample = RecordBuilder(PERF_RECORD_SAMPLE).u64(1).finish();
  CHECK(decode_sample(view_of(sample), SampleFormat{PERF_SAMPLE_IP | (1ull << 40)}, s) ==
        DecodeStatus::unsupported_format);
  CHECK(decode_sample(view_of(sample), SampleFormat{PERF_SAMPLE_READ, 1ull << 20}, s) ==
        DecodeStatus::unsupported_format);
  CHECK(describe(DecodeStatus::unsupported_format).find("sample_type") != std::string_view::npos);
  auto lost = RecordBuilder(PERF_RECORD_LOST).u64(1).u64(2).finish();
  CHECK(decode_sample(view_of(lost), SampleFormat{PERF_SAMPLE_IP}, s) == DecodeStatus::wrong_type);
  LostSamplesRecord ls;
  CHECK(decode_lost_samples(view_of(lost), SampleFormat{}, ls) == DecodeStatus::wrong_type);
}

TEST_CASE("LOST, THROTTLE, UNTHROTTLE and LOST_SAMPLES with sample_id_all trailers") {
  perf_event_attr attr{};
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
                     PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_CALLCHAIN;
  attr.sample_id_all = 1;
  const SampleFormat format = SampleFormat::from_attr(attr);
  auto trailer = [](RecordBuilder b) {
    return b.u32_pair(10, 11).u64(5000).u64(0x1d).u64(0x5e).u32_pair(2, 0).u64(0x1d).finish();
  };
  LostRecord lost;
  REQUIRE(decode_lost(view_of(trailer(RecordBuilder(PERF_RECORD_LOST).u64(0x1d).u64(321))), format, lost) ==
          DecodeStatus::ok);
  CHECK(lost.id == 0x1d);
  CHECK(lost.lost == 321);
  CHECK(lost.sample_id.pid == 10);
  CHECK(lost.sample_id.tid == 11);
  CHECK(lost.sample_id.time == 5000);
  CHECK(lost.sample_id.id == 0x1d);
  CHECK(lost.sample_id.stream_id == 0x5e);
  CHECK(lost.sample_id.cpu == 2);
  CHECK(lost.sample_id.has(PERF_SAMPLE_TIME));
  CHECK_FALSE(lost.sample_id.has(PERF_SAMPLE_IP));

  ThrottleRecord t;
  REQUIRE(decode_throttle(view_of(trailer(RecordBuilder(PERF_RECORD_UNTHROTTLE).u64(777).u64(0x1d).u64(0x5e))),
                          format, t) == DecodeStatus::ok);
  CHECK(t.unthrottle);
  CHECK(t.time == 777);
  CHECK(t.id == 0x1d);
  CHECK(t.stream_id == 0x5e);
  CHECK(t.sample_id.tid == 11);
  REQUIRE(decode_throttle(view_of(trailer(RecordBuilder(PERF_RECORD_THROTTLE).u64(1).u64(2).u64(3))), format,
                          t) == DecodeStatus::ok);
  CHECK_FALSE(t.unthrottle);

  LostSamplesRecord ls;
  REQUIRE(decode_lost_samples(view_of(trailer(RecordBuilder(PERF_RECORD_LOST_SAMPLES).u64(9))), format, ls) ==
          DecodeStatus::ok);
  CHECK(ls.lost == 9);
  CHECK(ls.sample_id.time == 5000);

  // Without sample_id_all there is no trailer to find.
  SampleFormat plain = format;
  plain.sample_id_all = false;
  REQUIRE(decode_lost(view_of(RecordBuilder(PERF_RECORD_LOST).u64(1).u64(2).finish()), plain, lost) ==
          DecodeStatus::ok);
  CHECK(lost.lost == 2);
  CHECK(lost.sample_id.present == 0);
  // With it, a record too short for the trailer is truncated.
  CHECK(decode_lost(view_of(RecordBuilder(PERF_RECORD_LOST).u64(1).u64(2).u64(3).finish()), format, lost) ==
        DecodeStatus::truncated);
}

TEST_CASE("callchain context markers are told apart and stripped") {
  const std::uint64_t chain[] = {PERF_CONTEXT_KERNEL, 0xffffffff81000010, 0xffffffff81000020,
                                 PERF_CONTEXT_USER,   0x401010,           0x401020};
  CHECK(is_context_marker(PERF_CONTEXT_MAX));
  CHECK(is_context_marker(PERF_CONTEXT_GUEST_USER));
  CHECK_FALSE(is_context_marker(0xffffffff81000010));
  CHECK(context_of_marker(PERF_CONTEXT_HV) == CallchainContext::hypervisor);
  CHECK(context_of_marker(PERF_CONTEXT_GUEST_KERNEL) == CallchainContext::guest_kernel);

  std::uint64_t out[8];
  CHECK(strip_context_markers(chain, out) == 4);
  CHECK(out[0] == 0xffffffff81000010);
  CHECK(out[3] == 0x401020);
  CHECK(strip_context_markers(chain, out, true) == 2);
  CHECK(out[0] == 0x401010);
  CHECK(strip_context_markers(chain, std::span(out, 3)) == 3);  // bounded by the output

  std::vector<CallchainContext> contexts;
  CHECK(for_each_frame(chain, [&](std::uint64_t, CallchainContext c) { contexts.push_back(c); }) == 4);
  CHECK(contexts == std::vector<CallchainContext>{CallchainContext::kernel, CallchainContext::kernel,
                                                  CallchainContext::user, CallchainContext::user});
}

TEST_CASE("SampleRecord to Sample: frames from the callchain, or the IP alone") {
  SampleFormat format{PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_CPU |
                      PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_ADDR};
  auto words = RecordBuilder(PERF_RECORD_SAMPLE)
                   .u64(0x401010).u32_pair(1, 2).u64(99).u64(0xadd).u64(0x1d).u32_pair(1, 0).u64(1000)
                   .u64(3).u64(PERF_CONTEXT_USER).u64(0x401010).u64(0x402020)
                   .finish();
  SampleRecord r;
  REQUIRE(decode_sample(view_of(words), format, r) == DecodeStatus::ok);
  std::uint64_t storage[4];
  Sample s = to_sample(r, storage);
  CHECK(s.pid == 1);
  CHECK(s.tid == 2);
  CHECK(s.time == 99);
  CHECK(s.period == 1000);
  CHECK(s.cpu == 1);
  CHECK(s.id == 0x1d);
  CHECK(s.addr == 0xadd);
  REQUIRE(s.frames.size() == 2);
  CHECK(s.frames[0] == 0x401010);
  CHECK(s.frames[1] == 0x402020);

  r.present &= ~static_cast<std::uint64_t>(PERF_SAMPLE_CALLCHAIN);
  s = to_sample(r, storage);
  REQUIRE(s.frames.size() == 1);
  CHECK(s.frames[0] == 0x401010);
}

TEST_CASE("a sample that wraps around the ring decodes from the copy") {
  SampleFormat format{PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN};
  FakeRing fake(256);
  RingBuffer ring = fake.ring();
  REQUIRE(fake.write(RecordBuilder(1).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0)
                         .u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0)
                         .u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).finish()));  // 240 bytes
  ring.read([](const RecordView&) {});
  RecordBuilder b(PERF_RECORD_SAMPLE);
  b.u64(0x401000).u32_pair(7, 8).u64(55).u64(20).u64(PERF_CONTEXT_USER);
  for (std::uint64_t i = 1; i < 20; ++i) b.u64(0x400000 + i);
  REQUIRE(fake.write(b.finish()));  // starts 16 bytes before the end
  int decoded = 0;
  ring.read([&](const RecordView& v) {
    SampleRecord s;
    REQUIRE(decode_sample(v, format, s) == DecodeStatus::ok);
    CHECK(s.tid == 8);
    REQUIRE(s.callchain.size() == 20);
    CHECK(s.callchain[0] == PERF_CONTEXT_USER);
    CHECK(s.callchain[19] == 0x400000 + 19);
    ++decoded;
  });
  CHECK(decoded == 1);
}

TEST_CASE("random records with random formats never decode out of bounds") {
  // xorshift: deterministic, so a failure reproduces.
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  const std::uint64_t known = kEverySampleField | PERF_SAMPLE_WEIGHT;
  std::size_t ok = 0;
  for (int round = 0; round < 20000; ++round) {
    const std::size_t words = 1 + next() % 40;
    std::vector<std::uint64_t> record(words);
    for (auto& w : record) {
      // Small values are lengths that might fit; large ones probe overflow.
      const std::uint64_t r = next();
      w = (r & 3) == 0 ? r : (r & 3) == 1 ? (r >> 2) % 8 : (r >> 2) % 64;
    }
    perf_event_header h{PERF_RECORD_SAMPLE, 0, static_cast<std::uint16_t>(words * 8)};
    std::memcpy(record.data(), &h, sizeof h);
    SampleFormat format;
    format.sample_type = next() & next() & known;  // about a quarter of the fields each time
    format.read_format = next() & 0x1f;
    format.branch_sample_type = next() & PERF_SAMPLE_BRANCH_HW_INDEX;
    format.sample_regs_user = next() & 0xffff;
    format.sample_regs_intr = next() & 0xffff;
    const RecordView view = view_of(record);
    SampleRecord s;
    const DecodeStatus status = decode_sample(view, format, s);
    REQUIRE((status == DecodeStatus::ok || status == DecodeStatus::truncated ||
             status == DecodeStatus::trailing_bytes));
    if (status != DecodeStatus::ok) continue;
    ++ok;
    const auto* lo = reinterpret_cast<const std::byte*>(record.data());
    const auto* hi = lo + words * 8;
    auto inside = [&](const void* p, std::size_t n) {
      const auto* b = static_cast<const std::byte*>(p);
      return n == 0 || (b >= lo + 8 && b + n <= hi);
    };
    CHECK(inside(s.callchain.data(), s.callchain.size_bytes()));
    CHECK(inside(s.read_values.data(), s.read_values.size_bytes()));
    CHECK(inside(s.raw.data(), s.raw.size()));
    CHECK(inside(s.branches.data(), s.branches.size_bytes()));
    CHECK(inside(s.regs_user.data(), s.regs_user.size_bytes()));
    CHECK(inside(s.stack_user.data(), s.stack_user.size()));
    CHECK(inside(s.regs_intr.data(), s.regs_intr.size_bytes()));
    CHECK(inside(s.aux.data(), s.aux.size()));
  }
  MESSAGE(ok << " of 20000 random records decoded");
  CHECK(ok > 0);
}
