// The DWARF walk: .eh_frame rules evaluated on tables built here (x86-64's or aarch64's, as compiled), the
// shared rule cache, and the whole walk compared frame for frame with libunwind's cursor loop at timer-signal
// interrupts of a mixed workload (on aarch64 too: the emulated machine runs this test, tests/emulated).
#include <doctest.h>

#include <alloca.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "unwinding/dwarf_cfi.hpp"
#include "sampler_workload.hpp"
#include "selfperf/unwind.hpp"
#include "test_support.hpp"

using namespace selfperf;
using detail::CfiRule;

namespace {

// ---- .eh_frame_hdr + .eh_frame built byte by byte ----

struct Fde {
  std::uint64_t begin_offset;  // of the function, from the section start
  std::uint32_t size;
  std::vector<std::uint8_t> program;
};

// The CIE's fields that differ between the architectures (data alignment is -8 on both).
struct CieFormat {
  std::uint8_t code_align;
  std::uint8_t ra_column;
  bool b_key = false;  // aarch64's 'B' augmentation: return addresses signed with the B key
};
#if defined(__aarch64__)
constexpr CieFormat kCieFormat{4, 30};  // instructions are 4 bytes; x30 holds the return address
#else
constexpr CieFormat kCieFormat{1, 16};
#endif

class EhFrameBuilder {
 public:
  // `cie_program`: the CIE's initial instructions. The functions lie at section start + begin_offset; nothing
  // there is ever read, only compared against.
  std::vector<std::uint8_t> build(const std::vector<std::uint8_t>& cie_program, const std::vector<Fde>& fdes,
                                  CieFormat format = kCieFormat) {
    bytes.clear();
    const std::size_t table_size = fdes.size() * 8;
    // .eh_frame_hdr: version, eh_frame_ptr (pcrel sdata4), fde_count (udata4), table (datarel sdata4).
    put8(1), put8(0x1b), put8(0x03), put8(0x3b);
    const std::size_t frame_ptr_field = bytes.size();
    put32(0);
    put32(static_cast<std::uint32_t>(fdes.size()));
    const std::size_t table = bytes.size();
    bytes.resize(bytes.size() + table_size);
    const std::size_t eh_frame = bytes.size();
    patch32(frame_ptr_field, static_cast<std::uint32_t>(eh_frame - frame_ptr_field));
    // CIE: version 1, "zR" (or "zRB"), code align, data align -8, RA column, FDE pointers pcrel sdata4.
    const std::size_t cie = bytes.size();
    put32(0);
    put32(0);
    put8(1), put8('z'), put8('R');
    if (format.b_key) put8('B');
    put8(0), put8(format.code_align), put8(0x78), put8(format.ra_column), put8(1), put8(0x1b);
    append(cie_program);
    patch32(cie, static_cast<std::uint32_t>(bytes.size() - cie - 4));
    for (std::size_t i = 0; i < fdes.size(); ++i) {
      const std::size_t fde = bytes.size();
      put32(0);
      put32(static_cast<std::uint32_t>(bytes.size() - cie));  // CIE pointer: back from this field
      const std::size_t begin_field = bytes.size();
      put32(static_cast<std::uint32_t>(fdes[i].begin_offset - begin_field));  // pcrel, from the field
      put32(fdes[i].size);
      put8(0);  // augmentation data length
      append(fdes[i].program);
      patch32(fde, static_cast<std::uint32_t>(bytes.size() - fde - 4));
      patch32(table + i * 8, static_cast<std::uint32_t>(fdes[i].begin_offset));  // datarel: from the hdr
      patch32(table + i * 8 + 4, static_cast<std::uint32_t>(fde));
    }
    return bytes;
  }

