// .eh_frame evaluation for the signal handler: .eh_frame_hdr's sorted table finds the FDE, the CIE's and FDE's
// call-frame instructions run up to the address, and only the frame pointer, the stack pointer (as CFA) and the
// return address are kept: rbp, rsp and the return-address column on x86-64, x29, sp and x30 on aarch64.
// Formats: the LSB's "Exception Frame" chapter and DWARF 5 section 6.4.
#include "unwinding/dwarf_cfi.hpp"

#include <cstring>

namespace selfperf::detail {

namespace {

#if defined(__aarch64__)
// DWARF register numbers on aarch64 ("DWARF for the Arm 64-bit Architecture", 4.1): x29 (the frame pointer),
// sp, and x30 (the link register), which is also the CIE's return-address column.
constexpr std::uint64_t kFp = 29;
constexpr std::uint64_t kSp = 31;
constexpr std::uint64_t kReturnAddress = 30;
#else
// DWARF register numbers on x86-64 (System V psABI, figure 3.36).
constexpr std::uint64_t kFp = 6;    // rbp
constexpr std::uint64_t kSp = 7;    // rsp
constexpr std::uint64_t kReturnAddress = 16;
#endif

// DW_EH_PE_* pointer encodings: the low nibble is the value's format, bits 4-6 what it is relative to.
constexpr std::uint8_t kPeOmit = 0xff;
constexpr std::uint8_t kPeIndirect = 0x80;
constexpr std::uint8_t kPeDatarelSdata4 = 0x3b;  // the only table encoding binutils, gold, lld and mold emit

// Bounded little-endian reads from mapped memory; the first overrun clears ok() and every later read is 0.
class Reader {
 public:
  Reader(std::uint64_t pos, std::uint64_t end) noexcept : pos_(pos), end_(end) {}

  bool ok() const noexcept { return ok_; }
  std::uint64_t pos() const noexcept { return pos_; }
  bool at_end() const noexcept { return !ok_ || pos_ >= end_; }
  void skip(std::uint64_t n) noexcept {
    if (!take(n)) return;
    pos_ += n;
  }

  template <class T>
  T fixed() noexcept {
    if (!take(sizeof(T))) return 0;
    T v;
    std::memcpy(&v, reinterpret_cast<const void*>(pos_), sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::uint64_t uleb() noexcept {
    std::uint64_t v = 0;
    for (unsigned shift = 0; ok_; shift += 7) {
      auto byte = fixed<std::uint8_t>();
      if (shift < 64) v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) break;
    }
    return v;
  }
  std::int64_t sleb() noexcept {
    std::uint64_t v = 0;
    unsigned shift = 0;
    std::uint8_t byte = 0;
    do {
      byte = fixed<std::uint8_t>();
      if (shift < 64) v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      shift += 7;
    } while (ok_ && (byte & 0x80) != 0);
    if (shift < 64 && (byte & 0x40) != 0) v |= ~std::uint64_t{0} << shift;
    return static_cast<std::int64_t>(v);
  }
  // A DW_EH_PE-encoded pointer. pcrel is relative to the field's own address, datarel to `datarel_base`
  // (.eh_frame_hdr's start); textrel, funcrel, aligned and indirect do not occur in .eh_frame on x86-64.
  std::uint64_t encoded(std::uint8_t enc, std::uint64_t datarel_base = 0) noexcept {
    if (enc == kPeOmit || (enc & kPeIndirect) != 0) return fail();
    const std::uint64_t field = pos_;
    std::uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00: v = fixed<std::uint64_t>(); break;                                 // absptr
      case 0x01: v = uleb(); break;                                                 // uleb128
      case 0x02: v = fixed<std::uint16_t>(); break;                                 // udata2
      case 0x03: v = fixed<std::uint32_t>(); break;                                 // udata4
      case 0x04: v = fixed<std::uint64_t>(); break;                                 // udata8
      case 0x09: v = static_cast<std::uint64_t>(sleb()); break;                     // sleb128
      case 0x0a: v = static_cast<std::uint64_t>(fixed<std::int16_t>()); break;      // sdata2
      case 0x0b: v = static_cast<std::uint64_t>(fixed<std::int32_t>()); break;      // sdata4
      case 0x0c: v = fixed<std::uint64_t>(); break;                                 // sdata8
      default: return fail();
    }
    switch (enc & 0x70) {
      case 0x00: return v;
      case 0x10: return v + field;
      case 0x30: return v + datarel_base;
      default: return fail();
    }
  }
  std::uint64_t fail() noexcept {
    ok_ = false;
    return 0;
  }

