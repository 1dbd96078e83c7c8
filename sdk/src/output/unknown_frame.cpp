// Symbol-less frames are grouped by function, not by address: every sampled address of a stripped function
// used to be a box of its own ("gzip+0x4330", "gzip+0x4313", … for one loop), which splits the function's
// time across dozens of narrow boxes. The FDE's start is the function's start (compilers emit one FDE per
// function, cold parts aside), so naming the frame by it gives one box per function, like a symbol would.
// perf itself shows such frames as "[unknown]" in its sym field with the DSO beside it, and stackcollapse-perf
// folds them to "[gzip]", one box for the whole binary: that is what we print where no FDE covers the address,
// and the module+start form keeps the information perf's grouping throws away. Addresses are ELF virtual
// addresses, the ones perf script prints (`4330 [unknown] (/usr/bin/gzip)`, and 0x44e3eb, not the file offset
// 0x4e3eb, for a non-PIE executable), so `objdump -d --start-address=0x42a0 gzip` finds the function.
//
// libdw's dwarf_cfi_addrframe/dwarf_frame_info give only the CFA row's range around an address (0x42d4..0x4436
// for gzip's 0x4330, inside the FDE 0x4290..0x44a1), not the FDE's start, so the FDEs are listed with
// dwarf_next_cfi and only their initial_location is decoded here.
#include "output/unknown_frame.hpp"

#include "selfperf/symbolizer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include <elfutils/libdw.h>
#include <gelf.h>

namespace selfperf::detail {
namespace {

using FdeRanges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;  // [start, end), sorted by start

// DW_EH_PE_* pointer encodings (LSB gABI, "DWARF Extensions"): the value's format in the low nibble, what it
// is relative to in bits 4-6. Only absolute and pc-relative values occur in FDEs' initial_location.
constexpr std::uint8_t kPeOmit = 0xff;
constexpr std::uint8_t kPePcrel = 0x10;

class Bytes {
 public:
  Bytes(const std::uint8_t* p, const std::uint8_t* end) : p_(p), end_(end) {}
  const std::uint8_t* pos() const { return p_; }
  bool ok() const { return ok_; }
  std::uint8_t byte() { return static_cast<std::uint8_t>(fixed(1, false)); }
  std::uint64_t uleb() {
    std::uint64_t v = 0;
    for (unsigned shift = 0; ok_; shift += 7) {
      const std::uint8_t b = byte();
      if (shift < 64) v |= std::uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  }
  // A little-endian integer of `size` bytes, sign-extended when `is_signed` (ELF data of this machine's order:
  // the files we symbolize ran here).
  std::uint64_t fixed(std::size_t size, bool is_signed) {
    if (!ok_ || static_cast<std::size_t>(end_ - p_) < size) {
      ok_ = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < size; ++i) v |= std::uint64_t{p_[i]} << (8 * i);
    if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1) v |= ~std::uint64_t{0} << (8 * size);
    p_ += size;
    return v;
  }
  // A value of encoding `enc`; `field_address` is where the value lies in memory (for pc-relative ones).
  std::uint64_t encoded(std::uint8_t enc, std::uint64_t field_address, std::size_t address_size) {
    std::uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00: v = fixed(address_size, false); break;  // absptr
      case 0x01: v = uleb(); break;
      case 0x02: v = fixed(2, false); break;
      case 0x03: v = fixed(4, false); break;
      case 0x04: v = fixed(8, false); break;
      case 0x0a: v = fixed(2, true); break;
      case 0x0b: v = fixed(4, true); break;
      case 0x0c: v = fixed(8, true); break;
      default: ok_ = false; return 0;
    }
    switch (enc & 0x70) {
      case 0x00: return v;
      case kPePcrel: return v + field_address;
      default: ok_ = false; return 0;  // text-, data- or function-relative: not used for FDE addresses
    }
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
  bool ok_ = true;
};

// The FDE pointer encoding a CIE's augmentation ("zR", "zPLR", …) announces; absptr when it has none.
std::optional<std::uint8_t> fde_encoding(const Dwarf_CIE& cie, std::size_t address_size) {
  const char* aug = cie.augmentation;
  if (aug == nullptr || aug[0] != 'z') return aug != nullptr && aug[0] == '\0' ? std::optional<std::uint8_t>(0)
                                                                               : std::nullopt;
  Bytes data(cie.augmentation_data, cie.augmentation_data + cie.augmentation_data_size);
  for (const char* c = aug + 1; *c != '\0'; ++c) {
    if (*c == 'R') return data.ok() ? std::optional<std::uint8_t>(data.byte()) : std::nullopt;
    if (*c == 'L') {
      data.byte();
    } else if (*c == 'P') {
      const std::uint8_t enc = data.byte();
      data.encoded(static_cast<std::uint8_t>(enc & 0x0f), 0, address_size);  // the personality routine: skipped
    } else if (*c != 'S' && *c != 'B') {
      return std::nullopt;  // an augmentation we cannot step over
    }
  }
  return std::uint8_t{0};
}

FdeRanges read_fde_ranges(Elf* elf) {
  FdeRanges ranges;
  std::size_t shstrndx = 0;
  const char* ident = elf ? elf_getident(elf, nullptr) : nullptr;
  if (ident == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0) return ranges;
  const std::size_t address_size = ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_PROGBITS) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (name == nullptr || std::strcmp(name, ".eh_frame") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || data->d_buf == nullptr) return ranges;
    const auto* base = static_cast<const std::uint8_t*>(data->d_buf);
    const auto* section_end = base + data->d_size;
    // A CIE per object file linked in is common, so a large program has thousands: looked up by hash.
    std::unordered_map<Dwarf_Off, std::optional<std::uint8_t>> cies;  // section offset → its FDE encoding
    Dwarf_Off offset = 0;
    Dwarf_Off next = 0;
    Dwarf_CFI_Entry entry;
    for (; offset != static_cast<Dwarf_Off>(-1); offset = next) {
      const int rc = dwarf_next_cfi(reinterpret_cast<const unsigned char*>(ident), data, true, offset, &next, &entry);
      if (rc == 1) break;
      if (rc != 0) {
        if (next == offset || next == static_cast<Dwarf_Off>(-1)) break;
        continue;  // a malformed entry libdw could step over
      }
      if (entry.CIE_id == LIBDW_CIE_ID) {
        cies.emplace(offset, fde_encoding(entry.cie, address_size));
        continue;
      }
      const auto cie = cies.find(entry.fde.CIE_pointer);
      if (cie == cies.end() || !cie->second) continue;
      Bytes r(entry.fde.start, std::min(entry.fde.end, section_end));
      const std::uint8_t enc = *cie->second;
      const std::uint64_t start = r.encoded(enc, shdr.sh_addr + static_cast<std::uint64_t>(r.pos() - base), address_size);
      const std::uint64_t range = r.encoded(static_cast<std::uint8_t>(enc & 0x0f), 0, address_size);
      if (r.ok() && enc != kPeOmit && range != 0) ranges.emplace_back(start, start + range);
    }
    break;
  }
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

int free_ranges(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, void*) {
  delete static_cast<FdeRanges*>(*userdata);
  *userdata = nullptr;
  return DWARF_CB_OK;
}

}  // namespace