 private:
  void put8(std::uint8_t v) { bytes.push_back(v); }
  void put32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void patch32(std::size_t at, std::uint32_t v) { std::memcpy(&bytes[at], &v, 4); }
  void append(const std::vector<std::uint8_t>& v) { bytes.insert(bytes.end(), v.begin(), v.end()); }
  std::vector<std::uint8_t> bytes;
};

struct Tables {
  std::vector<std::uint8_t> bytes;
  EhFrameSection section() const {
    auto base = reinterpret_cast<std::uint64_t>(bytes.data());
    return {base, base, base + bytes.size()};
  }
  std::uint64_t at(std::uint64_t offset) const { return reinterpret_cast<std::uint64_t>(bytes.data()) + offset; }
};

#if !defined(__aarch64__)
// DW_CFA opcodes as gcc emits them for a function with a frame pointer.
const std::vector<std::uint8_t> kCieProgram = {0x0c, 0x07, 0x08,  // def_cfa rsp+8
                                               0x90, 0x01};       // offset ra at cfa-8
const std::vector<std::uint8_t> kFramePointerFunction = {
    0x41,              // advance 1 (past push %rbp)
    0x0e, 0x10,        // def_cfa_offset 16
    0x86, 0x02,        // offset rbp at cfa-16
    0x43,              // advance 3 (past mov %rsp,%rbp)
    0x0d, 0x06,        // def_cfa_register rbp
    0x54,              // advance 20 (past leave)
    0x0a,              // remember_state
    0x0c, 0x07, 0x08,  // def_cfa rsp+8
    0x41,              // advance 1 (past ret)
    0x0b,              // restore_state
};
// A function without a frame pointer: only the CFA offset moves.
const std::vector<std::uint8_t> kFramelessFunction = {
    0x44,        // advance 4 (past sub $0x28,%rsp)
    0x0e, 0x30,  // def_cfa_offset 48
    0x02, 0x40,  // advance_loc1 64
    0x0e, 0x08,  // def_cfa_offset 8
};
// What linkers emit for a lazy PLT: CFA = rsp + 8 + (((rip & 15) >= 11) << 3) (8 more once the stub has pushed).
const std::vector<std::uint8_t> kPltLikeFunction = {0x0f, 11,   0x77, 0x08, 0x80, 0x00, 0x3f,
                                                    0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
// A CFA read from memory (DW_OP_deref): beyond offsets, left to libunwind.
const std::vector<std::uint8_t> kDerefExpression = {0x0f, 0x03, 0x77, 0x08, 0x06};
const std::vector<std::uint8_t> kOutermostFunction = {0x07, 0x10};            // undefined ra

Tables sample_tables() {
  EhFrameBuilder b;
  return Tables{b.build(kCieProgram, {{0x10000, 64, kFramePointerFunction},
                                      {0x10100, 128, kFramelessFunction},
                                      {0x10200, 16, kPltLikeFunction},
                                      {0x10300, 16, kOutermostFunction},
                                      {0x10400, 16, kDerefExpression}})};
}

void check_walk(const CfiRule& r, bool from_rbp, int cfa, bool rbp_saved, int rbp_offset = 0) {
  REQUIRE(r.walks());
  CHECK(((r.flags & CfiRule::kCfaFromRbp) != 0) == from_rbp);
  CHECK(r.cfa_offset == cfa);
  CHECK(((r.flags & CfiRule::kRbpSaved) != 0) == rbp_saved);
  if (rbp_saved) CHECK(r.rbp_offset == rbp_offset);
}

// Where the truncation test below asks for a rule: the first function's body (CFA rsp + 16), a frameless body
// and the outermost frame.
constexpr std::uint64_t kBodyOffset = 0x10004;
constexpr std::int32_t kBodyCfa = 16;
#else
// aarch64's CIE as gcc emits it: CFA = sp (x30 holds the return address: no rule for it, same value).
const std::vector<std::uint8_t> kCieProgram = {0x0c, 0x1f, 0x00};  // def_cfa sp+0
// A function with a frame record, as gcc emits it (code alignment 4: advance 1 is one instruction).
const std::vector<std::uint8_t> kFrameRecordFunction = {
    0x41,              // advance 1 (past stp x29, x30, [sp, #-32]!)
    0x0e, 0x20,        // def_cfa_offset 32
    0x9d, 0x04,        // offset x29 at cfa-32
    0x9e, 0x03,        // offset x30 at cfa-24
    0x41,              // advance 1 (past mov x29, sp)
    0x0d, 0x1d,        // def_cfa_register x29
    0x44,              // advance 4 (past ldp x29, x30, [sp], #32, at 20)
    0x0a,              // remember_state
    0xde, 0xdd,        // restore x30, restore x29
    0x0c, 0x1f, 0x00,  // def_cfa sp+0
    0x41,              // advance 1 (past ret)
    0x0b,              // restore_state
};
// A leaf with a stack frame: x30 is never saved.
const std::vector<std::uint8_t> kLeafWithStack = {
    0x41,        // advance 1 (past sub sp, sp, #48)
    0x0e, 0x30,  // def_cfa_offset 48
    0x43,        // advance 3 (past add sp, sp, #48, at 12)
    0x0e, 0x00,  // def_cfa_offset 0
};
// -mbranch-protection: paciasp signs x30 before it is saved.
const std::vector<std::uint8_t> kSignedReturnFunction = {
    0x41,        // advance 1 (past paciasp)
    0x2d,        // DW_CFA_AARCH64_negate_ra_state
    0x41,        // advance 1 (past stp x29, x30, [sp, #-16]!)
    0x0e, 0x10,  // def_cfa_offset 16
    0x9d, 0x02,  // offset x29 at cfa-16
    0x9e, 0x01,  // offset x30 at cfa-8
};
const std::vector<std::uint8_t> kOutermostFunction = {0x07, 0x1e};  // undefined x30
// The return address moved to another register (x9): beyond the walk's rules.
const std::vector<std::uint8_t> kLrInRegister = {0x41, 0x09, 0x1e, 0x09};
// x30 saved without x29, further from the CFA than the rule's byte of words can say (-1032).
const std::vector<std::uint8_t> kFarSlot = {0x41, 0x0e, 0x90, 0x08, 0x9e, 0x81, 0x01};
// A large frame as gcc lays it out: `sub sp, sp, #0x480; stp x29, x30, [sp]`, the record 1152 bytes below the
// CFA, at its bottom.
const std::vector<std::uint8_t> kLargeFrame = {
    0x41, 0x0e, 0x80, 0x09,  // advance 1, def_cfa_offset 1152
    0x42, 0x9d, 0x90, 0x01,  // advance 2 (past stp x29, x30, [sp] at 8), offset x29 at cfa-1152
    0x9e, 0x8f, 0x01,        // offset x30 at cfa-1144
};
// Only x30 saved (a function without a frame pointer that calls): `str x30, [sp, #-16]!`.
const std::vector<std::uint8_t> kLrOnly = {0x41, 0x0e, 0x10, 0x9e, 0x02};

Tables sample_tables() {
  EhFrameBuilder b;
  return Tables{b.build(kCieProgram, {{0x10000, 64, kFrameRecordFunction},
                                      {0x10100, 128, kLeafWithStack},
                                      {0x10200, 16, kSignedReturnFunction},
                                      {0x10300, 16, kOutermostFunction},
                                      {0x10400, 16, kLrInRegister},
                                      {0x10500, 16, kFarSlot},
                                      {0x10600, 16, kLargeFrame},
                                      {0x10700, 16, kLrOnly}})};
}

// A rule that walks: CFA from x29 or sp, x29 saved or not, the return address in x30 (ra_slot 0) or in a slot.
void check_walk(const CfiRule& r, bool from_fp, int cfa, bool fp_saved, int fp_offset, int ra_slot) {
  REQUIRE(r.walks());
  CHECK(((r.flags & CfiRule::kCfaFromRbp) != 0) == from_fp);
  CHECK(r.cfa_offset == cfa);
  CHECK(((r.flags & CfiRule::kRbpSaved) != 0) == fp_saved);
  if (fp_saved) CHECK(r.rbp_offset == fp_offset);
  CHECK(((r.flags & CfiRule::kRaInLr) != 0) == (ra_slot == 0));
  CHECK(r.ra_slot == ra_slot);
}

constexpr std::uint64_t kBodyOffset = 0x10008;
constexpr std::int32_t kBodyCfa = 32;
#endif

}  // namespace

#if !defined(__aarch64__)
TEST_CASE("the rule at each instruction of a frame-pointer function follows its call-frame program") {
  const Tables t = sample_tables();
  const EhFrameSection s = t.section();
  check_walk(detail::find_cfi_rule(s, t.at(0x10000)), false, 8, false);      // entry: rsp+8
  check_walk(detail::find_cfi_rule(s, t.at(0x10001)), false, 16, true, -16);  // after push %rbp
  check_walk(detail::find_cfi_rule(s, t.at(0x10003)), false, 16, true, -16);  // still before mov
  check_walk(detail::find_cfi_rule(s, t.at(0x10004)), true, 16, true, -16);   // body: rbp+16
  check_walk(detail::find_cfi_rule(s, t.at(0x10017)), true, 16, true, -16);   // last body byte
  check_walk(detail::find_cfi_rule(s, t.at(0x10018)), false, 8, true, -16);   // after leave, at ret
  check_walk(detail::find_cfi_rule(s, t.at(0x10019)), true, 16, true, -16);   // restored for the code after
  check_walk(detail::find_cfi_rule(s, t.at(0x1003f)), true, 16, true, -16);   // last byte of the function
}

TEST_CASE("frameless functions, expressions, the end of the stack and gaps between functions") {
  const Tables t = sample_tables();
  const EhFrameSection s = t.section();
  check_walk(detail::find_cfi_rule(s, t.at(0x10100)), false, 8, false);
  check_walk(detail::find_cfi_rule(s, t.at(0x10104)), false, 48, false);
  check_walk(detail::find_cfi_rule(s, t.at(0x10143)), false, 48, false);
  check_walk(detail::find_cfi_rule(s, t.at(0x10144)), false, 8, false);

  // The PLT expression, evaluated at each instruction: rsp + 8, or + 16 where rip & 15 >= 11.
  for (std::uint64_t off = 0x10200; off < 0x10210; ++off) {
    INFO("offset 0x" << std::hex << off);
    check_walk(detail::find_cfi_rule(s, t.at(off)), false, (t.at(off) & 15) >= 11 ? 16 : 8, false);
  }
  const CfiRule deref = detail::find_cfi_rule(s, t.at(0x10404));
  CHECK((deref.flags & CfiRule::kKnown) != 0);
  CHECK_FALSE(deref.walks());
  CHECK_FALSE(deref.outermost());

  const CfiRule end = detail::find_cfi_rule(s, t.at(0x10300));
  CHECK(end.outermost());
  CHECK_FALSE(end.walks());

  // Before the first function, between two, after the last: no FDE covers them.
  for (std::uint64_t off : {0x0fff0ull, 0x10040ull, 0x100ffull, 0x10310ull, 0x20000ull}) {
    INFO("offset 0x" << std::hex << off);
    const CfiRule r = detail::find_cfi_rule(s, t.at(off));
    CHECK((r.flags & CfiRule::kKnown) != 0);
    CHECK_FALSE(r.walks());
    CHECK_FALSE(r.outermost());
  }
}
#else
TEST_CASE("aarch64: the rule at each instruction of a function with a frame record follows its program") {
  const Tables t = sample_tables();
  const EhFrameSection s = t.section();
  check_walk(detail::find_cfi_rule(s, t.at(0x10000)), false, 0, false, 0, 0);     // entry: sp, x30
  // x30 is one word above x29's slot: ra_slot 1.
  check_walk(detail::find_cfi_rule(s, t.at(0x10004)), false, 32, true, -32, 1);  // after stp
  check_walk(detail::find_cfi_rule(s, t.at(0x10008)), true, 32, true, -32, 1);   // body: x29+32
  check_walk(detail::find_cfi_rule(s, t.at(0x10013)), true, 32, true, -32, 1);   // last body byte
  check_walk(detail::find_cfi_rule(s, t.at(0x10014)), true, 32, true, -32, 1);   // at ldp
  check_walk(detail::find_cfi_rule(s, t.at(0x10018)), false, 0, false, 0, 0);    // after ldp, at ret
  check_walk(detail::find_cfi_rule(s, t.at(0x1001c)), true, 32, true, -32, 1);   // restored after ret
  check_walk(detail::find_cfi_rule(s, t.at(0x1003c)), true, 32, true, -32, 1);   // last instruction
}

TEST_CASE("aarch64: leaves, signed return addresses, the end of the stack and what the rules cannot say") {
  const Tables t = sample_tables();
  const EhFrameSection s = t.section();
  check_walk(detail::find_cfi_rule(s, t.at(0x10100)), false, 0, false, 0, 0);
  check_walk(detail::find_cfi_rule(s, t.at(0x10104)), false, 48, false, 0, 0);  // x30 never saved
  check_walk(detail::find_cfi_rule(s, t.at(0x1010c)), false, 48, false, 0, 0);
  check_walk(detail::find_cfi_rule(s, t.at(0x10110)), false, 0, false, 0, 0);
  // negate_ra_state is followed, not refused: the walk strips the signature from what it reads.
  check_walk(detail::find_cfi_rule(s, t.at(0x10200)), false, 0, false, 0, 0);
  check_walk(detail::find_cfi_rule(s, t.at(0x10204)), false, 0, false, 0, 0);  // signed, still in x30
  check_walk(detail::find_cfi_rule(s, t.at(0x10208)), false, 16, true, -16, 1);

  check_walk(detail::find_cfi_rule(s, t.at(0x10604)), false, 1152, false, 0, 0);  // sub sp done, x30 not saved
  check_walk(detail::find_cfi_rule(s, t.at(0x1060c)), false, 1152, true, -1152, 1);
  check_walk(detail::find_cfi_rule(s, t.at(0x10704)), false, 16, false, 0, -2);  // from the CFA

  const CfiRule end = detail::find_cfi_rule(s, t.at(0x10300));
  CHECK(end.outermost());
  CHECK_FALSE(end.walks());
  for (std::uint64_t off : {0x10404ull, 0x10504ull, 0x0fff0ull, 0x10040ull, 0x10310ull}) {
    INFO("offset 0x" << std::hex << off);
    const CfiRule r = detail::find_cfi_rule(s, t.at(off));
    CHECK((r.flags & CfiRule::kKnown) != 0);
    CHECK_FALSE(r.walks());
    CHECK_FALSE(r.outermost());
  }
  // An x86-64 CIE (return-address column 16) describes nothing here.
  EhFrameBuilder b;
  const Tables x86{b.build({0x0c, 0x07, 0x08, 0x90, 0x01}, {{0x10000, 64, {}}}, CieFormat{1, 16})};
  CHECK_FALSE(detail::find_cfi_rule(x86.section(), x86.at(0x10000)).walks());
  // Signed with the B key ('B' augmentation): the same rules.
  const Tables b_key{b.build(kCieProgram, {{0x10000, 64, kSignedReturnFunction}}, CieFormat{4, 30, true})};
  check_walk(detail::find_cfi_rule(b_key.section(), b_key.at(0x10008)), false, 16, true, -16, 1);
}
#endif

TEST_CASE("truncated or corrupt tables end in 'unsupported', never in a read outside them") {
  const Tables t = sample_tables();
  // Every shorter section: the evaluator must stay inside [begin, end) (ASan watches the heap copy below).
  for (std::size_t size = 0; size < t.bytes.size(); ++size) {
    std::vector<std::uint8_t> cut(t.bytes.begin(), t.bytes.begin() + static_cast<std::ptrdiff_t>(size));
    cut.shrink_to_fit();
    Tables c{std::move(cut)};
    const CfiRule r = detail::find_cfi_rule(c.section(), c.at(kBodyOffset));
    INFO("size " << size);
    // The first function's FDE may be whole in a cut section; then the rule is the right one.
    if (r.walks()) CHECK(r.cfa_offset == kBodyCfa);
    if (size < 4 + 8 + 4 * 8) CHECK_FALSE(r.walks());  // the header and its table are not all there
  }
  // Every single byte flipped: some rules still come out, none reads outside the tables.
  std::size_t walked = 0;
  for (std::size_t i = 0; i < t.bytes.size(); ++i) {
    for (std::uint8_t flip : {0x01, 0x80, 0xff}) {
      Tables c{t.bytes};
      c.bytes[i] ^= flip;
      for (std::uint64_t off : {kBodyOffset, std::uint64_t{0x10104}, std::uint64_t{0x10300}})
        walked += detail::find_cfi_rule(c.section(), c.at(off)).walks() ? 1 : 0;
    }
  }
  CHECK(walked > 0);
}

TEST_CASE("the rule cache returns what was inserted, from many threads at once") {
  detail::cfi_cache::clear();
  const std::uint64_t base = 0x7f0000001000ull;
  auto rule_for = [](std::uint64_t pc) {
    CfiRule r;
    r.flags = CfiRule::kKnown | CfiRule::kWalk;
    r.cfa_offset = static_cast<std::int32_t>(8 + (pc & 0xfff));
    return r;
  };
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Overlapping ranges: threads race to claim the same slots with the same rules.
      for (std::uint64_t i = 0; i < 4000; ++i) {
        const std::uint64_t pc = base + (i + static_cast<std::uint64_t>(t) * 1000) * 16;
        detail::cfi_cache::insert(pc, rule_for(pc));
        const CfiRule got = detail::cfi_cache::lookup(pc);
        if ((got.flags & CfiRule::kKnown) && got.cfa_offset != rule_for(pc).cfa_offset) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  std::size_t found = 0;
  for (std::uint64_t i = 0; i < 7000; ++i) {
    const std::uint64_t pc = base + i * 16;
    const CfiRule got = detail::cfi_cache::lookup(pc);
    if (!(got.flags & CfiRule::kKnown)) continue;
    ++found;
    REQUIRE(got.cfa_offset == rule_for(pc).cfa_offset);
  }
  CHECK(found > 6000);  // 7000 in 16384 slots: only a crowded neighbourhood drops one
  detail::cfi_cache::clear();
  CHECK((detail::cfi_cache::lookup(base).flags & CfiRule::kKnown) == 0);
}

TEST_CASE("a full rule cache replaces entries instead of refusing new ones, and never returns a wrong rule") {
  detail::cfi_cache::clear();
  auto rule_for = [](std::uint64_t key) {
    CfiRule r;
    r.flags = CfiRule::kKnown | CfiRule::kWalk;
    r.cfa_offset = static_cast<std::int32_t>(8 + (key % 100003));
    return r;
  };
  // Three times as many keys as slots, from four threads at once, each checking what it reads back.
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < 3 * detail::cfi_cache::kSlots / 4; ++i) {
        const std::uint64_t key = 0x560000000000ull + (t * 3 * detail::cfi_cache::kSlots / 4 + i) * 5;
        detail::cfi_cache::insert(key, rule_for(key));
        for (std::uint64_t back : {key, key - 5 * 4, key - 5 * 1000}) {
          const CfiRule got = detail::cfi_cache::lookup(back);
          if ((got.flags & CfiRule::kKnown) && got.cfa_offset != rule_for(back).cfa_offset) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  // The most recent keys are there even though every neighbourhood is full.
  std::size_t recent = 0;
  const std::uint64_t first = 0x7f0000000000ull;
  for (std::uint64_t i = 0; i < 2000; ++i) detail::cfi_cache::insert(first + i * 16, rule_for(first + i * 16));
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const CfiRule got = detail::cfi_cache::lookup(first + i * 16);
    if (got.flags & CfiRule::kKnown) {
      ++recent;
      CHECK(got.cfa_offset == rule_for(first + i * 16).cfa_offset);
    }
  }
  INFO("recent keys found: " << recent << " of 2000");
  CHECK(recent > 1800);
  detail::cfi_cache::clear();
}
#if defined(__aarch64__)
// ---- aarch64: a return address signed by pointer authentication ----

namespace {

struct SignedWalk {
  pid_t tid = 0;
  StackBounds stack;
  const CodeMap* code = nullptr;
  std::uint64_t frames[64];
  DwarfWalk walk;
};
SignedWalk g_signed;

void walk_on_signal(int, siginfo_t*, void* context) {
  if (static_cast<pid_t>(syscall(SYS_gettid)) != g_signed.tid) return;
  g_signed.walk = unwind_dwarf(RegisterState::from(*static_cast<const ucontext_t*>(context)), g_signed.stack,
                               g_signed.frames, g_signed.code);
}

// The signal arrives as tgkill returns, in libc's syscall(): a leaf, whose caller is in x30.
[[gnu::noipa, gnu::noinline, gnu::section("text_dwarf_signal_self")]] void signal_self() {
  syscall(SYS_tgkill, getpid(), g_signed.tid, SIGUSR2);
  asm volatile("" ::: "memory");
}
// Signs its return address (paciasp) before it saves it, as Debian builds packages with
// -mbranch-protection=standard: the walk reads it signed from the stack.
[[gnu::noipa, gnu::noinline, gnu::section("text_dwarf_signed_return"),
  gnu::target("branch-protection=pac-ret")]] void signed_return() {
  signal_self();
  asm volatile("" ::: "memory");
}
[[gnu::noipa, gnu::noinline, gnu::section("text_dwarf_signed_caller")]] void signed_caller() {
  signed_return();
  asm volatile("" ::: "memory");
}
extern "C" char __start_text_dwarf_signal_self[], __stop_text_dwarf_signal_self[];
extern "C" char __start_text_dwarf_signed_return[], __stop_text_dwarf_signed_return[];
extern "C" char __start_text_dwarf_signed_caller[], __stop_text_dwarf_signed_caller[];

bool holds(const char* begin, const char* end, std::uint64_t address) {
  return address >= reinterpret_cast<std::uint64_t>(begin) && address < reinterpret_cast<std::uint64_t>(end);
}

}  // namespace

TEST_CASE("aarch64: the walk strips pointer-authentication codes from the return addresses it reads") {
  // HWCAP_PACA: the kernel signs with the A key for this process. Without it paciasp is a no-op and the test
  // only checks an ordinary walk.
  const bool pac = (getauxval(AT_HWCAP) & (1ul << 30)) != 0;
  const std::string pac_state = pac ? "enabled: return addresses are signed" : "not available";
  MESSAGE("pointer authentication " << pac_state);
  g_signed.tid = static_cast<pid_t>(syscall(SYS_gettid));
  g_signed.stack = StackBounds::of_this_thread();
  g_signed.code = CodeMap::refresh();
  struct sigaction sa {}, old{};
  sa.sa_sigaction = walk_on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &sa, &old) == 0);
  signed_caller();
  sigaction(SIGUSR2, &old, nullptr);

