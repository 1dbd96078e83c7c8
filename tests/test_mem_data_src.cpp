#include <doctest.h>

#include <linux/perf_event.h>

#include "selfperf/mem_data_src.hpp"

using namespace selfperf;

namespace {

// The kernel header's own bit-field union: an independent source of truth for the bit positions.
std::uint64_t via_union(unsigned op, unsigned lvl, unsigned snoop, unsigned lock, unsigned dtlb, unsigned lvl_num,
                        unsigned remote, unsigned snoopx, unsigned blk, unsigned hops) {
  perf_mem_data_src u{};
  u.mem_op = op;
  u.mem_lvl = lvl;
  u.mem_snoop = snoop;
  u.mem_lock = lock;
  u.mem_dtlb = dtlb;
  u.mem_lvl_num = lvl_num;
  u.mem_remote = remote;
  u.mem_snoopx = snoopx;
  u.mem_blk = blk;
  u.mem_hops = hops;
  return u.val;
}

}  // namespace

TEST_CASE("fields sit where perf_event.h's union and PERF_MEM_S put them") {
  const std::uint64_t v = via_union(PERF_MEM_OP_STORE, PERF_MEM_LVL_HIT | PERF_MEM_LVL_L3, PERF_MEM_SNOOP_HITM,
                                    PERF_MEM_LOCK_LOCKED, PERF_MEM_TLB_MISS | PERF_MEM_TLB_WK, PERF_MEM_LVLNUM_L3,
                                    1, PERF_MEM_SNOOPX_PEER, PERF_MEM_BLK_ADDR, PERF_MEM_HOPS_2);
  CHECK(v == (PERF_MEM_S(OP, STORE) | PERF_MEM_S(LVL, HIT) | PERF_MEM_S(LVL, L3) | PERF_MEM_S(SNOOP, HITM) |
              PERF_MEM_S(LOCK, LOCKED) | PERF_MEM_S(TLB, MISS) | PERF_MEM_S(TLB, WK) | PERF_MEM_S(LVLNUM, L3) |
              PERF_MEM_S(REMOTE, REMOTE) | PERF_MEM_S(SNOOPX, PEER) | PERF_MEM_S(BLK, ADDR) |
              PERF_MEM_S(HOPS, 2)));
  const MemDataSrc d = decode_mem_data_src(v);
  CHECK(d.raw == v);
  CHECK(d.op == PERF_MEM_OP_STORE);
  CHECK(d.lvl == (PERF_MEM_LVL_HIT | PERF_MEM_LVL_L3));
  CHECK(d.snoop == PERF_MEM_SNOOP_HITM);
  CHECK(d.lock == PERF_MEM_LOCK_LOCKED);
  CHECK(d.dtlb == (PERF_MEM_TLB_MISS | PERF_MEM_TLB_WK));
  CHECK(d.lvl_num == PERF_MEM_LVLNUM_L3);
  CHECK(d.remote);
  CHECK(d.snoopx == PERF_MEM_SNOOPX_PEER);
  CHECK(d.blk == PERF_MEM_BLK_ADDR);
  CHECK(d.hops == PERF_MEM_HOPS_2);
  CHECK(d.access() == MemOp::store);
  CHECK(d.level() == MemLevel::l3);
  CHECK(d.hit() == MemHit::hit);
  CHECK(d.tlb_miss());
  CHECK_FALSE(d.tlb_hit());
  CHECK(d.locked());
  CHECK(d.snoop_hitm());

  MemDataSrcFields f;
  f.op = d.op, f.lvl = d.lvl, f.snoop = d.snoop, f.lock = d.lock, f.dtlb = d.dtlb, f.lvl_num = d.lvl_num;
  f.remote = d.remote, f.snoopx = d.snoopx, f.blk = d.blk, f.hops = d.hops;
  CHECK(encode_mem_data_src(f) == v);
}

TEST_CASE("every field value survives encode/decode") {
  for (unsigned bit = 0; bit < 46; ++bit) {
    CAPTURE(bit);
    const std::uint64_t v = std::uint64_t{1} << bit;
    const MemDataSrc d = decode_mem_data_src(v);
    MemDataSrcFields f;
    f.op = d.op, f.lvl = d.lvl, f.snoop = d.snoop, f.lock = d.lock, f.dtlb = d.dtlb, f.lvl_num = d.lvl_num;
    f.remote = d.remote, f.snoopx = d.snoopx, f.blk = d.blk, f.hops = d.hops;
    CHECK(encode_mem_data_src(f) == v);
  }
  CHECK(decode_mem_data_src(std::uint64_t{1} << 50).raw == std::uint64_t{1} << 50);  // reserved bits ignored
}

