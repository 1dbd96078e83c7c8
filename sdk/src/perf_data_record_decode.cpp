// Decoding records by their event's sample_type (the layout the kernel writes, perf_event.h).
#include <algorithm>
#include <bit>

#include "byte_cursor.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"

namespace selfperf {
namespace {

void skip_read_values(detail::ByteCursor& c, std::uint64_t read_format) {
  const std::uint64_t per_value = 1 + ((read_format & PERF_FORMAT_ID) ? 1 : 0) +
                                  ((read_format & PERF_FORMAT_LOST) ? 1 : 0);
  if (read_format & PERF_FORMAT_GROUP) {
    auto nr = c.u64();
    if (read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) c.u64();
    if (read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) c.u64();
    if (nr > c.remaining() / (per_value * 8)) c.fail("read group of " + std::to_string(nr) + " values overruns");
    c.skip(nr * per_value * 8);
  } else {
    c.u64();
    if (read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) c.u64();
    if (read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) c.u64();
    c.skip((per_value - 1) * 8);
  }
}

void skip_regs(detail::ByteCursor& c, std::uint64_t mask) {
  auto abi = c.u64();
  if (abi != PERF_SAMPLE_REGS_ABI_NONE) c.skip(std::uint64_t{8} * static_cast<unsigned>(std::popcount(mask)));
}

}  // namespace

std::vector<std::uint64_t> DecodedSample::frames() const {
  std::vector<std::uint64_t> out;
  out.reserve(callchain.size());
  for (auto ip : callchain)
    if (ip < static_cast<std::uint64_t>(PERF_CONTEXT_MAX)) out.push_back(ip);
  return out;
}

std::size_t PerfDataReader::event_index_for_sample(const PerfRecord& record) const {
  if (events_.size() == 1) return 0;
  // With several events, perf requires PERF_SAMPLE_IDENTIFIER (fixed position) or the same sample_type for all
  // (ID at a fixed position); other files are ambiguous and read with the first event's layout.
  const auto type = events_[0].attr.sample_type;
  std::size_t pos = 0;
  if (!(type & PERF_SAMPLE_IDENTIFIER)) {
    if (!(type & PERF_SAMPLE_ID)) return 0;
    pos = static_cast<std::size_t>(std::popcount(type & (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                                         PERF_SAMPLE_ADDR)));
  }
  detail::ByteCursor c(record.bytes, record.offset, name_, "sample record");
  c.skip(sizeof(perf_event_header) + pos * 8);
  auto id = c.u64();
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (std::find(events_[i].ids.begin(), events_[i].ids.end(), id) != events_[i].ids.end()) return i;
  c.fail("sample id " + std::to_string(id) + " belongs to no event in the attrs section");
}

DecodedSample PerfDataReader::decode_sample(const PerfRecord& record) const {
  if (record.type != PERF_RECORD_SAMPLE) throw Error("perf.data reader: decode_sample on a non-sample record");
  DecodedSample s;
  s.event_index = event_index_for_sample(record);
  const auto& attr = events_[s.event_index].attr;
  const std::uint64_t t = attr.sample_type;
  s.sample_type = t;
  detail::ByteCursor c(record.bytes, record.offset, name_, "sample record");
  c.skip(sizeof(perf_event_header));
  if (t & PERF_SAMPLE_IDENTIFIER) s.identifier = c.u64();
  if (t & PERF_SAMPLE_IP) s.ip = c.u64();
  if (t & PERF_SAMPLE_TID) {
    s.pid = c.u32();
    s.tid = c.u32();
  }
  if (t & PERF_SAMPLE_TIME) s.time = c.u64();
  if (t & PERF_SAMPLE_ADDR) s.addr = c.u64();
  if (t & PERF_SAMPLE_ID) s.id = c.u64();
  if (t & PERF_SAMPLE_STREAM_ID) s.stream_id = c.u64();
  if (t & PERF_SAMPLE_CPU) {
    s.cpu = c.u32();
    c.u32();
  }
  if (t & PERF_SAMPLE_PERIOD) s.period = c.u64();
  if (t & PERF_SAMPLE_READ) skip_read_values(c, attr.read_format);
  if (t & PERF_SAMPLE_CALLCHAIN) {
    auto nr = c.u64();
    if (nr > c.remaining() / 8) c.fail("callchain of " + std::to_string(nr) + " entries overruns the record");
    s.callchain.resize(static_cast<std::size_t>(nr));
    for (auto& ip : s.callchain) ip = c.u64();
  }
  if (t & PERF_SAMPLE_RAW) c.skip(c.u32());
  if (t & PERF_SAMPLE_BRANCH_STACK) {
    auto nr = c.u64();
    if (attr.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) c.u64();
    if (nr > c.remaining() / 24) c.fail("branch stack of " + std::to_string(nr) + " entries overruns the record");
    c.skip(nr * 24);
  }
  if (t & PERF_SAMPLE_REGS_USER) skip_regs(c, attr.sample_regs_user);
  if (t & PERF_SAMPLE_STACK_USER) {
    auto size = c.u64();
    c.skip(size);
    if (size != 0) c.u64();  // dyn_size
  }
  if (t & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) s.weight = c.u64();
  if (t & PERF_SAMPLE_DATA_SRC) s.data_src = c.u64();
  if (t & PERF_SAMPLE_TRANSACTION) s.transaction = c.u64();
  if (t & PERF_SAMPLE_REGS_INTR) skip_regs(c, attr.sample_regs_intr);
  if (t & PERF_SAMPLE_PHYS_ADDR) s.phys_addr = c.u64();
  if (t & PERF_SAMPLE_AUX) c.skip(c.u64());
  if (t & PERF_SAMPLE_CGROUP) s.cgroup = c.u64();
  if (t & PERF_SAMPLE_DATA_PAGE_SIZE) s.data_page_size = c.u64();
  if (t & PERF_SAMPLE_CODE_PAGE_SIZE) s.code_page_size = c.u64();
  return s;
}

std::size_t PerfDataReader::trailer_bytes(std::size_t event_index) const {
  const auto& attr = events_[event_index].attr;
  if (!attr.sample_id_all) return 0;
  constexpr std::uint64_t fields = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                                   PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
  return 8 * static_cast<std::size_t>(std::popcount(attr.sample_type & fields));
}

SampleIdTrailer PerfDataReader::decode_sample_id(const PerfRecord& record) const {
  SampleIdTrailer out;
  // perf-tool records (ATTR, FINISHED_ROUND, …) carry no trailer.
  if (record.type >= 64 || record.type == PERF_RECORD_SAMPLE) return out;
  std::size_t event = 0;
  if (events_.size() > 1 && (events_[0].attr.sample_type & PERF_SAMPLE_IDENTIFIER) && record.bytes.size() >= 16) {
    std::uint64_t id;
    std::memcpy(&id, record.bytes.data() + record.bytes.size() - 8, 8);
    for (std::size_t i = 0; i < events_.size(); ++i)
      if (std::find(events_[i].ids.begin(), events_[i].ids.end(), id) != events_[i].ids.end()) event = i;
  }
  const std::size_t n = trailer_bytes(event);
  if (n == 0) return out;
  if (n + sizeof(perf_event_header) > record.bytes.size())
    throw Error("perf.data reader: " + name_ + ": record at file offset " + std::to_string(record.offset) +
                " is too short for its sample_id_all trailer; the file is corrupt");
  const auto t = events_[event].attr.sample_type;
  detail::ByteCursor c(record.bytes.subspan(record.bytes.size() - n), record.offset + record.bytes.size() - n, name_,
                       "sample_id trailer");
  if (t & PERF_SAMPLE_TID) {
    out.pid = c.u32();
    out.tid = c.u32();
  }
  if (t & PERF_SAMPLE_TIME) out.time = c.u64();
  if (t & PERF_SAMPLE_ID) out.id = c.u64();
  if (t & PERF_SAMPLE_STREAM_ID) out.stream_id = c.u64();
  if (t & PERF_SAMPLE_CPU) {
    out.cpu = c.u32();
    c.u32();
  }
  if (t & PERF_SAMPLE_IDENTIFIER) out.identifier = c.u64();
  return out;
}

PerfCommRecord PerfDataReader::decode_comm(const PerfRecord& record) const {
  if (record.type != PERF_RECORD_COMM) throw Error("perf.data reader: decode_comm on a non-COMM record");
  detail::ByteCursor c(record.bytes, record.offset, name_, "COMM record");
  c.skip(sizeof(perf_event_header));
  PerfCommRecord out;
  out.pid = c.u32();
  out.tid = c.u32();
  out.comm = c.string_in(c.remaining());
  return out;
}

Mmap2Info PerfDataReader::decode_mmap(const PerfRecord& record) const {
  if (record.type != PERF_RECORD_MMAP && record.type != PERF_RECORD_MMAP2)
    throw Error("perf.data reader: decode_mmap on a record that is neither MMAP nor MMAP2");
  detail::ByteCursor c(record.bytes, record.offset, name_, "MMAP record");
  c.skip(sizeof(perf_event_header));
  Mmap2Info m;
  m.pid = c.get<std::int32_t>();
  m.tid = c.get<std::int32_t>();
  m.start = c.u64();
  m.len = c.u64();
  m.pgoff = c.u64();
  if (record.type == PERF_RECORD_MMAP2) {
    if (record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
      c.skip(24);  // build_id_size, reserved, build_id[20]
    } else {
      m.maj = c.u32();
      m.min = c.u32();
      m.ino = c.u64();
      m.ino_generation = c.u64();
    }
    m.prot = c.u32();
    m.flags = c.u32();
  }
  m.filename = c.string_in(c.remaining());
  return m;
}

std::vector<std::uint8_t> PerfDataReader::decode_mmap2_build_id(const PerfRecord& record) const {
  if (record.type != PERF_RECORD_MMAP2 || !(record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) return {};
  detail::ByteCursor c(record.bytes, record.offset, name_, "MMAP2 record");
  c.skip(sizeof(perf_event_header) + 4 + 4 + 8 * 3);
  auto size = c.get<std::uint8_t>();
  c.skip(3);
  auto id = c.take(20);
  return {id.begin(), id.begin() + std::min<std::size_t>(size, 20)};
}

PerfLostRecord PerfDataReader::decode_lost(const PerfRecord& record) const {
  detail::ByteCursor c(record.bytes, record.offset, name_, "LOST record");
  c.skip(sizeof(perf_event_header));
  PerfLostRecord out;
  if (record.type == PERF_RECORD_LOST) {
    out.id = c.u64();
    out.lost = c.u64();
  } else if (record.type == PERF_RECORD_LOST_SAMPLES) {
    out.lost = c.u64();
  } else {
    throw Error("perf.data reader: decode_lost on a record that is neither LOST nor LOST_SAMPLES");
  }
  return out;
}

}  // namespace selfperf
