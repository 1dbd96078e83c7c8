#include <bit>
#include <cstring>

#include "selfperf/record.hpp"

namespace selfperf {
namespace {

// The sample_type bits decode_sample knows how to step over; anything else changes the layout in a way
// we cannot follow, so such a format is rejected rather than misread.
constexpr std::uint64_t kKnownSampleBits =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR |
    PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ |
    PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER |
    PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION |
    PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_AUX | PERF_SAMPLE_CGROUP |
    PERF_SAMPLE_DATA_PAGE_SIZE | PERF_SAMPLE_CODE_PAGE_SIZE | PERF_SAMPLE_WEIGHT_STRUCT;

constexpr std::uint64_t kKnownReadFormat = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                                           PERF_FORMAT_ID | PERF_FORMAT_GROUP | PERF_FORMAT_LOST;

// Reads 8-byte words from [begin, end) of a record; every access is checked, a failed one latches `ok`.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}

  std::uint64_t u64() noexcept {
    std::uint64_t v = 0;
    if (!need(8)) return 0;
    std::memcpy(&v, bytes_.data() + pos_, 8);
    pos_ += 8;
    return v;
  }
  // Two u32 packed in one word, first in the low half (the kernel writes a struct {u32, u32}).
  void u32_pair(std::uint32_t& first, std::uint32_t& second) noexcept {
    if (!need(8)) return;
    std::memcpy(&first, bytes_.data() + pos_, 4);
    std::memcpy(&second, bytes_.data() + pos_ + 4, 4);
    pos_ += 8;
  }
  // `count` words in place. Records are 8-aligned in the ring and in its scratch copy, and the kernel keeps
  // every field 8-aligned; a misaligned position means a size field lied (e.g. a corrupt STACK_USER size).
  std::span<const std::uint64_t> words(std::uint64_t count) noexcept {
    if (reinterpret_cast<std::uintptr_t>(bytes_.data() + pos_) % alignof(std::uint64_t) != 0 ||
        count > remaining() / 8 || !need(count * 8)) {
      ok_ = false;
      return {};
    }
    auto* p = reinterpret_cast<const std::uint64_t*>(bytes_.data() + pos_);
    pos_ += count * 8;
    return {p, static_cast<std::size_t>(count)};
  }
  std::span<const std::byte> bytes(std::uint64_t count) noexcept {
    if (count > remaining() || !need(count)) {
      ok_ = false;
      return {};
    }
    auto s = bytes_.subspan(pos_, static_cast<std::size_t>(count));
    pos_ += count;
    return s;
  }
  // The kernel pads variable-size fields (RAW) so the next field is 8-aligned again.
  void align8() noexcept {
    std::size_t aligned = (pos_ + 7) & ~std::size_t{7};
    if (aligned > bytes_.size()) {
      ok_ = false;
      return;
    }
    pos_ = aligned;
  }
  void seek(std::size_t pos) noexcept {
    if (pos > bytes_.size()) ok_ = false;
    else pos_ = pos;
  }
  std::size_t remaining() const noexcept { return bytes_.size() - pos_; }
  bool ok() const noexcept { return ok_; }