  const std::size_t n = g_signed.walk.frames;
  std::ostringstream frames;
  for (std::size_t i = 0; i < n; ++i) frames << std::hex << " 0x" << g_signed.frames[i];
  INFO("frames:" << frames.str());
  CHECK(g_signed.walk.complete);
  // signal_self, signed_return, signed_caller in order above libc's syscall(); signed_caller's return address
  // is the one signed_return signed.
  std::size_t at = 0;
  while (at < n && !holds(__start_text_dwarf_signal_self, __stop_text_dwarf_signal_self, g_signed.frames[at])) ++at;
  REQUIRE(at + 2 < n);
  CHECK(holds(__start_text_dwarf_signed_return, __stop_text_dwarf_signed_return, g_signed.frames[at + 1]));
  CHECK(holds(__start_text_dwarf_signed_caller, __stop_text_dwarf_signed_caller, g_signed.frames[at + 2]));
  CHECK(n > at + 3);  // and on, to this test and main
  for (std::size_t i = 0; i < n; ++i) CHECK((g_signed.frames[i] >> 48) == 0);  // user addresses: 48 bits
}
#endif

// ---- the whole walk against libunwind's cursor, at timer interrupts of real code ----

namespace {

struct Comparison {
  pid_t tid = 0;
  StackBounds stack;
  const CodeMap* code = nullptr;
  std::uint64_t dwarf[256];
  std::uint64_t cursor[256];
  std::atomic<int> samples{0};
  std::atomic<int> complete{0};
  std::atomic<int> mismatched{0};
  std::atomic<int> signed_lr{0};  // samples left out: x30 held a signed return address
  std::size_t deepest = 0;
  std::size_t bad_frames = 0, bad_cursor_frames = 0, bad_index = 0;
};
Comparison g_cmp;

void compare(const ucontext_t& uc);

void compare_on_signal(int, siginfo_t*, void* context) {
  const int saved_errno = errno;  // libunwind's lookups may set it
  if (static_cast<pid_t>(syscall(SYS_gettid)) == g_cmp.tid) compare(*static_cast<const ucontext_t*>(context));
  errno = saved_errno;
}

void compare(const ucontext_t& uc) {
  const RegisterState regs = RegisterState::from(uc);
  const DwarfWalk walk = unwind_dwarf(regs, g_cmp.stack, g_cmp.dwarf, g_cmp.code);
  // libunwind 1.6 does not strip pointer-authentication codes: interrupted in the vDSO (built with
  // -mbranch-protection) after its paciasp, its cursor read code at the signed x30 and died of SIGSEGV in the
  // emulated machine. Such samples are not compared (the walk strips them: the signed-return test above).
  if ((regs.lr >> 48) != 0) {
    g_cmp.signed_lr.fetch_add(1);
    return;
  }
  const std::size_t n = unwind_libunwind_cursor(uc, g_cmp.cursor);
  g_cmp.samples.fetch_add(1);
  if (!walk.complete) return;
  g_cmp.complete.fetch_add(1);
  if (walk.frames > g_cmp.deepest) g_cmp.deepest = walk.frames;
  bool same = walk.frames == n;
  std::size_t i = 0;
  for (; same && i < n; ++i) same = g_cmp.dwarf[i] == g_cmp.cursor[i];
  if (!same && g_cmp.mismatched.fetch_add(1) == 0) {
    g_cmp.bad_frames = walk.frames;
    g_cmp.bad_cursor_frames = n;
    g_cmp.bad_index = i;
  }
}

std::atomic<std::uint64_t> g_sink{0};

// Three kinds of frame the CFI must describe: rbp-based, rsp-based (no frame pointer), and one whose size is
// only known at run time (alloca: rbp-based by necessity).
std::uint64_t mixed(int depth, std::uint64_t x);

[[gnu::noipa]] std::uint64_t with_frame_pointer(int depth, std::uint64_t x) {
  std::uint64_t r = mixed(depth - 1, x * 3 + 1);
  asm volatile("" ::: "memory");
  return r + 1;
}

[[gnu::noipa, gnu::optimize("omit-frame-pointer")]] std::uint64_t without_frame_pointer(int depth, std::uint64_t x) {
  volatile std::uint64_t local[3] = {x, x + 1, x + 2};
  std::uint64_t r = mixed(depth - 1, local[0] + local[2]);
  return r + local[1];
}

[[gnu::noipa]] std::uint64_t with_alloca(int depth, std::uint64_t x) {
  auto* p = static_cast<volatile std::uint8_t*>(alloca(16 + (x & 127)));
  p[0] = static_cast<std::uint8_t>(x);
  std::uint64_t r = mixed(depth - 1, x + p[0]);
  return r + p[0];
}

// Tiny callees, so that many interrupts land in prologues and epilogues, where the rules change by the
// instruction (after `pop %rbp` the saved rbp's slot lies below rsp, for one).
[[gnu::noipa]] std::uint64_t tiny_with_frame(std::uint64_t x) {
  asm volatile("" ::: "memory");
  return x * 6364136223846793005ull + 1442695040888963407ull;
}

[[gnu::noipa, gnu::optimize("omit-frame-pointer")]] std::uint64_t tiny_without_frame(std::uint64_t x) {
  return (x ^ (x >> 17)) + 1;
}

[[gnu::noipa, gnu::optimize("omit-frame-pointer")]] std::uint64_t leaf_spin(std::uint64_t x) {
  for (int i = 0; i < 5000; ++i) x = tiny_without_frame(tiny_with_frame(x));
  return x;
}

std::uint64_t mixed(int depth, std::uint64_t x) {
  if (depth <= 0) return leaf_spin(x);
  switch (depth % 3) {
    case 0: return with_frame_pointer(depth, x);
    case 1: return without_frame_pointer(depth, x);
    default: return with_alloca(depth, x);
  }
}

}  // namespace