TEST_CASE("perf-style strings for typical PEBS load records") {
  // An L1 hit as Intel PEBS reports it: load, L1 hit, TLB L1/L2 hit, no snoop, no lock info.
  const auto l1 = decode_mem_data_src(PERF_MEM_S(OP, LOAD) | PERF_MEM_S(LVL, HIT) | PERF_MEM_S(LVL, L1) |
                                      PERF_MEM_S(LVLNUM, L1) | PERF_MEM_S(SNOOP, NONE) | PERF_MEM_S(TLB, HIT) |
                                      PERF_MEM_S(TLB, L1) | PERF_MEM_S(TLB, L2) | PERF_MEM_S(LOCK, NA));
  CHECK(mem_op_string(l1) == "Load");
  CHECK(mem_level_string(l1) == "L1 hit");
  CHECK(mem_tlb_string(l1) == "TLB L1 or L2 hit");
  CHECK(mem_snoop_string(l1) == "No Snoop");
  CHECK(mem_lock_string(l1) == "N/A");
  CHECK(mem_blk_string(l1) == "N/A");
  CHECK(to_string(l1) == "Load, L1 hit, TLB L1 or L2 hit, No Snoop");

  const auto lfb = decode_mem_data_src(PERF_MEM_S(OP, LOAD) | PERF_MEM_S(LVL, HIT) | PERF_MEM_S(LVL, LFB));
  CHECK(mem_level_string(lfb) == "LFB/MAB hit");
  CHECK(lfb.level() == MemLevel::lfb);

  const auto ram = decode_mem_data_src(PERF_MEM_S(OP, LOAD) | PERF_MEM_S(LVL, HIT) | PERF_MEM_S(LVL, LOC_RAM) |
                                       PERF_MEM_S(LVLNUM, RAM) | PERF_MEM_S(SNOOP, MISS));
  CHECK(mem_level_string(ram) == "Local RAM hit");
  CHECK(mem_snoop_string(ram) == "Snoop Miss");

  const auto remote = decode_mem_data_src(PERF_MEM_S(OP, LOAD) | PERF_MEM_S(LVL, HIT) | PERF_MEM_S(LVLNUM, L3) |
                                          PERF_MEM_S(REMOTE, REMOTE) | PERF_MEM_S(HOPS, 1) |
                                          PERF_MEM_S(SNOOP, HITM) | PERF_MEM_S(SNOOPX, FWD));
  CHECK(mem_level_string(remote) == "Remote L3 (hops: remote node, same socket) hit");
  CHECK(mem_snoop_string(remote) == "Snoop HitM, Fwd");

  const auto remote_ram =
      decode_mem_data_src(PERF_MEM_S(OP, LOAD) | PERF_MEM_S(LVL, MISS) | PERF_MEM_S(LVLNUM, RAM) |
                          PERF_MEM_S(REMOTE, REMOTE));
  CHECK(mem_level_string(remote_ram) == "Remote RAM miss");
  CHECK(remote_ram.hit() == MemHit::miss);

  const auto legacy = decode_mem_data_src(PERF_MEM_S(OP, STORE) | PERF_MEM_S(LVL, MISS) |
                                          PERF_MEM_S(LVL, REM_CCE1) | PERF_MEM_S(TLB, MISS) |
                                          PERF_MEM_S(TLB, OS) | PERF_MEM_S(LOCK, LOCKED) | PERF_MEM_S(BLK, DATA));
  CHECK(mem_level_string(legacy) == "Remote Cache (1 hop) miss");
  CHECK(legacy.level() == MemLevel::remote_cache);
  CHECK(mem_tlb_string(legacy) == "TLB Fault handler miss");
  CHECK(to_string(legacy) == "Store, Remote Cache (1 hop) miss, TLB Fault handler miss, Locked, Blocked: Data");

  const auto fwd_only = decode_mem_data_src(PERF_MEM_S(SNOOPX, FWD));
  CHECK(mem_snoop_string(fwd_only) == "Snoop Fwd");

  const auto nothing = decode_mem_data_src(PERF_MEM_S(OP, NA) | PERF_MEM_S(LVL, NA) | PERF_MEM_S(SNOOP, NA) |
                                           PERF_MEM_S(TLB, NA) | PERF_MEM_S(LOCK, NA));
  CHECK(nothing.access() == MemOp::not_available);
  CHECK(nothing.level() == MemLevel::not_available);
  CHECK(to_string(nothing) == "N/A");
  CHECK(to_string(decode_mem_data_src(0)) == "N/A");
}