 private:
  bool take(std::uint64_t n) noexcept {
    if (!ok_ || pos_ > end_ || end_ - pos_ < n) ok_ = false;
    return ok_;
  }
  std::uint64_t pos_;
  std::uint64_t end_;
  bool ok_ = true;
};

// The rules being built. Registers other than rbp and the return address are parsed and ignored.
struct RegRule {
  enum Kind : std::uint8_t { same, undefined, saved, other } kind = same;
  std::int64_t offset = 0;  // saved: at CFA + offset
};
struct FrameState {
  std::uint64_t cfa_reg = kSp;
#if defined(__aarch64__)
  std::int64_t cfa_offset = 0;  // at a call's target: CFA = sp, the return address in x30 (`bl` put it there)
  RegRule rbp;                  // x29
  RegRule ra{RegRule::same, 0};
#else
  std::int64_t cfa_offset = 8;  // at a call's target: CFA = rsp + 8, the return address just below it
  RegRule rbp;
  RegRule ra{RegRule::saved, -8};
#endif
  bool unsupported = false;
};

struct Cie {
  std::uint64_t code_align = 1;
  std::int64_t data_align = -8;
  std::uint64_t ra_reg = kReturnAddress;
  std::uint8_t fde_encoding = 0;  // absptr unless 'R' says otherwise
  bool augmented = false;         // 'z': FDEs carry an augmentation length
  std::uint64_t instructions = 0;
  std::uint64_t end = 0;
};

// A CIE or FDE header: its length (32-bit, or 64-bit after 0xffffffff) and where its contents end.
bool read_length(Reader& r, std::uint64_t& end) noexcept {
  std::uint64_t length = r.fixed<std::uint32_t>();
  if (length == 0xffffffffu) length = r.fixed<std::uint64_t>();
  if (!r.ok() || length == 0) return false;
  end = r.pos() + length;
  return true;
}

bool parse_cie(std::uint64_t at, std::uint64_t section_end, Cie& cie) noexcept {
  Reader r(at, section_end);
  if (!read_length(r, cie.end) || cie.end > section_end) return false;
  r = Reader(r.pos(), cie.end);
  if (r.fixed<std::uint32_t>() != 0) return false;  // CIE id 0 in .eh_frame
  const auto version = r.fixed<std::uint8_t>();
  if (version != 1 && version != 3) return false;
  char augmentation[8] = {};
  std::size_t len = 0;
  for (char c = static_cast<char>(r.fixed<std::uint8_t>()); r.ok() && c != 0;
       c = static_cast<char>(r.fixed<std::uint8_t>())) {
    if (len + 1 == sizeof augmentation) return false;
    augmentation[len++] = c;
  }
  cie.code_align = r.uleb();
  cie.data_align = r.sleb();
  cie.ra_reg = version == 1 ? r.fixed<std::uint8_t>() : r.uleb();
  if (augmentation[0] == 'z') {
    cie.augmented = true;
    const std::uint64_t data_length = r.uleb();
    const std::uint64_t data_end = r.pos() + data_length;
    for (std::size_t i = 1; i < len && r.ok(); ++i) {
      switch (augmentation[i]) {
        case 'R': cie.fde_encoding = r.fixed<std::uint8_t>(); break;
        case 'L': r.fixed<std::uint8_t>(); break;
        case 'P': {
          // The personality routine's pointer: its size comes from its encoding; indirect is allowed here.
          const auto enc = r.fixed<std::uint8_t>();
          r.encoded(static_cast<std::uint8_t>(enc & ~kPeIndirect));
          break;
        }
        case 'S': return false;  // a signal frame: libunwind knows the kernel's sigcontext layout
#if defined(__aarch64__)
        case 'B': break;  // return addresses signed with the B key: the walk strips either key's signature
#endif
        default: return false;   // an augmentation we cannot skip safely
      }
    }
    if (!r.ok() || r.pos() > data_end) return false;
    r.skip(data_end - r.pos());
  } else if (len != 0) {
    return false;  // "eh" and other pre-'z' augmentations: no length to skip them by
  }
  cie.instructions = r.pos();
  return r.ok() && cie.ra_reg == kReturnAddress && cie.code_align != 0;
}

// A CFA given as a DWARF expression, where it is rsp plus something computed from the instruction's address
// alone: linkers describe PLT stubs that way (rsp + 8, + 8 more once the lazy stub has pushed its index:
// "rsp + 8 + ((rip & 15) >= 11) << 3"). Evaluated at `pc`, it is a plain rsp offset for that instruction.
// Values are tracked as (rsp multiple, constant); anything else (memory reads, other registers, rsp scaled)
// is refused. Sets the CFA and returns true, or returns false. On aarch64 (no DWARF register holds the pc
// there) only sp (breg31) and constants are taken; its PLT stubs have no FDE at all.
bool cfa_from_expression(Reader r, [[maybe_unused]] std::uint64_t pc, FrameState& s) noexcept {
  struct Value {
    std::int64_t rsp;  // 0 or 1
    std::int64_t k;
  };
  constexpr int kDepth = 8;
  Value stack[kDepth];
  int n = 0;
  auto push = [&](Value v) {
    if (n == kDepth) return false;
    stack[n++] = v;
    return true;
  };
  while (!r.at_end()) {
    const auto op = r.fixed<std::uint8_t>();
    bool ok = true;
    if (op >= 0x30 && op <= 0x4f) {  // DW_OP_lit0..31
      ok = push({0, op - 0x30});
    } else if (op == 0x70 + kSp) {  // DW_OP_breg7 (aarch64: breg31): rsp + offset
      ok = push({1, r.sleb()});
#if !defined(__aarch64__)
    } else if (op == 0x80) {  // DW_OP_breg16: rip + offset
      ok = push({0, static_cast<std::int64_t>(pc) + r.sleb()});
#endif
    } else if (op == 0x08) {  // DW_OP_const1u
      ok = push({0, r.fixed<std::uint8_t>()});
    } else if (op == 0x10) {  // DW_OP_constu
      ok = push({0, static_cast<std::int64_t>(r.uleb())});
    } else if (op == 0x11) {  // DW_OP_consts
      ok = push({0, r.sleb()});
    } else if (op == 0x23) {  // DW_OP_plus_uconst
      if (n == 0) return false;
      stack[n - 1].k += static_cast<std::int64_t>(r.uleb());
    } else {
      if (n < 2) return false;
      const Value b = stack[--n];
      Value& a = stack[n - 1];
      const bool constants = a.rsp == 0 && b.rsp == 0;
      switch (op) {
        case 0x22:  // DW_OP_plus
          if (a.rsp + b.rsp > 1) return false;
          a = {a.rsp + b.rsp, a.k + b.k};
          break;
        case 0x1c:  // DW_OP_minus
          if (b.rsp != 0) return false;
          a.k -= b.k;
          break;
        case 0x1a: if (!constants) return false; a.k &= b.k; break;  // DW_OP_and
        case 0x21: if (!constants) return false; a.k |= b.k; break;  // DW_OP_or
        case 0x24:                                                   // DW_OP_shl
          if (!constants || b.k < 0 || b.k > 63) return false;
          a.k = static_cast<std::int64_t>(static_cast<std::uint64_t>(a.k) << b.k);
          break;
        case 0x29: if (!constants) return false; a.k = a.k == b.k; break;  // DW_OP_eq
        case 0x2a: if (!constants) return false; a.k = a.k >= b.k; break;  // DW_OP_ge
        case 0x2b: if (!constants) return false; a.k = a.k > b.k; break;   // DW_OP_gt
        case 0x2c: if (!constants) return false; a.k = a.k <= b.k; break;  // DW_OP_le
        case 0x2d: if (!constants) return false; a.k = a.k < b.k; break;   // DW_OP_lt
        case 0x2e: if (!constants) return false; a.k = a.k != b.k; break;  // DW_OP_ne
        default: return false;
      }
    }
    if (!ok || !r.ok()) return false;
  }
  if (n != 1 || stack[0].rsp != 1 || !r.ok()) return false;
  s.cfa_reg = kSp;
  s.cfa_offset = stack[0].k;
  return true;
}

template <class State>  // FrameState or const FrameState
auto rule_of(State& s, std::uint64_t reg) noexcept -> decltype(&s.rbp) {
  if (reg == kFp) return &s.rbp;
  if (reg == kReturnAddress) return &s.ra;
  return nullptr;
}

// Runs call-frame instructions from [r.pos(), r's end) while the row's address stays <= pc. `initial` is the
// state after the CIE (for DW_CFA_restore); null while running the CIE itself.
void run_cfa_program(Reader r, const Cie& cie, std::uint64_t loc, std::uint64_t pc, FrameState& s,
                     const FrameState* initial) noexcept {
  constexpr int kStackDepth = 8;
  FrameState remembered[kStackDepth];
  int depth = 0;
  auto set = [&](std::uint64_t reg, RegRule::Kind kind, std::int64_t offset) {
    if (reg == kSp) {
      s.unsupported = true;  // the CFA is the caller's rsp; an explicit rule for rsp we do not model
    } else if (RegRule* rule = rule_of(s, reg)) {
      *rule = RegRule{kind, offset};
    }
  };
  auto restore = [&](std::uint64_t reg) {
    if (initial == nullptr) {
      s.unsupported = true;
    } else if (RegRule* rule = rule_of(s, reg)) {
      *rule = *rule_of(*initial, reg);
    }
  };
  auto advance = [&](std::uint64_t delta) {
    loc += delta * cie.code_align;
    return loc <= pc;
  };
  while (!r.at_end() && !s.unsupported) {
    const auto op = r.fixed<std::uint8_t>();
    const std::uint8_t low = op & 0x3f;
    switch (op >> 6) {
      case 1:  // DW_CFA_advance_loc
        if (!advance(low)) return;
        continue;
      case 2:  // DW_CFA_offset
        set(low, RegRule::saved, static_cast<std::int64_t>(r.uleb()) * cie.data_align);
        continue;
      case 3:  // DW_CFA_restore
        restore(low);
        continue;
      default:
        break;
    }
    switch (op) {
      case 0x00: break;  // DW_CFA_nop
      case 0x01: {       // DW_CFA_set_loc
        const std::uint64_t to = r.encoded(cie.fde_encoding);
        if (to > pc) return;
        loc = to;
        break;
      }
      case 0x02: if (!advance(r.fixed<std::uint8_t>())) return; break;
      case 0x03: if (!advance(r.fixed<std::uint16_t>())) return; break;
      case 0x04: if (!advance(r.fixed<std::uint32_t>())) return; break;
      case 0x05: {  // DW_CFA_offset_extended
        const std::uint64_t reg = r.uleb();
        set(reg, RegRule::saved, static_cast<std::int64_t>(r.uleb()) * cie.data_align);
        break;
      }
      case 0x06: restore(r.uleb()); break;                      // DW_CFA_restore_extended
      case 0x07: set(r.uleb(), RegRule::undefined, 0); break;   // DW_CFA_undefined
      case 0x08: set(r.uleb(), RegRule::same, 0); break;        // DW_CFA_same_value
      case 0x09: {                                              // DW_CFA_register
        const std::uint64_t reg = r.uleb();
        r.uleb();
        set(reg, RegRule::other, 0);
        break;
      }
      case 0x0a:  // DW_CFA_remember_state (the CFA too, as GCC's and libunwind's unwinders do)
        if (depth == kStackDepth) return void(s.unsupported = true);
        remembered[depth++] = s;
        break;
      case 0x0b:  // DW_CFA_restore_state
        if (depth == 0) return void(s.unsupported = true);
        s = remembered[--depth];
        break;
      case 0x0c:  // DW_CFA_def_cfa
        s.cfa_reg = r.uleb();
        s.cfa_offset = static_cast<std::int64_t>(r.uleb());
        break;
      case 0x0d: s.cfa_reg = r.uleb(); break;                                // DW_CFA_def_cfa_register
      case 0x0e: s.cfa_offset = static_cast<std::int64_t>(r.uleb()); break;  // DW_CFA_def_cfa_offset
      case 0x0f: {  // DW_CFA_def_cfa_expression
        const std::uint64_t length = r.uleb();
        const std::uint64_t begin = r.pos();
        r.skip(length);
        if (!r.ok() || !cfa_from_expression(Reader(begin, begin + length), pc, s)) return void(s.unsupported = true);
        break;
      }
      case 0x10: case 0x16: {  // DW_CFA_expression, DW_CFA_val_expression
        const std::uint64_t reg = r.uleb();
        r.skip(r.uleb());
        set(reg, RegRule::other, 0);
        break;
      }
      case 0x11: {  // DW_CFA_offset_extended_sf
        const std::uint64_t reg = r.uleb();
        set(reg, RegRule::saved, r.sleb() * cie.data_align);
        break;
      }
      case 0x12:  // DW_CFA_def_cfa_sf
        s.cfa_reg = r.uleb();
        s.cfa_offset = r.sleb() * cie.data_align;
        break;
      case 0x13: s.cfa_offset = r.sleb() * cie.data_align; break;  // DW_CFA_def_cfa_offset_sf
      case 0x14: case 0x15: {  // DW_CFA_val_offset(_sf): the register's value, not its save slot
        const std::uint64_t reg = r.uleb();
        if (op == 0x14) r.uleb(); else r.sleb();
        set(reg, RegRule::other, 0);
        break;
      }
      case 0x2e: r.uleb(); break;  // DW_CFA_GNU_args_size
#if defined(__aarch64__)
      // DW_CFA_AARCH64_negate_ra_state: x30 is (or no longer is) signed with a pointer-authentication code in its
      // top bits (paciasp/autiasp, -mbranch-protection). Nothing to keep: the walk strips every return address
      // it takes (xpaclri), which leaves an unsigned one as it is.
      case 0x2d: break;
#endif
      case 0x2f: {                 // DW_CFA_GNU_negative_offset_extended
        const std::uint64_t reg = r.uleb();
        set(reg, RegRule::saved, -static_cast<std::int64_t>(r.uleb()) * cie.data_align);
        break;
      }
      default: return void(s.unsupported = true);
    }
  }
  if (!r.ok()) s.unsupported = true;
}

// The FDE whose range starts at or below pc, through .eh_frame_hdr's sorted table.
std::uint64_t find_fde(const EhFrameSection& sec, std::uint64_t pc) noexcept {
  Reader r(sec.hdr, sec.end);
  if (r.fixed<std::uint8_t>() != 1) return 0;
  const auto frame_ptr_enc = r.fixed<std::uint8_t>();
  const auto count_enc = r.fixed<std::uint8_t>();
  const auto table_enc = r.fixed<std::uint8_t>();
  r.encoded(frame_ptr_enc, sec.hdr);
  if (count_enc == kPeOmit || table_enc != kPeDatarelSdata4) return 0;
  const std::uint64_t count = r.encoded(count_enc, sec.hdr);
  const std::uint64_t table = r.pos();
  if (!r.ok() || count == 0 || count > (sec.end - table) / 8) return 0;
  auto entry = [&](std::uint64_t i, int field) {
    std::int32_t v;
    std::memcpy(&v, reinterpret_cast<const void*>(table + i * 8 + static_cast<std::uint64_t>(field) * 4), 4);
    return sec.hdr + static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
  };
  if (pc < entry(0, 0)) return 0;
  std::uint64_t lo = 0, n = count;  // the last entry whose start is <= pc
  while (n > 1) {
    const std::uint64_t half = n / 2;
    if (entry(lo + half, 0) <= pc) lo += half;
    n -= half;
  }
  return entry(lo, 1);
}

CfiRule to_rule(const FrameState& s) noexcept {
  CfiRule rule = CfiRule::unsupported();
  if (s.unsupported) return rule;
  if (s.ra.kind == RegRule::undefined) {
    rule.flags |= CfiRule::kOutermost;
    return rule;
  }
#if defined(__aarch64__)
  // A leaf (or a prologue before `stp x29, x30, ...`) has CFA = sp: offset 0. The return address is x30 itself
  // (same value) or a slot below the CFA, a multiple of 8 that ra_slot can name: from x29's slot where x29 was
  // saved (gcc puts the frame record at the bottom of frames with locals, over 1 KiB below the CFA in large
  // ones, with x30 always right above x29), else from the CFA.
  const bool cfa_ok = (s.cfa_reg == kSp || s.cfa_reg == kFp) && s.cfa_offset >= 0 && s.cfa_offset < (1 << 30);
  const bool ra_in_lr = s.ra.kind == RegRule::same;
  const std::int64_t ra_from = s.rbp.kind == RegRule::saved ? s.rbp.offset : 0;
  const std::int64_t ra_words = (s.ra.offset - ra_from) / 8;
  const bool ra_ok = ra_in_lr || (s.ra.kind == RegRule::saved && s.ra.offset <= -8 && s.ra.offset % 8 == 0 &&
                                  ra_from % 8 == 0 && ra_words >= -128 && ra_words <= 127);
#else
  const bool cfa_ok = (s.cfa_reg == kSp || s.cfa_reg == kFp) && s.cfa_offset > 0 && s.cfa_offset < (1 << 30);
  const bool ra_ok = s.ra.kind == RegRule::saved && s.ra.offset == -8;
#endif
  const bool rbp_ok = s.rbp.kind == RegRule::same || s.rbp.kind == RegRule::undefined ||
                      (s.rbp.kind == RegRule::saved && s.rbp.offset >= -32768 && s.rbp.offset <= -8);
  if (!cfa_ok || !ra_ok || !rbp_ok) return rule;
  rule.flags |= CfiRule::kWalk;
  if (s.cfa_reg == kFp) rule.flags |= CfiRule::kCfaFromRbp;
  rule.cfa_offset = static_cast<std::int32_t>(s.cfa_offset);
  if (s.rbp.kind == RegRule::saved) {
    rule.flags |= CfiRule::kRbpSaved;
    rule.rbp_offset = static_cast<std::int16_t>(s.rbp.offset);
  }
#if defined(__aarch64__)
  if (ra_in_lr) {
    rule.flags |= CfiRule::kRaInLr;
  } else {
    rule.ra_slot = static_cast<std::int8_t>(ra_words);
  }
#endif
  return rule;
}

}  // namespace

CfiRule find_cfi_rule(const EhFrameSection& sec, std::uint64_t pc) noexcept {
  if (sec.hdr < sec.begin || sec.hdr >= sec.end) return CfiRule::unsupported();
  const std::uint64_t fde = find_fde(sec, pc);
  if (fde < sec.begin || fde >= sec.end) return CfiRule::unsupported();

  Reader r(fde, sec.end);
  std::uint64_t fde_end = 0;
  if (!read_length(r, fde_end) || fde_end > sec.end) return CfiRule::unsupported();
  r = Reader(r.pos(), fde_end);
  const std::uint64_t cie_field = r.pos();
  const std::uint64_t cie_offset = r.fixed<std::uint32_t>();
  if (!r.ok() || cie_offset == 0 || cie_offset > cie_field - sec.begin) return CfiRule::unsupported();
  Cie cie;
  if (!parse_cie(cie_field - cie_offset, sec.end, cie)) return CfiRule::unsupported();
  const std::uint64_t begin = r.encoded(cie.fde_encoding);
  const std::uint64_t range = r.encoded(cie.fde_encoding & 0x0f);
  if (!r.ok() || pc < begin || pc - begin >= range) return CfiRule::unsupported();  // a gap between FDEs
  if (cie.augmented) r.skip(r.uleb());
  if (!r.ok()) return CfiRule::unsupported();

  FrameState state;
  run_cfa_program(Reader(cie.instructions, cie.end), cie, begin, ~std::uint64_t{0}, state, nullptr);
  if (state.unsupported) return CfiRule::unsupported();
  const FrameState initial = state;
  run_cfa_program(r, cie, begin, pc, state, &initial);
  return to_rule(state);
}

namespace cfi_cache {

Table g_table;

std::uint64_t lookup_past_home(std::uint64_t key, std::uint64_t home) noexcept {
  for (std::uint64_t i = 1; i < kProbes; ++i) {
    const std::uint64_t slot = (home + i) & (kSlots - 1);
    const std::uint64_t found = g_table.keys[slot].load(std::memory_order_relaxed);
    if (found == key) {
      const std::uint64_t rule = g_table.rules[slot].load(std::memory_order_acquire);
      return g_table.keys[slot].load(std::memory_order_relaxed) == key ? rule : 0;
    }
    if (found == 0) break;
  }
  return 0;
}

void insert(std::uint64_t key, CfiRule rule) noexcept {
  if (key == 0) return;
  const auto word = std::bit_cast<std::uint64_t>(rule);
  for (std::uint64_t i = 0; i < kProbes; ++i) {
    const std::uint64_t slot = (key + i) & (kSlots - 1);
    std::uint64_t found = g_table.keys[slot].load(std::memory_order_relaxed);
    if (found == 0 && g_table.keys[slot].compare_exchange_strong(found, key, std::memory_order_relaxed)) found = key;
    if (found == key) {
      // Every thread computes the same rule for a key, so racing publishers store the same word.
      g_table.rules[slot].store(word, std::memory_order_release);
      return;
    }
  }
  // Every slot near home is taken: replace one, chosen by the bits above the home index so that keys sharing
  // a home (addresses a multiple of the table size apart) land in different slots. Claiming it by zeroing its
  // published rule makes concurrent readers miss and leaves it to one writer; a slot in the middle of another
  // write is left alone.
  const std::uint64_t slot = (key + ((key >> kBits) & (kProbes - 1))) & (kSlots - 1);
  std::uint64_t old = g_table.rules[slot].load(std::memory_order_relaxed);
  if (old == 0 || !g_table.rules[slot].compare_exchange_strong(old, 0, std::memory_order_acquire)) return;
  g_table.keys[slot].store(key, std::memory_order_relaxed);
  g_table.rules[slot].store(word, std::memory_order_release);
}

void clear() noexcept {
  // Rules first: a reader that still matches an old key then finds 0, a miss, and recomputes.
  // Slots already empty are not written: the table's untouched pages stay unallocated.
  for (auto& rule : g_table.rules)
    if (rule.load(std::memory_order_relaxed) != 0) rule.store(0, std::memory_order_relaxed);
  for (auto& key : g_table.keys)
    if (key.load(std::memory_order_relaxed) != 0) key.store(0, std::memory_order_release);
}

}  // namespace cfi_cache

}  // namespace selfperf::detail