TEST_CASE("the DWARF walk finds exactly libunwind's frames where it completes, and completes nearly always") {
  if (selfperf_test::kTsan) {
    // Its handler runs at TSan's next safe point with the context saved at delivery: the stack has moved on.
    MESSAGE("skipped under TSan: a delayed handler's context no longer matches the stack (the sampler refuses "
            "Unwinder::libunwind there)");
    return;
  }
  g_cmp.tid = static_cast<pid_t>(syscall(SYS_gettid));
  g_cmp.stack = StackBounds::of_this_thread();
  g_cmp.code = CodeMap::refresh();
  struct sigaction sa {}, old{};
  sa.sa_sigaction = compare_on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGALRM, &sa, &old) == 0);
  itimerval every{{0, 300}, {0, 300}};
  REQUIRE(setitimer(ITIMER_REAL, &every, nullptr) == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::uint64_t round = 0;
  while (g_cmp.samples.load() < 2000 && std::chrono::steady_clock::now() < deadline) {
    g_sink += mixed(10 + static_cast<int>(round % 30), round);
    ++round;
  }
  itimerval off{};
  setitimer(ITIMER_REAL, &off, nullptr);
  sigaction(SIGALRM, &old, nullptr);

  INFO("samples " << g_cmp.samples.load() << ", complete " << g_cmp.complete.load() << ", deepest "
                  << g_cmp.deepest << "; first mismatch: " << g_cmp.bad_frames << " vs libunwind's "
                  << g_cmp.bad_cursor_frames << " frames, differing at " << g_cmp.bad_index);
  MESSAGE("DWARF walk vs libunwind: " << g_cmp.samples.load() << " samples, " << g_cmp.complete.load()
                                       << " walked to the end without libunwind, deepest " << g_cmp.deepest
                                       << "; left out with a signed x30: " << g_cmp.signed_lr.load());
  REQUIRE(g_cmp.samples.load() >= 2000);
  CHECK(g_cmp.mismatched.load() == 0);
  // Only samples that land in a PLT stub or the timer's own path go to libunwind.
  CHECK(g_cmp.complete.load() >= g_cmp.samples.load() * 9 / 10);
  CHECK(g_cmp.deepest >= 15);
}

