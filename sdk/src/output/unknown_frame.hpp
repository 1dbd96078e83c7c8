#pragma once
// Names for code addresses no symbol covers (stripped binaries), shared by Symbolizer (this process) and
// PerfDataSymbolizer (a perf.data file) so that a profile and `selfperf report` of it name frames alike.
#include <cstdint>
#include <optional>
#include <string>

#include <elfutils/libdwfl.h>

namespace selfperf::detail {

// The start of the function containing `pc` (an address of the libdwfl session) as its .eh_frame FDE records
// it, in the ELF's own virtual addresses: the addresses perf script, objdump and addr2line print. Empty when
// no FDE covers `pc`. The module's FDE table is read once and kept in its userdata slot: end sessions that
// called this with end_session().
std::optional<std::uint64_t> fde_start(Dwfl_Module* mod, Dwarf_Addr pc);

// dwfl_end after freeing the FDE tables fde_start() hung on the session's modules.
void end_session(Dwfl* dwfl);

// "gzip+0x42a0" (module basename + FDE start) when an FDE covers the address, "[gzip]" (as stackcollapse-perf
// names perf script's "[unknown] (/usr/bin/gzip)") when none does, "[unknown]" (perf's word) without a module.
std::string unknown_frame_name(const std::string& module_path, std::optional<std::uint64_t> fde_start);

// A symbol as frames show it: demangled, without its version ("dlopen@GLIBC_2.2.5", "__libc_start_main@@GLIBC_2.34"
// name one function whichever the caller bound to: the version is noise in a profile).
std::string frame_symbol_name(const char* symbol);

}  // namespace selfperf::detail