 private:
  bool need(std::uint64_t n) noexcept {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// Words in a read_format block for `read_format`, given the member count for groups.
std::span<const std::uint64_t> read_values(Cursor& c, std::uint64_t read_format) noexcept {
  const std::uint64_t per_value = 1 + ((read_format & PERF_FORMAT_ID) ? 1 : 0) +
                                  ((read_format & PERF_FORMAT_LOST) ? 1 : 0);
  const std::uint64_t times = ((read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) ? 1 : 0) +
                              ((read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) ? 1 : 0);
  if (!(read_format & PERF_FORMAT_GROUP)) return c.words(per_value + times);
  // { nr, times…, {value, id?, lost?}[nr] }: peek nr, then take the whole block as one span.
  Cursor peek = c;
  const std::uint64_t nr = peek.u64();
  if (!peek.ok() || nr > c.remaining() / 8) return c.words(~std::uint64_t{0});  // fails
  return c.words(1 + times + nr * per_value);
}

void regs(Cursor& c, std::uint64_t mask, std::uint64_t& abi, std::span<const std::uint64_t>& out) noexcept {
  abi = c.u64();
  // ABI_NONE (0): the task had no registers to give (e.g. a kernel thread); no words follow.
  if (c.ok() && abi != PERF_SAMPLE_REGS_ABI_NONE) out = c.words(static_cast<unsigned>(std::popcount(mask)));
}

// The sample_id trailer occupies the last words of the record; its size follows from the format.
std::size_t sample_id_size(std::uint64_t sample_type) noexcept {
  std::size_t n = 0;
  for (std::uint64_t bit : {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID,
                            PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER})
    if (sample_type & bit) n += 8;
  return n;
}

DecodeStatus fixed_part(const RecordView& record, std::uint32_t type, std::size_t words,
                        const SampleFormat& format, Cursor& c) noexcept {
  if (record.type() != type) return DecodeStatus::wrong_type;
  if (record.bytes.size() < sizeof(perf_event_header) || record.header.size != record.bytes.size())
    return DecodeStatus::truncated;
  std::size_t need = words * 8 + (format.sample_id_all ? sample_id_size(format.sample_type) : 0);
  if (c.remaining() < need) return DecodeStatus::truncated;
  return DecodeStatus::ok;
}

}  // namespace

SampleFormat SampleFormat::from_attr(const perf_event_attr& attr) noexcept {
  SampleFormat f;
  f.sample_type = attr.sample_type;
  f.read_format = attr.read_format;
  f.branch_sample_type = attr.branch_sample_type;
  f.sample_regs_user = attr.sample_regs_user;
  f.sample_regs_intr = attr.sample_regs_intr;
  f.sample_id_all = attr.sample_id_all != 0;
  return f;
}

std::string_view describe(DecodeStatus status) noexcept {
  switch (status) {
    case DecodeStatus::ok:
      return "ok";
    case DecodeStatus::wrong_type:
      return "record is not of the type this decoder reads";
    case DecodeStatus::truncated:
      return "record is shorter than its sample_type says (a field runs past header.size): the record or the "
             "SampleFormat given to the decoder is wrong";
    case DecodeStatus::trailing_bytes:
      return "record is longer than its sample_type says: the SampleFormat does not match the event's attr";
    case DecodeStatus::unsupported_format:
      return "sample_type or read_format has bits this decoder does not know (newer kernel ABI): open the "
             "event without them";
  }
  return "unknown decode status";
}

DecodeStatus decode_sample(const RecordView& record, const SampleFormat& format, SampleRecord& out) noexcept {
  out = SampleRecord{};
  if (record.type() != PERF_RECORD_SAMPLE) return DecodeStatus::wrong_type;
  if ((format.sample_type & ~kKnownSampleBits) != 0 || (format.read_format & ~kKnownReadFormat) != 0)
    return DecodeStatus::unsupported_format;
  if (record.bytes.size() < sizeof(perf_event_header) || record.header.size != record.bytes.size())
    return DecodeStatus::truncated;
  const std::uint64_t t = format.sample_type;
  out.misc = record.misc();
  Cursor c(record.payload());

  // Field order of PERF_RECORD_SAMPLE in perf_event.h (and perf_output_sample() in kernel/events/core.c).
  if (t & PERF_SAMPLE_IDENTIFIER) out.identifier = c.u64();
  if (t & PERF_SAMPLE_IP) out.ip = c.u64();
  if (t & PERF_SAMPLE_TID) c.u32_pair(out.pid, out.tid);
  if (t & PERF_SAMPLE_TIME) out.time = c.u64();
  if (t & PERF_SAMPLE_ADDR) out.addr = c.u64();
  if (t & PERF_SAMPLE_ID) out.id = c.u64();
  if (t & PERF_SAMPLE_STREAM_ID) out.stream_id = c.u64();
  if (t & PERF_SAMPLE_CPU) {
    std::uint32_t reserved = 0;
    c.u32_pair(out.cpu, reserved);
  }
  if (t & PERF_SAMPLE_PERIOD) out.period = c.u64();
  if (t & PERF_SAMPLE_READ) out.read_values = read_values(c, format.read_format);
  if (t & PERF_SAMPLE_CALLCHAIN) {
    const std::uint64_t nr = c.u64();
    out.callchain = c.words(nr);
  }
  if (t & PERF_SAMPLE_RAW) {
    // { u32 size; char data[size]; } padded so that the u32 plus the data end 8-aligned.
    std::uint32_t size = 0;
    auto head = c.bytes(4);
    if (c.ok()) std::memcpy(&size, head.data(), 4);
    out.raw = c.bytes(size);
    c.align8();
  }
  if (t & PERF_SAMPLE_BRANCH_STACK) {
    out.branch_nr = c.u64();
    if (format.branch_sample_type & PERF_SAMPLE_BRANCH_HW_INDEX) out.branch_hw_idx = c.u64();
    if (c.ok() && out.branch_nr <= c.remaining() / 24) out.branches = c.words(out.branch_nr * 3);
    else c.words(~std::uint64_t{0});
  }
  if (t & PERF_SAMPLE_REGS_USER) regs(c, format.sample_regs_user, out.regs_user_abi, out.regs_user);
  if (t & PERF_SAMPLE_STACK_USER) {
    // { u64 size; char data[size]; u64 dyn_size; } — size 0 (no user regs) has no data and no dyn_size.
    const std::uint64_t size = c.u64();
    if (c.ok() && size != 0) {
      out.stack_user = c.bytes(size);
      out.stack_user_dyn_size = c.u64();
      if (out.stack_user_dyn_size > size) return DecodeStatus::truncated;
    }
  }
  if (t & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
    const std::uint64_t w = c.u64();
    if (t & PERF_SAMPLE_WEIGHT_STRUCT) {
      // Little-endian layout { u32 var1_dw; u16 var2_w; u16 var3_w; }.
      out.weight = w & 0xffffffffu;
      out.weight_var2 = static_cast<std::uint16_t>(w >> 32);
      out.weight_var3 = static_cast<std::uint16_t>(w >> 48);
    } else {
      out.weight = w;
    }
  }
  if (t & PERF_SAMPLE_DATA_SRC) out.data_src = c.u64();
  if (t & PERF_SAMPLE_TRANSACTION) out.transaction = c.u64();
  if (t & PERF_SAMPLE_REGS_INTR) regs(c, format.sample_regs_intr, out.regs_intr_abi, out.regs_intr);
  if (t & PERF_SAMPLE_PHYS_ADDR) out.phys_addr = c.u64();
  // The header comment lists AUX before the page sizes, but the kernel (perf_output_sample) writes CGROUP,
  // DATA_PAGE_SIZE, CODE_PAGE_SIZE and then AUX last; perf's own parser follows the kernel.
  if (t & PERF_SAMPLE_CGROUP) out.cgroup = c.u64();
  if (t & PERF_SAMPLE_DATA_PAGE_SIZE) out.data_page_size = c.u64();
  if (t & PERF_SAMPLE_CODE_PAGE_SIZE) out.code_page_size = c.u64();
  if (t & PERF_SAMPLE_AUX) {
    const std::uint64_t size = c.u64();
    out.aux = c.bytes(size);
    c.align8();
  }
  if (!c.ok()) {
    out.present = 0;
    return DecodeStatus::truncated;
  }
  if (c.remaining() != 0) {
    // The kernel writes exactly the fields asked for; more bytes mean we decoded with the wrong format
    // and every field above may be misplaced.
    out.present = 0;
    return DecodeStatus::trailing_bytes;
  }
  out.present = t;
  return DecodeStatus::ok;
}

DecodeStatus decode_sample_id(const RecordView& record, const SampleFormat& format, SampleId& out) noexcept {
  out = SampleId{};
  if (!format.sample_id_all || record.type() == PERF_RECORD_SAMPLE) return DecodeStatus::ok;
  if (record.bytes.size() < sizeof(perf_event_header) || record.header.size != record.bytes.size())
    return DecodeStatus::truncated;
  const std::uint64_t t = format.sample_type;
  const std::size_t size = sample_id_size(t);
  Cursor c(record.payload());
  if (c.remaining() < size) return DecodeStatus::truncated;
  c.seek(c.remaining() - size);
  // Order of struct sample_id in perf_event.h: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER.
  if (t & PERF_SAMPLE_TID) c.u32_pair(out.pid, out.tid);
  if (t & PERF_SAMPLE_TIME) out.time = c.u64();
  if (t & PERF_SAMPLE_ID) out.id = c.u64();
  if (t & PERF_SAMPLE_STREAM_ID) out.stream_id = c.u64();
  if (t & PERF_SAMPLE_CPU) {
    std::uint32_t reserved = 0;
    c.u32_pair(out.cpu, reserved);
  }
  if (t & PERF_SAMPLE_IDENTIFIER) out.id = c.u64();
  if (!c.ok()) return DecodeStatus::truncated;
  out.present = t & (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |
                     PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER);
  return DecodeStatus::ok;
}

DecodeStatus decode_lost(const RecordView& record, const SampleFormat& format, LostRecord& out) noexcept {
  out = LostRecord{};
  Cursor c(record.payload());
  if (auto s = fixed_part(record, PERF_RECORD_LOST, 2, format, c); s != DecodeStatus::ok) return s;
  out.id = c.u64();
  out.lost = c.u64();
  return decode_sample_id(record, format, out.sample_id);
}

DecodeStatus decode_throttle(const RecordView& record, const SampleFormat& format,
                             ThrottleRecord& out) noexcept {
  out = ThrottleRecord{};
  const std::uint32_t type = record.type() == PERF_RECORD_UNTHROTTLE ? PERF_RECORD_UNTHROTTLE
                                                                      : PERF_RECORD_THROTTLE;
  Cursor c(record.payload());
  if (auto s = fixed_part(record, type, 3, format, c); s != DecodeStatus::ok) return s;
  out.unthrottle = type == PERF_RECORD_UNTHROTTLE;
  out.time = c.u64();
  out.id = c.u64();
  out.stream_id = c.u64();
  return decode_sample_id(record, format, out.sample_id);
}

DecodeStatus decode_lost_samples(const RecordView& record, const SampleFormat& format,
                                 LostSamplesRecord& out) noexcept {
  out = LostSamplesRecord{};
  Cursor c(record.payload());
  if (auto s = fixed_part(record, PERF_RECORD_LOST_SAMPLES, 1, format, c); s != DecodeStatus::ok) return s;
  out.lost = c.u64();
  return decode_sample_id(record, format, out.sample_id);
}

CallchainContext context_of_marker(std::uint64_t marker) noexcept {
  switch (marker) {
    case PERF_CONTEXT_KERNEL:
      return CallchainContext::kernel;
    case PERF_CONTEXT_USER:
      return CallchainContext::user;
    case PERF_CONTEXT_HV:
      return CallchainContext::hypervisor;
    case PERF_CONTEXT_GUEST:
      return CallchainContext::guest;
    case PERF_CONTEXT_GUEST_KERNEL:
      return CallchainContext::guest_kernel;
    case PERF_CONTEXT_GUEST_USER:
      return CallchainContext::guest_user;
    default:
      return CallchainContext::unknown;
  }
}

std::size_t strip_context_markers(std::span<const std::uint64_t> chain, std::span<std::uint64_t> out,
                                  bool user_only) noexcept {
  std::size_t n = 0;
  CallchainContext context = CallchainContext::unknown;
  for (std::uint64_t word : chain) {
    if (n == out.size()) break;
    if (is_context_marker(word)) {
      context = context_of_marker(word);
      continue;
    }
    if (user_only && context != CallchainContext::user) continue;
    out[n++] = word;
  }
  return n;
}

Sample to_sample(const SampleRecord& record, std::span<std::uint64_t> frame_storage) noexcept {
  Sample s;
  s.pid = static_cast<pid_t>(record.pid);
  s.tid = static_cast<pid_t>(record.tid);
  s.time = record.time;
  s.period = record.period;
  s.cpu = record.cpu;
  s.id = record.has(PERF_SAMPLE_IDENTIFIER) ? record.identifier : record.id;
  s.addr = record.addr;
  s.data_src = record.data_src;
  s.weight = record.weight;
  if (record.has(PERF_SAMPLE_BRANCH_STACK)) {
    // In place: the kernel's entries are three 8-aligned words, the layout of perf_branch_entry.
    s.branches = {reinterpret_cast<const perf_branch_entry*>(record.branches.data()), record.branches.size() / 3};
    s.branch_hw_index = record.branch_hw_idx;
  }
  std::size_t n = 0;
  if (record.has(PERF_SAMPLE_CALLCHAIN)) {
    n = strip_context_markers(record.callchain, frame_storage);
  } else if (record.has(PERF_SAMPLE_IP) && !frame_storage.empty()) {
    frame_storage[0] = record.ip;
    n = 1;
  }
  s.frames = frame_storage.first(n);
  return s;
}

}  // namespace selfperf
