#pragma once
// union perf_mem_data_src (PERF_SAMPLE_DATA_SRC) in readable fields: what kind of access, where in the
// memory hierarchy it was served, snooping, TLB, lock and blocking. Bit positions are the PERF_MEM_*_SHIFT
// values of perf_event.h; the header's bit-field union is not used because its layout depends on the
// compiler's bit-field order.
#include <cstdint>
#include <string>

namespace selfperf {

enum class MemOp : std::uint8_t { not_available, load, store, prefetch, exec, unknown };

enum class MemLevel : std::uint8_t {
  not_available,
  l1,
  l2,
  l3,
  l4,
  lfb,          // line fill buffer / miss address buffer
  ram,          // DRAM (local unless `remote`)
  remote_ram,   // legacy REM_RAM1/2
  remote_cache, // legacy REM_CCE1/2
  io,
  uncached,
  cxl,
  any_cache,
  pmem,
  unknown,
};

enum class MemHit : std::uint8_t { unknown, hit, miss };

struct MemDataSrc {
  std::uint64_t raw = 0;
  // The raw fields (PERF_MEM_<FIELD>_* bit masks, already shifted down).
  std::uint8_t op = 0;       // PERF_MEM_OP_*
  std::uint16_t lvl = 0;     // PERF_MEM_LVL_* (legacy, still carries HIT/MISS)
  std::uint8_t snoop = 0;    // PERF_MEM_SNOOP_*
  std::uint8_t lock = 0;     // PERF_MEM_LOCK_*
  std::uint8_t dtlb = 0;     // PERF_MEM_TLB_*
  std::uint8_t lvl_num = 0;  // PERF_MEM_LVLNUM_* (0: not reported, use lvl)
  bool remote = false;       // PERF_MEM_REMOTE_REMOTE
  std::uint8_t snoopx = 0;   // PERF_MEM_SNOOPX_*
  std::uint8_t blk = 0;      // PERF_MEM_BLK_*
  std::uint8_t hops = 0;     // PERF_MEM_HOPS_* (0: not reported)

  // Interpretations.
  MemOp access() const noexcept;
  // The level that served the access: lvl_num when the PMU reports it, else the lowest legacy level bit.
  MemLevel level() const noexcept;
  MemHit hit() const noexcept;
  bool tlb_hit() const noexcept;
  bool tlb_miss() const noexcept;
  bool locked() const noexcept;
  bool snoop_hitm() const noexcept;  // hit in another core's cache in Modified state (false sharing hint)
};

MemDataSrc decode_mem_data_src(std::uint64_t data_src) noexcept;

// The inverse, for building records in tests and for synthetic data.
struct MemDataSrcFields {
  std::uint64_t op = 0, lvl = 0, snoop = 0, lock = 0, dtlb = 0, lvl_num = 0, remote = 0, snoopx = 0, blk = 0,
                hops = 0;
};
std::uint64_t encode_mem_data_src(const MemDataSrcFields& fields) noexcept;

// Readable parts, worded like `perf mem report`: "Load", "L1 hit", "LFB/MAB hit", "Local RAM hit",
// "Remote L3 (hops: remote node, same socket) hit", "TLB L1 or L2 hit", "No Snoop", "Snoop HitM, Fwd",
// "Locked", "Blocked: Data". An absent field gives "N/A".
std::string mem_op_string(const MemDataSrc& src);
std::string mem_level_string(const MemDataSrc& src);
std::string mem_tlb_string(const MemDataSrc& src);
std::string mem_snoop_string(const MemDataSrc& src);
std::string mem_lock_string(const MemDataSrc& src);
std::string mem_blk_string(const MemDataSrc& src);
// The parts that are not "N/A" joined by ", ", e.g. "Load, L1 hit, TLB L1 or L2 hit, No Snoop"; "N/A"
// when nothing was reported.
std::string to_string(const MemDataSrc& src);

}  // namespace selfperf
