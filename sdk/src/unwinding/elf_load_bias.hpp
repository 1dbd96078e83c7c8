#pragma once
// Where address 0 of an ELF file lands in a process, from one of its mappings (an MMAP2 record, a line of
// /proc/PID/maps): start - pgoff + p_offset - p_vaddr of the PT_LOAD segment the mapping starts in, both
// page-aligned; 0 for an ET_EXEC file. What libdwfl's dwfl_report_elf takes as the module's bias.
#include <libelf.h>

#include <cstdint>
#include <optional>
#include <string>

namespace selfperf::detail {

// Empty when `elf` has no PT_LOAD segment holding `pgoff`.
std::optional<std::uint64_t> elf_load_bias(Elf* elf, std::uint64_t start, std::uint64_t pgoff);
// Reads the file at `path`; empty when it cannot be read.
std::optional<std::uint64_t> elf_load_bias(const std::string& path, std::uint64_t start, std::uint64_t pgoff);

}  // namespace selfperf::detail
