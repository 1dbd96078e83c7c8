// Decoding perf.data records. Samples, LOST and the sample_id trailer go through record.hpp's decoders, the
// same layout walkers the ring buffer uses; this file only finds the record's event, keeps the bytes 8-aligned
// and turns a DecodeStatus into an Error naming the file offset.
#include <algorithm>
#include <bit>
#include <cstring>

#include "perf_data/byte_cursor.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/record.hpp"

namespace selfperf {
namespace {

// record.hpp's decoders hand out spans of u64 in place, so the bytes must be 8-aligned. next_record()'s
// buffer is; a PerfRecord a caller built over other memory is copied first.
class AlignedRecord {
 public:
  explicit AlignedRecord(const PerfRecord& record) {
    std::span<const std::uint8_t> bytes = record.bytes;
    if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(std::uint64_t) != 0) {
      copy_.resize((bytes.size() + 7) / 8);
      std::memcpy(copy_.data(), bytes.data(), bytes.size());
      bytes = {reinterpret_cast<const std::uint8_t*>(copy_.data()), bytes.size()};
    }
    // header.size as next_record() read it; decode_* reject a record whose bytes disagree with it.
    view_.header = perf_event_header{record.type, record.misc, record.size};
    view_.bytes = std::as_bytes(bytes);
  }
  const RecordView& view() const noexcept { return view_; }

 private:
  std::vector<std::uint64_t> copy_;
  RecordView view_;
};

[[noreturn]] void fail(const PerfRecord& record, const std::string& file, const char* what, DecodeStatus status) {
  detail::ByteCursor(record.bytes, record.offset, file, what).fail(std::string(describe(status)));
}

}  // namespace

std::vector<std::uint64_t> DecodedSample::frames() const {
  std::vector<std::uint64_t> out;
  out.reserve(callchain.size());
  for_each_frame(callchain, [&](std::uint64_t ip, CallchainContext) { out.push_back(ip); });
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
  const AlignedRecord aligned(record);
  SampleRecord r;
  if (auto status = selfperf::decode_sample(aligned.view(), SampleFormat::from_attr(attr), r);
      status != DecodeStatus::ok)
    fail(record, name_, "sample record", status);
  s.sample_type = attr.sample_type;
  s.identifier = r.identifier;
  s.ip = r.ip;
  s.pid = r.pid;
  s.tid = r.tid;
  s.time = r.time;
  s.addr = r.addr;
  s.id = r.id;
  s.stream_id = r.stream_id;
  s.cpu = r.cpu;
  s.period = r.period;
  s.callchain.assign(r.callchain.begin(), r.callchain.end());
  s.weight = r.weight;
  s.data_src = r.data_src;
  s.branch_hw_index = r.branch_hw_idx;
  s.branches.resize(r.branches.size() / 3);
  if (!s.branches.empty()) std::memcpy(s.branches.data(), r.branches.data(), r.branches.size_bytes());
  s.transaction = r.transaction;
  s.phys_addr = r.phys_addr;
  s.cgroup = r.cgroup;
  s.data_page_size = r.data_page_size;
  s.code_page_size = r.code_page_size;
  return s;
}

std::size_t PerfDataReader::event_index_for_trailer(const PerfRecord& record) const {
  // With several events the trailer's last word, PERF_SAMPLE_IDENTIFIER, says whose layout it has.
  if (events_.size() > 1 && (events_[0].attr.sample_type & PERF_SAMPLE_IDENTIFIER) && record.bytes.size() >= 16) {
    std::uint64_t id;
    std::memcpy(&id, record.bytes.data() + record.bytes.size() - 8, 8);
    for (std::size_t i = 0; i < events_.size(); ++i)
      if (std::find(events_[i].ids.begin(), events_[i].ids.end(), id) != events_[i].ids.end()) return i;
  }
  return 0;
}

SampleIdTrailer PerfDataReader::decode_sample_id(const PerfRecord& record) const {
  SampleIdTrailer out;
  // perf-tool records (ATTR, FINISHED_ROUND, …) carry no trailer.
  if (record.type >= 64 || record.type == PERF_RECORD_SAMPLE) return out;
  const auto format = SampleFormat::from_attr(events_[event_index_for_trailer(record)].attr);
  const AlignedRecord aligned(record);
  SampleId id;
  if (auto status = selfperf::decode_sample_id(aligned.view(), format, id); status != DecodeStatus::ok)
    fail(record, name_, "sample_id trailer", status);
  out.pid = id.pid;
  out.tid = id.tid;
  out.time = id.time;
  out.stream_id = id.stream_id;
  out.cpu = id.cpu;
  // SampleId keeps one id: ID and IDENTIFIER carry the same value when both are present.
  if (id.has(PERF_SAMPLE_ID)) out.id = id.id;
  if (id.has(PERF_SAMPLE_IDENTIFIER)) out.identifier = id.id;
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
  if (record.type != PERF_RECORD_LOST && record.type != PERF_RECORD_LOST_SAMPLES)
    throw Error("perf.data reader: decode_lost on a record that is neither LOST nor LOST_SAMPLES");
  const auto format = SampleFormat::from_attr(events_[event_index_for_trailer(record)].attr);
  const AlignedRecord aligned(record);
  PerfLostRecord out;
  DecodeStatus status;
  if (record.type == PERF_RECORD_LOST) {
    LostRecord lost;
    status = selfperf::decode_lost(aligned.view(), format, lost);
    out.id = lost.id;
    out.lost = lost.lost;
  } else {
    LostSamplesRecord lost;
    status = selfperf::decode_lost_samples(aligned.view(), format, lost);
    out.lost = lost.lost;
  }
  if (status != DecodeStatus::ok) fail(record, name_, "LOST record", status);
  return out;
}

}  // namespace selfperf
