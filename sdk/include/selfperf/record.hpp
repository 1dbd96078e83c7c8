#pragma once
// Decoding of ring-buffer records: PERF_RECORD_SAMPLE for the sample_type an event was opened with,
// PERF_RECORD_LOST, THROTTLE/UNTHROTTLE, LOST_SAMPLES, and the sample_id trailer (sample_id_all).
//
// Every field is bounds-checked against header.size; a record that does not fit its format is rejected
// with a DecodeStatus, never read past. Decoders do not allocate or throw (usable in a signal handler);
// spans point into the RecordView's bytes and share their lifetime.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <linux/perf_event.h>

#include "selfperf/ring_buffer.hpp"
#include "selfperf/sample.hpp"

namespace selfperf {

// The attr fields that decide a record's layout.
struct SampleFormat {
  std::uint64_t sample_type = 0;
  std::uint64_t read_format = 0;
  std::uint64_t branch_sample_type = 0;  // PERF_SAMPLE_BRANCH_HW_INDEX adds a word to BRANCH_STACK
  std::uint64_t sample_regs_user = 0;    // mask: REGS_USER holds popcount(mask) registers
  std::uint64_t sample_regs_intr = 0;
  bool sample_id_all = false;

  static SampleFormat from_attr(const perf_event_attr& attr) noexcept;
};

enum class DecodeStatus {
  ok,
  wrong_type,          // the record is not of the type this decoder reads
  truncated,           // a field (or the fixed part) runs past header.size
  unsupported_format,  // a sample_type bit this decoder does not know (see describe())
  trailing_bytes,      // bytes left after the last field: the SampleFormat does not match the event
};
std::string_view describe(DecodeStatus status) noexcept;

// The identity fields that sample_id_all appends to non-sample records (and that samples carry inline).
struct SampleId {
  std::uint64_t present = 0;  // which of TID|TIME|ID|STREAM_ID|CPU|IDENTIFIER were decoded
  std::uint32_t pid = 0, tid = 0;
  std::uint64_t time = 0;
  std::uint64_t id = 0;  // PERF_SAMPLE_ID or PERF_SAMPLE_IDENTIFIER
  std::uint64_t stream_id = 0;
  std::uint32_t cpu = 0;
  bool has(std::uint64_t sample_bit) const noexcept { return (present & sample_bit) != 0; }
};

struct SampleRecord {
  std::uint64_t present = 0;  // the sample_type bits decoded (== format.sample_type on success)
  std::uint16_t misc = 0;     // header.misc: PERF_RECORD_MISC_USER/KERNEL, EXACT_IP …

  std::uint64_t identifier = 0;  // PERF_SAMPLE_IDENTIFIER
  std::uint64_t ip = 0;
  std::uint32_t pid = 0, tid = 0;
  std::uint64_t time = 0;
  std::uint64_t addr = 0;
  std::uint64_t id = 0;
  std::uint64_t stream_id = 0;
  std::uint32_t cpu = 0;
  std::uint64_t period = 0;
  // PERF_SAMPLE_READ: the read_format words as the kernel wrote them (see perf_event.h's read_format).
  std::span<const std::uint64_t> read_values;
  // PERF_SAMPLE_CALLCHAIN: raw, leaf first, with PERF_CONTEXT_* markers (see callchain helpers below).
  std::span<const std::uint64_t> callchain;
  std::span<const std::byte> raw;  // PERF_SAMPLE_RAW payload (not ABI-stable; not interpreted)
  // PERF_SAMPLE_BRANCH_STACK: nr entries of {from, to, flags}, 3 words each.
  std::uint64_t branch_nr = 0;
  std::uint64_t branch_hw_idx = 0;  // when branch_sample_type has PERF_SAMPLE_BRANCH_HW_INDEX
  std::span<const std::uint64_t> branches;
  std::uint64_t regs_user_abi = 0;  // PERF_SAMPLE_REGS_ABI_NONE (0) ⇒ no registers
  std::span<const std::uint64_t> regs_user;
  std::span<const std::byte> stack_user;  // the copied stack, stack_user_dyn_size bytes of it valid
  std::uint64_t stack_user_dyn_size = 0;
  // PERF_SAMPLE_WEIGHT: the full 64-bit weight. PERF_SAMPLE_WEIGHT_STRUCT: weight = var1 (latency),
  // weight_var2/var3 the other parts (e.g. instruction latency on Intel).
  std::uint64_t weight = 0;
  std::uint16_t weight_var2 = 0;
  std::uint16_t weight_var3 = 0;
  std::uint64_t data_src = 0;  // union perf_mem_data_src; see mem_data_src.hpp
  std::uint64_t transaction = 0;
  std::uint64_t regs_intr_abi = 0;
  std::span<const std::uint64_t> regs_intr;
  std::uint64_t phys_addr = 0;
  std::uint64_t cgroup = 0;
  std::uint64_t data_page_size = 0;
  std::uint64_t code_page_size = 0;
  std::span<const std::byte> aux;  // PERF_SAMPLE_AUX