#if !defined(__aarch64__)
// ---- the walk against the one-frame-at-a-time rule, on stacks built here ----
// (x86-64's walk predicts rules in runs of frames; aarch64's only follows them, as the comparison above checks)

namespace {

// What the walk must find, one frame at a time: each frame's rule from the cache (or the tables, on a miss),
// then the caller's CFA, return address and rbp. The library's walk predicts rules in runs of frames that share
// one and must give exactly this.
DwarfWalk reference_dwarf_walk(const RegisterState& regs, const StackBounds& stack, std::span<std::uint64_t> out,
                               const CodeMap& code) {
  if (out.empty()) return DwarfWalk{0, true};
  out[0] = regs.ip;
  if (regs.ip == 0 || !stack.contains(regs.sp, 8)) return DwarfWalk{1, false};
  std::size_t n = 1;
  std::uint64_t key = regs.ip | detail::cfi_cache::kExactIp, sp = regs.sp, fp = regs.fp;
  auto word = [](std::uint64_t addr) {
    std::uint64_t v;
    std::memcpy(&v, reinterpret_cast<const void*>(addr), 8);
    return v;
  };
  while (n < out.size()) {
    CfiRule rule = detail::cfi_cache::lookup(key);
    if (!(rule.flags & CfiRule::kKnown)) {
      const bool exact = (key & detail::cfi_cache::kExactIp) != 0;
      const std::uint64_t pc = exact ? key & ~detail::cfi_cache::kExactIp : key - 1;
      rule = detail::find_cfi_rule(code.eh_frame_of(pc), pc);
    }
    if (!rule.walks()) return DwarfWalk{n, rule.outermost()};
    const std::uint64_t cfa =
        ((rule.flags & CfiRule::kCfaFromRbp) ? fp : sp) + static_cast<std::uint64_t>(std::int64_t{rule.cfa_offset});
    if (cfa < sp + 8 || cfa > stack.high) break;
    const std::uint64_t ret = word(cfa - 8);
    if (rule.flags & CfiRule::kRbpSaved) {
      const std::uint64_t fp_at = cfa + static_cast<std::uint64_t>(std::int64_t{rule.rbp_offset});
      if (!stack.contains(fp_at, 8)) break;
      fp = word(fp_at);
    }
    if (ret == 0) break;
    out[n++] = ret;
    sp = cfa;
    key = ret;
  }
  return DwarfWalk{n, true};
}

CfiRule make_rule(std::uint8_t flags, std::int32_t cfa_offset, std::int16_t rbp_offset = 0) {
  CfiRule r;
  r.flags = static_cast<std::uint8_t>(CfiRule::kKnown | flags);
  r.cfa_offset = cfa_offset;
  r.rbp_offset = rbp_offset;
  return r;
}

}  // namespace

