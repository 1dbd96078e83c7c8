#include "selfperf/mem_data_src.hpp"

#include <linux/perf_event.h>

#include <initializer_list>
#include <utility>

namespace selfperf {
namespace {

// Field widths from union perf_mem_data_src.
constexpr unsigned kOpBits = 5, kLvlBits = 14, kSnoopBits = 5, kLockBits = 2, kTlbBits = 7, kLvlNumBits = 4,
                   kRemoteBits = 1, kSnoopxBits = 2, kBlkBits = 3, kHopsBits = 3;

constexpr std::uint64_t field(std::uint64_t v, unsigned shift, unsigned bits) noexcept {
  return (v >> shift) & ((std::uint64_t{1} << bits) - 1);
}
constexpr std::uint64_t place(std::uint64_t v, unsigned shift, unsigned bits) noexcept {
  return (v & ((std::uint64_t{1} << bits) - 1)) << shift;
}

using Names = std::initializer_list<std::pair<std::uint64_t, const char*>>;

// The names of the bits set in `bits`, joined with " or " (perf's wording for "one of these").
std::string join_bits(std::uint64_t bits, Names names) {
  std::string s;
  for (auto [bit, name] : names) {
    if (!(bits & bit)) continue;
    if (!s.empty()) s += " or ";
    s += name;
  }
  return s;
}

std::string hit_suffix(std::uint64_t hit_miss_bits, std::uint64_t hit_bit, std::uint64_t miss_bit) {
  if (hit_miss_bits & hit_bit) return " hit";
  if (hit_miss_bits & miss_bit) return " miss";
  return {};
}

const char* lvl_num_name(std::uint8_t n) noexcept {
  switch (n) {
    case PERF_MEM_LVLNUM_L1: return "L1";
    case PERF_MEM_LVLNUM_L2: return "L2";
    case PERF_MEM_LVLNUM_L3: return "L3";
    case PERF_MEM_LVLNUM_L4: return "L4";
    case PERF_MEM_LVLNUM_CXL: return "CXL";
    case PERF_MEM_LVLNUM_IO: return "I/O";
    case PERF_MEM_LVLNUM_ANY_CACHE: return "Any cache";
    case PERF_MEM_LVLNUM_LFB: return "LFB/MAB";
    case PERF_MEM_LVLNUM_RAM: return "RAM";
    case PERF_MEM_LVLNUM_PMEM: return "PMEM";
    default: return nullptr;
  }
}

const char* hops_name(std::uint8_t hops) noexcept {
  switch (hops) {
    case PERF_MEM_HOPS_0: return "remote core, same node";
    case PERF_MEM_HOPS_1: return "remote node, same socket";
    case PERF_MEM_HOPS_2: return "remote socket, same board";
    case PERF_MEM_HOPS_3: return "remote board";
    default: return nullptr;
  }
}

}  // namespace

MemDataSrc decode_mem_data_src(std::uint64_t v) noexcept {
  MemDataSrc s;
  s.raw = v;
  s.op = static_cast<std::uint8_t>(field(v, PERF_MEM_OP_SHIFT, kOpBits));
  s.lvl = static_cast<std::uint16_t>(field(v, PERF_MEM_LVL_SHIFT, kLvlBits));
  s.snoop = static_cast<std::uint8_t>(field(v, PERF_MEM_SNOOP_SHIFT, kSnoopBits));
  s.lock = static_cast<std::uint8_t>(field(v, PERF_MEM_LOCK_SHIFT, kLockBits));
  s.dtlb = static_cast<std::uint8_t>(field(v, PERF_MEM_TLB_SHIFT, kTlbBits));
  s.lvl_num = static_cast<std::uint8_t>(field(v, PERF_MEM_LVLNUM_SHIFT, kLvlNumBits));
  s.remote = field(v, PERF_MEM_REMOTE_SHIFT, kRemoteBits) != 0;
  s.snoopx = static_cast<std::uint8_t>(field(v, PERF_MEM_SNOOPX_SHIFT, kSnoopxBits));
  s.blk = static_cast<std::uint8_t>(field(v, PERF_MEM_BLK_SHIFT, kBlkBits));
  s.hops = static_cast<std::uint8_t>(field(v, PERF_MEM_HOPS_SHIFT, kHopsBits));
  return s;
}

std::uint64_t encode_mem_data_src(const MemDataSrcFields& f) noexcept {
  return place(f.op, PERF_MEM_OP_SHIFT, kOpBits) | place(f.lvl, PERF_MEM_LVL_SHIFT, kLvlBits) |
         place(f.snoop, PERF_MEM_SNOOP_SHIFT, kSnoopBits) | place(f.lock, PERF_MEM_LOCK_SHIFT, kLockBits) |
         place(f.dtlb, PERF_MEM_TLB_SHIFT, kTlbBits) | place(f.lvl_num, PERF_MEM_LVLNUM_SHIFT, kLvlNumBits) |
         place(f.remote, PERF_MEM_REMOTE_SHIFT, kRemoteBits) |
         place(f.snoopx, PERF_MEM_SNOOPX_SHIFT, kSnoopxBits) | place(f.blk, PERF_MEM_BLK_SHIFT, kBlkBits) |
         place(f.hops, PERF_MEM_HOPS_SHIFT, kHopsBits);
}

MemOp MemDataSrc::access() const noexcept {
  if (op & PERF_MEM_OP_LOAD) return MemOp::load;
  if (op & PERF_MEM_OP_STORE) return MemOp::store;
  if (op & PERF_MEM_OP_PFETCH) return MemOp::prefetch;
  if (op & PERF_MEM_OP_EXEC) return MemOp::exec;
  if (op == 0 || (op & PERF_MEM_OP_NA)) return MemOp::not_available;
  return MemOp::unknown;
}

MemLevel MemDataSrc::level() const noexcept {
  switch (lvl_num) {
    case 0: break;  // not reported: fall back to the legacy bits
    case PERF_MEM_LVLNUM_L1: return MemLevel::l1;
    case PERF_MEM_LVLNUM_L2: return MemLevel::l2;
    case PERF_MEM_LVLNUM_L3: return MemLevel::l3;
    case PERF_MEM_LVLNUM_L4: return MemLevel::l4;
    case PERF_MEM_LVLNUM_CXL: return MemLevel::cxl;
    case PERF_MEM_LVLNUM_IO: return MemLevel::io;
    case PERF_MEM_LVLNUM_ANY_CACHE: return MemLevel::any_cache;
    case PERF_MEM_LVLNUM_LFB: return MemLevel::lfb;
    case PERF_MEM_LVLNUM_RAM: return MemLevel::ram;
    case PERF_MEM_LVLNUM_PMEM: return MemLevel::pmem;
    case PERF_MEM_LVLNUM_NA: return MemLevel::not_available;
    default: return MemLevel::unknown;
  }
  if (lvl & PERF_MEM_LVL_L1) return MemLevel::l1;
  if (lvl & PERF_MEM_LVL_LFB) return MemLevel::lfb;
  if (lvl & PERF_MEM_LVL_L2) return MemLevel::l2;
  if (lvl & PERF_MEM_LVL_L3) return MemLevel::l3;
  if (lvl & PERF_MEM_LVL_LOC_RAM) return MemLevel::ram;
  if (lvl & (PERF_MEM_LVL_REM_RAM1 | PERF_MEM_LVL_REM_RAM2)) return MemLevel::remote_ram;
  if (lvl & (PERF_MEM_LVL_REM_CCE1 | PERF_MEM_LVL_REM_CCE2)) return MemLevel::remote_cache;
  if (lvl & PERF_MEM_LVL_IO) return MemLevel::io;
  if (lvl & PERF_MEM_LVL_UNC) return MemLevel::uncached;
  return MemLevel::not_available;
}

MemHit MemDataSrc::hit() const noexcept {
  if (lvl & PERF_MEM_LVL_HIT) return MemHit::hit;
  if (lvl & PERF_MEM_LVL_MISS) return MemHit::miss;
  return MemHit::unknown;
}

bool MemDataSrc::tlb_hit() const noexcept { return (dtlb & PERF_MEM_TLB_HIT) != 0; }
bool MemDataSrc::tlb_miss() const noexcept { return (dtlb & PERF_MEM_TLB_MISS) != 0; }
bool MemDataSrc::locked() const noexcept { return (lock & PERF_MEM_LOCK_LOCKED) != 0; }
bool MemDataSrc::snoop_hitm() const noexcept { return (snoop & PERF_MEM_SNOOP_HITM) != 0; }

std::string mem_op_string(const MemDataSrc& s) {
  std::string names = join_bits(s.op, {{PERF_MEM_OP_LOAD, "Load"},
                                       {PERF_MEM_OP_STORE, "Store"},
                                       {PERF_MEM_OP_PFETCH, "Prefetch"},
                                       {PERF_MEM_OP_EXEC, "Exec"}});
  return names.empty() ? "N/A" : names;
}

std::string mem_level_string(const MemDataSrc& s) {
  const std::string suffix = hit_suffix(s.lvl, PERF_MEM_LVL_HIT, PERF_MEM_LVL_MISS);
  if (const char* name = lvl_num_name(s.lvl_num)) {
    std::string text;
    if (s.lvl_num == PERF_MEM_LVLNUM_RAM) text = s.remote ? "Remote RAM" : "Local RAM";
    else text = std::string(s.remote ? "Remote " : "") + name;
    if (const char* hops = hops_name(s.hops)) text += std::string(" (hops: ") + hops + ")";
    return text + suffix;
  }
  std::string names = join_bits(s.lvl, {{PERF_MEM_LVL_L1, "L1"},
                                        {PERF_MEM_LVL_LFB, "LFB/MAB"},
                                        {PERF_MEM_LVL_L2, "L2"},
                                        {PERF_MEM_LVL_L3, "L3"},
                                        {PERF_MEM_LVL_LOC_RAM, "Local RAM"},
                                        {PERF_MEM_LVL_REM_RAM1, "Remote RAM (1 hop)"},
                                        {PERF_MEM_LVL_REM_RAM2, "Remote RAM (2 hops)"},
                                        {PERF_MEM_LVL_REM_CCE1, "Remote Cache (1 hop)"},
                                        {PERF_MEM_LVL_REM_CCE2, "Remote Cache (2 hops)"},
                                        {PERF_MEM_LVL_IO, "I/O"},
                                        {PERF_MEM_LVL_UNC, "Uncached"}});
  if (names.empty()) return "N/A";
  return names + suffix;
}

std::string mem_tlb_string(const MemDataSrc& s) {
  std::string names = join_bits(s.dtlb, {{PERF_MEM_TLB_L1, "L1"},
                                         {PERF_MEM_TLB_L2, "L2"},
                                         {PERF_MEM_TLB_WK, "Walker"},
                                         {PERF_MEM_TLB_OS, "Fault handler"}});
  const std::string suffix = hit_suffix(s.dtlb, PERF_MEM_TLB_HIT, PERF_MEM_TLB_MISS);
  if (names.empty() && suffix.empty()) return "N/A";
  return "TLB" + (names.empty() ? std::string() : " " + names) + suffix;
}

std::string mem_snoop_string(const MemDataSrc& s) {
  std::string names = join_bits(s.snoop, {{PERF_MEM_SNOOP_NONE, "No Snoop"},
                                          {PERF_MEM_SNOOP_HIT, "Snoop Hit"},
                                          {PERF_MEM_SNOOP_MISS, "Snoop Miss"},
                                          {PERF_MEM_SNOOP_HITM, "Snoop HitM"}});
  std::string ext = join_bits(s.snoopx, {{PERF_MEM_SNOOPX_FWD, "Fwd"}, {PERF_MEM_SNOOPX_PEER, "Peer"}});
  if (names.empty()) return ext.empty() ? "N/A" : "Snoop " + ext;
  return ext.empty() ? names : names + ", " + ext;
}

std::string mem_lock_string(const MemDataSrc& s) {
  // The field has no "not locked" value: only LOCKED or NA (or 0, not reported).
  return (s.lock & PERF_MEM_LOCK_LOCKED) ? "Locked" : "N/A";
}

std::string mem_blk_string(const MemDataSrc& s) {
  std::string names = join_bits(s.blk, {{PERF_MEM_BLK_DATA, "Data"}, {PERF_MEM_BLK_ADDR, "Addr"}});
  if (names.empty()) return "N/A";
  return "Blocked: " + names;
}

std::string to_string(const MemDataSrc& s) {
  std::string out;
  for (const std::string& part : {mem_op_string(s), mem_level_string(s), mem_tlb_string(s),
                                  mem_snoop_string(s), mem_lock_string(s), mem_blk_string(s)}) {
    if (part == "N/A") continue;
    if (!out.empty()) out += ", ";
    out += part;
  }
  return out.empty() ? "N/A" : out;
}

}  // namespace selfperf
