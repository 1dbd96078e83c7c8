#include "unwinding/elf_load_bias.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

namespace selfperf::detail {

std::optional<std::uint64_t> elf_load_bias(Elf* elf, std::uint64_t start, std::uint64_t pgoff) {
  GElf_Ehdr ehdr;
  std::size_t n = 0;
  if (!gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &n) != 0) return std::nullopt;
  if (ehdr.e_type == ET_EXEC) return 0;
  for (std::size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
    // The segment the mapping starts in (both page-aligned down to the same page).
    const std::uint64_t page = 4096;
    const std::uint64_t seg_start = ph.p_offset & ~(page - 1);
    if (pgoff >= seg_start && pgoff < ph.p_offset + ph.p_filesz)
      return start - (pgoff - seg_start) - (ph.p_vaddr & ~(page - 1));
  }
  return std::nullopt;
}

std::optional<std::uint64_t> elf_load_bias(const std::string& path, std::uint64_t start, std::uint64_t pgoff) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  elf_version(EV_CURRENT);
  std::optional<std::uint64_t> bias;
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    bias = elf_load_bias(elf, start, pgoff);
    elf_end(elf);
  }
  ::close(fd);
  return bias;
}

}  // namespace selfperf::detail