TEST_CASE("the DWARF walk equals the one-frame-at-a-time rule on random stacks with runs of shared rules") {
  // Call sites (fake return addresses, outside any code) with the rules compilers emit: frame-pointer frames
  // (one rule for every function), frames without rbp of several sizes, rbp saved inside the frame, and the
  // odd ones the walk must not predict (rbp saved further down, CFA from rbp without rbp saved, an offset
  // below 8), the end of the stack and a rule it cannot follow.
  constexpr auto W = CfiRule::kWalk, R = CfiRule::kCfaFromRbp, S = CfiRule::kRbpSaved;
  const CfiRule rules[] = {
      make_rule(W | R | S, 16, -16),  // push %rbp; mov %rsp,%rbp
      make_rule(W, 24),               // sub $16,%rsp
      make_rule(W, 56),
      make_rule(W | S, 40, -24),      // push %rbp among callee-saved pushes
      make_rule(W, 8),                // frameless
      make_rule(W | S, 32, -16),      // push %rbp first, then sub
      make_rule(W | R | S, 16, -24),  // rbp saved below its usual slot: never predicted
      make_rule(W | R, 16),           // CFA from rbp that nobody saved: never predicted
      make_rule(W, 4),                // CFA below rsp + 8: the walk stops
      make_rule(CfiRule::kOutermost, 0),
      CfiRule::unsupported(),
  };
  constexpr std::size_t kSites = 24;
  std::uint64_t site[kSites];
  std::size_t rule_of[kSites];
  for (std::size_t s = 0; s < kSites; ++s) {
    site[s] = 0x3100'0000'0000ull + 0x40 * s + 5;
    // Most sites take the first three rules (many functions, few distinct rules), a few the others.
    rule_of[s] = s < 16 ? s % 3 : 3 + (s - 16);
  }
  // A site whose home slot another site already holds: its rule sits one slot further, where the walk's quick
  // check of a predicted rule does not look.
  const std::uint64_t displaced = site[0] + detail::cfi_cache::kSlots;
  const std::uint64_t leaf_ip = 0x3100'0000'1000ull;

  alignas(16) static std::array<std::uint64_t, 4096> words;
  auto at = [&](std::size_t i) { return reinterpret_cast<std::uint64_t>(words.data()) + 8 * i; };
  // The stack ends 64 words before the array does: a walk that wrongly crosses the top reads words laid there
  // (call sites), not outside the array, and goes on where it should have stopped.
  const StackBounds bounds{at(0), at(words.size() - 64)};
  selfperf::test::XorShift rng(0x2545f4914f6cdd1dull);
  auto random = [&](std::uint64_t below) { return rng.below(below); };
  const CodeMap* code = CodeMap::refresh();
  REQUIRE(code != nullptr);
  for (std::uint64_t key : {site[0], displaced, leaf_ip | detail::cfi_cache::kExactIp})
    REQUIRE_FALSE(code->contains(key & ~detail::cfi_cache::kExactIp));

  std::array<std::uint64_t, 600> expected{};
  std::array<std::uint64_t, 601> got{};
  std::size_t longest = 0, ended_by_rule = 0, ended_early = 0;
  detail::cfi_cache::clear();
  for (int round = 0; round < 20000; ++round) {
    for (std::size_t s = 0; s < kSites; ++s) detail::cfi_cache::insert(site[s], rules[rule_of[s]]);
    detail::cfi_cache::insert(displaced, rules[1]);
    // The frames, leaf first: runs of one call site (recursion), of sites sharing a rule, or sites at random.
    std::vector<std::uint64_t> keys;
    const CfiRule leaf_rule = rules[random(3)];
    detail::cfi_cache::insert(leaf_ip | detail::cfi_cache::kExactIp, leaf_rule);
    while (keys.size() < 700) {
      const std::size_t run = 1 + random(4) * random(30);
      const std::uint64_t kind = random(8);
      const std::size_t first = random(20) == 0 ? 16 + random(kSites - 16) : random(16);  // the odd ones rarely
      for (std::size_t k = 0; k < run; ++k) {
        std::uint64_t key = site[first];
        if (kind == 1) key = site[3 * random(5) + first % 3];  // other functions with the same rule
        if (kind == 2) key = site[random(16)];                 // mixed
        if (random(50) == 0) key = displaced;
        keys.push_back(key);
      }
    }
    auto rule_at = [&](std::size_t i) {  // frame i's rule; frame 0 is the leaf
      return i == 0 ? leaf_rule : detail::cfi_cache::lookup(keys[i - 1]);
    };
    // Lay the frames out from the leaf up, each caller's return address and saved rbp where its callee's rule
    // says, and an rbp-based caller's rbp such that its CFA lies a random frame size above the callee's.
    words.fill(0);
    for (std::size_t i = words.size() - 64; i < words.size(); ++i) words[i] = site[i % 16];
    const std::uint64_t sp0 = at(2 + random(8));
    const auto rbp_offset = [](const CfiRule& r) { return static_cast<std::uint64_t>(std::int64_t{r.rbp_offset}); };
    auto frame_fp = [&](const CfiRule& r, std::uint64_t sp) {
      return sp + 8 * (2 + random(12)) - static_cast<std::uint64_t>(std::int64_t{r.cfa_offset});
    };
    std::uint64_t sp = sp0, fp = (rule_at(0).flags & R) ? frame_fp(rule_at(0), sp0) : at(random(words.size()));
    const std::uint64_t fp0 = fp;
    for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
      const CfiRule r = rule_at(i);
      if (!r.walks()) break;
      const std::uint64_t cfa = ((r.flags & R) ? fp : sp) + static_cast<std::uint64_t>(std::int64_t{r.cfa_offset});
      if (cfa < sp + 8 || cfa + 64 > bounds.high) break;
      const auto slot = [&](std::uint64_t addr) -> std::uint64_t& { return words[(addr - at(0)) / 8]; };
      slot(cfa - 8) = keys[i];
      if (r.flags & S) {
        const CfiRule caller = rule_at(i + 1);
        fp = (caller.flags & R) ? frame_fp(caller, cfa) : at(random(words.size()));
        slot(cfa + rbp_offset(r)) = fp;
      }
      sp = cfa;
      if (random(500) == 0) {  // the faults the walk stops at
        switch (random(4)) {
          case 0: slot(cfa - 8) = 0; break;                                                // zero return address
          case 1: slot(cfa - 8) = 0x3200'0000'0000ull + 16 * random(1000); break;          // unknown code
          case 2:  // rbp points back down the stack
            if (r.flags & S) slot(cfa + rbp_offset(r)) = sp0 + 8 * random((cfa - sp0) / 8);
            break;
          case 3: if (r.flags & S) slot(cfa + rbp_offset(r)) = bounds.high - 8; break;  // off the top
        }
      }
    }
    const RegisterState regs{leaf_ip, sp0, fp0};
    const std::size_t cap = random(3) == 0 ? 1 + random(expected.size()) : expected.size();
    const DwarfWalk want = reference_dwarf_walk(regs, bounds, std::span(expected).first(cap), *code);
    got.fill(0xdead);
    const DwarfWalk walk = unwind_dwarf(regs, bounds, std::span(got).first(cap), code);
    INFO("round " << round << ", output of " << cap);
    REQUIRE(walk.frames == want.frames);
    REQUIRE(walk.complete == want.complete);
    REQUIRE(std::equal(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(want.frames), got.begin()));
    REQUIRE(got[walk.frames] == 0xdead);  // nothing written past the frames counted
    longest = std::max(longest, want.frames);
    ended_by_rule += want.frames < cap && !want.complete ? 1 : 0;
    ended_early += want.frames < 30 ? 1 : 0;
  }
  detail::cfi_cache::clear();
  MESSAGE("random stacks: longest walk " << longest << " frames, " << ended_by_rule << " ended by a rule the walk "
                                         << "cannot follow, " << ended_early << " shorter than 30 frames");
  CHECK(longest >= 400);       // runs reached deep stacks...
  CHECK(ended_by_rule > 100);  // ...rules ended some...
  CHECK(ended_early > 100);    // ...and faults stopped others early
}
#endif