  bool has(std::uint64_t sample_bit) const noexcept { return (present & sample_bit) != 0; }
};

struct LostRecord {  // PERF_RECORD_LOST
  std::uint64_t id = 0;
  std::uint64_t lost = 0;
  SampleId sample_id;
};

struct ThrottleRecord {  // PERF_RECORD_THROTTLE / PERF_RECORD_UNTHROTTLE
  bool unthrottle = false;
  std::uint64_t time = 0;
  std::uint64_t id = 0;
  std::uint64_t stream_id = 0;
  SampleId sample_id;
};

struct LostSamplesRecord {  // PERF_RECORD_LOST_SAMPLES
  std::uint64_t lost = 0;
  SampleId sample_id;
};

DecodeStatus decode_sample(const RecordView& record, const SampleFormat& format, SampleRecord& out) noexcept;
DecodeStatus decode_lost(const RecordView& record, const SampleFormat& format, LostRecord& out) noexcept;
DecodeStatus decode_throttle(const RecordView& record, const SampleFormat& format,
                             ThrottleRecord& out) noexcept;
DecodeStatus decode_lost_samples(const RecordView& record, const SampleFormat& format,
                                 LostSamplesRecord& out) noexcept;
// The sample_id trailer at the end of any non-sample record (needs format.sample_id_all; without it the
// result is ok with nothing present).
DecodeStatus decode_sample_id(const RecordView& record, const SampleFormat& format, SampleId& out) noexcept;

// ---- callchains ----
// The kernel interleaves context markers (PERF_CONTEXT_USER, _KERNEL, _HV, _GUEST…, all ≥ PERF_CONTEXT_MAX
// = (u64)-4095) with addresses; each marker says which context the following addresses belong to.
enum class CallchainContext : std::uint8_t { unknown, kernel, user, hypervisor, guest, guest_kernel, guest_user };

constexpr bool is_context_marker(std::uint64_t word) noexcept { return word >= PERF_CONTEXT_MAX; }
CallchainContext context_of_marker(std::uint64_t marker) noexcept;

// Calls fn(ip, context) for each address of the chain, markers removed. Returns the number of addresses.
template <class F>
std::size_t for_each_frame(std::span<const std::uint64_t> chain, F&& fn) {
  CallchainContext context = CallchainContext::unknown;
  std::size_t n = 0;
  for (std::uint64_t word : chain) {
    if (is_context_marker(word)) {
      context = context_of_marker(word);
      continue;
    }
    fn(word, context);
    ++n;
  }
  return n;
}

// Copies the addresses of `chain` into `out` without markers (only the user part when user_only), stopping
// when out is full. Returns how many were written.
std::size_t strip_context_markers(std::span<const std::uint64_t> chain, std::span<std::uint64_t> out,
                                  bool user_only = false) noexcept;

// A Sample for drain() callbacks / perf.data writers: frames come from the callchain (markers stripped,
// into frame_storage) or, without a callchain, the sample IP alone (also stored in frame_storage).
Sample to_sample(const SampleRecord& record, std::span<std::uint64_t> frame_storage) noexcept;

}  // namespace selfperf