std::optional<std::uint64_t> fde_start(Dwfl_Module* mod, Dwarf_Addr pc) {
  if (mod == nullptr) return std::nullopt;
  void** slot = nullptr;
  dwfl_module_info(mod, &slot, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  if (slot == nullptr) return std::nullopt;
  Dwarf_Addr bias = 0;
  if (*slot == nullptr) *slot = new FdeRanges(read_fde_ranges(dwfl_module_getelf(mod, &bias)));
  else dwfl_module_getelf(mod, &bias);
  const auto& ranges = *static_cast<const FdeRanges*>(*slot);
  if (pc < bias) return std::nullopt;
  const std::uint64_t address = pc - bias;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(address, ~std::uint64_t{0}));
  if (it == ranges.begin()) return std::nullopt;
  --it;
  if (address >= it->second) return std::nullopt;  // between functions (padding) or past the last FDE
  return it->first;
}

void end_session(Dwfl* dwfl) {
  if (dwfl == nullptr) return;
  dwfl_getmodules(dwfl, free_ranges, nullptr, 0);
  dwfl_end(dwfl);
}

std::string unknown_frame_name(const std::string& module_path, std::optional<std::uint64_t> start) {
  if (module_path.empty()) return "[unknown]";
  const auto slash = module_path.rfind('/');
  const std::string base = module_path.substr(slash == std::string::npos ? 0 : slash + 1);
  if (!start) return "[" + base + "]";
  char buf[32];
  std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(*start));
  return base + buf;
}

std::string frame_symbol_name(const char* symbol) {
  std::string plain(symbol);
  if (auto at = plain.find('@'); at != std::string::npos && at > 0) plain.resize(at);
  return demangle(plain.c_str());
}

}  // namespace selfperf::detail
