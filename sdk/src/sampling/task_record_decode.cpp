// FORK/EXIT/COMM/MMAP2 records: fixed fields, then (COMM, MMAP2) a NUL-terminated name padded to 8 bytes,
// then the sample_id trailer, whose size the format fixes; the name is what lies between the two.
#include "selfperf/task_record.hpp"

#include <bit>
#include <cstring>

namespace selfperf {
namespace {

std::size_t trailer_size(const SampleFormat& format) noexcept {
  if (!format.sample_id_all) return 0;
  constexpr std::uint64_t bits = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                                 PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
  return 8 * static_cast<std::size_t>(std::popcount(format.sample_type & bits));
}

// The payload without its trailer, after checking the record's type and that `fixed` bytes fit before it.
DecodeStatus body(const RecordView& record, std::uint32_t type, std::size_t fixed, const SampleFormat& format,
                  std::span<const std::byte>& out) noexcept {
  if (record.type() != type) return DecodeStatus::wrong_type;
  if (record.bytes.size() < sizeof(perf_event_header) || record.header.size != record.bytes.size())
    return DecodeStatus::truncated;
  const auto payload = record.payload();
  const std::size_t trailer = trailer_size(format);
  if (payload.size() < fixed + trailer) return DecodeStatus::truncated;
  out = payload.first(payload.size() - trailer);
  return DecodeStatus::ok;
}

template <class T>
T at(std::span<const std::byte> bytes, std::size_t offset) noexcept {
  T v{};
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

// The NUL-terminated string starting at `offset`; truncated when no NUL ends it within the body.
DecodeStatus name_at(std::span<const std::byte> bytes, std::size_t offset, std::string_view& out) noexcept {
  const auto* p = reinterpret_cast<const char*>(bytes.data() + offset);
  const std::size_t room = bytes.size() - offset;
  const void* nul = std::memchr(p, 0, room);
  if (nul == nullptr) return DecodeStatus::truncated;
  out = std::string_view(p, static_cast<std::size_t>(static_cast<const char*>(nul) - p));
  return DecodeStatus::ok;
}

}  // namespace

DecodeStatus decode_task(const RecordView& record, const SampleFormat& format, TaskRecord& out) noexcept {
  out = TaskRecord{};
  const std::uint32_t type = record.type() == PERF_RECORD_EXIT ? PERF_RECORD_EXIT : PERF_RECORD_FORK;
  std::span<const std::byte> b;
  if (auto s = body(record, type, 24, format, b); s != DecodeStatus::ok) return s;
  out.exit = type == PERF_RECORD_EXIT;
  out.pid = at<std::uint32_t>(b, 0);
  out.ppid = at<std::uint32_t>(b, 4);
  out.tid = at<std::uint32_t>(b, 8);
  out.ptid = at<std::uint32_t>(b, 12);
  out.time = at<std::uint64_t>(b, 16);
  if (b.size() != 24) return DecodeStatus::trailing_bytes;
  return decode_sample_id(record, format, out.sample_id);
}

DecodeStatus decode_comm(const RecordView& record, const SampleFormat& format, CommRecord& out) noexcept {
  out = CommRecord{};
  std::span<const std::byte> b;
  if (auto s = body(record, PERF_RECORD_COMM, 9, format, b); s != DecodeStatus::ok) return s;
  out.pid = at<std::uint32_t>(b, 0);
  out.tid = at<std::uint32_t>(b, 4);
  out.exec = (record.misc() & PERF_RECORD_MISC_COMM_EXEC) != 0;
  if (auto s = name_at(b, 8, out.comm); s != DecodeStatus::ok) return s;
  return decode_sample_id(record, format, out.sample_id);
}

DecodeStatus decode_mmap2(const RecordView& record, const SampleFormat& format, Mmap2Record& out) noexcept {
  out = Mmap2Record{};
  std::span<const std::byte> b;
  constexpr std::size_t fixed = 8 + 3 * 8 + 2 * 4 + 2 * 8 + 2 * 4;  // pid/tid, addr..pgoff, maj/min, ino.., prot/flags
  if (auto s = body(record, PERF_RECORD_MMAP2, fixed + 1, format, b); s != DecodeStatus::ok) return s;
  // The build-id form puts other bytes where maj/min/ino are; watchers never ask for it (attr.build_id).
  if (record.misc() & PERF_RECORD_MISC_MMAP_BUILD_ID) return DecodeStatus::unsupported_format;
  out.pid = at<std::uint32_t>(b, 0);
  out.tid = at<std::uint32_t>(b, 4);
  out.addr = at<std::uint64_t>(b, 8);
  out.len = at<std::uint64_t>(b, 16);
  out.pgoff = at<std::uint64_t>(b, 24);
  out.maj = at<std::uint32_t>(b, 32);
  out.min = at<std::uint32_t>(b, 36);
  out.ino = at<std::uint64_t>(b, 40);
  out.ino_generation = at<std::uint64_t>(b, 48);
  out.prot = at<std::uint32_t>(b, 56);
  out.flags = at<std::uint32_t>(b, 60);
  if (auto s = name_at(b, fixed, out.filename); s != DecodeStatus::ok) return s;
  return decode_sample_id(record, format, out.sample_id);
}

}  // namespace selfperf
