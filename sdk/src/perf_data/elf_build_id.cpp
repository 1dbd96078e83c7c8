// NT_GNU_BUILD_ID of an ELF file, through elfutils (the same note perf buildid-list reads).
#include <fcntl.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <libelf.h>

#include "selfperf/perf_data.hpp"

namespace selfperf {

std::vector<std::uint8_t> read_elf_build_id(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::vector<std::uint8_t> out;
  ::elf_version(EV_CURRENT);
  if (Elf* elf = ::elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    const void* bytes = nullptr;
    ssize_t n = ::dwelf_elf_gnu_build_id(elf, &bytes);
    if (n > 0 && bytes != nullptr) {
      const auto* p = static_cast<const std::uint8_t*>(bytes);
      out.assign(p, p + n);
    }
    ::elf_end(elf);
  }
  ::close(fd);
  return out;
}

}  // namespace selfperf
