// libFuzzer target: decode_sample and decode_sample_id on any record with any sample format (the first 40
// bytes choose the format) return a status, never read outside the record.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "selfperf/record.hpp"
#include "selfperf/ring_buffer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  selfperf::SampleFormat format;
  constexpr std::size_t kFormatBytes = 40;
  if (size < kFormatBytes + sizeof(perf_event_header)) return 0;
  std::memcpy(&format.sample_type, data, 8);
  std::memcpy(&format.read_format, data + 8, 8);
  std::memcpy(&format.branch_sample_type, data + 16, 8);
  std::memcpy(&format.sample_regs_user, data + 24, 8);
  std::memcpy(&format.sample_regs_intr, data + 32, 8);
  format.sample_id_all = (data[0] & 1) != 0;
  // The record in a buffer of its own size, so that ASan sees any read past its end.
  std::vector<std::byte> bytes(size - kFormatBytes);
  std::memcpy(bytes.data(), data + kFormatBytes, bytes.size());
  selfperf::RecordView record;
  std::memcpy(&record.header, bytes.data(), sizeof record.header);
  record.header.size = static_cast<std::uint16_t>(bytes.size());
  record.bytes = bytes;
  selfperf::SampleRecord sample;
  if (selfperf::decode_sample(record, format, sample) == selfperf::DecodeStatus::ok) {
    std::uint64_t sum = sample.ip;
    for (auto w : sample.callchain) sum += w;
    for (auto b : sample.raw) sum += static_cast<std::uint64_t>(b);
    for (auto w : sample.branches) sum += w;
    for (auto b : sample.stack_user) sum += static_cast<std::uint64_t>(b);
    (void)sum;
  }
  selfperf::SampleId id;
  (void)selfperf::decode_sample_id(record, format, id);
  return 0;
}
