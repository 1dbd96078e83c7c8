// The elfutils functions the profiler calls, each loading libdw.so.1 (and its libelf) on first use instead of
// at the program's start: a process that takes no sample never symbolizes, and loading libdw with its five
// libraries cost /bin/true about as much as everything else the library does at start (docs/known-limits.md).
// Linked into libselfperf_profile.so alone, ahead of libdw (which --as-needed then leaves out); exports.map
// keeps these definitions from interposing on a program that uses elfutils itself.
#include <dlfcn.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>

#include <string>

#include "selfperf/error.hpp"

namespace {

void* libdw() {
  static void* const handle = ::dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

// The real function behind one of the definitions below. Throws where libdw is missing: the first call of
// every path comes from the library's own C++ code (a Symbolizer, a build ID), never from inside libdw.
template <class Fn>
Fn real(Fn, const char* name) {
  void* handle = libdw();
  void* fn = handle != nullptr ? ::dlsym(handle, name) : nullptr;
  if (fn == nullptr) {
    const char* why = ::dlerror();
    throw selfperf::Error(std::string("cannot load ") + name + " from libdw.so.1 (" + (why ? why : "not found") +
                          "): symbols and build IDs need elfutils' libdw (Debian: apt-get install libdw1)");
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

extern "C" {

int dwarf_next_cfi(const unsigned char e_ident[], Elf_Data* data, bool eh_frame_p, Dwarf_Off offset,
                   Dwarf_Off* next_offset, Dwarf_CFI_Entry* entry) {
  static const auto fn = real(&dwarf_next_cfi, "dwarf_next_cfi");
  return fn(e_ident, data, eh_frame_p, offset, next_offset, entry);
}
ssize_t dwelf_elf_gnu_build_id(Elf* elf, const void** build_idp) {
  static const auto fn = real(&dwelf_elf_gnu_build_id, "dwelf_elf_gnu_build_id");
  return fn(elf, build_idp);
}
Dwfl_Module* dwfl_addrmodule(Dwfl* dwfl, Dwarf_Addr address) {
  static const auto fn = real(&dwfl_addrmodule, "dwfl_addrmodule");
  return fn(dwfl, address);
}
Dwfl* dwfl_begin(const Dwfl_Callbacks* callbacks) {
  static const auto fn = real(&dwfl_begin, "dwfl_begin");
  return fn(callbacks);
}
void dwfl_end(Dwfl* dwfl) {
  static const auto fn = real(&dwfl_end, "dwfl_end");
  fn(dwfl);
}
const char* dwfl_errmsg(int err) {
  static const auto fn = real(&dwfl_errmsg, "dwfl_errmsg");
  return fn(err);
}
ptrdiff_t dwfl_getmodules(Dwfl* dwfl, int (*callback)(Dwfl_Module*, void**, const char*, Dwarf_Addr, void*),
                          void* arg, ptrdiff_t offset) {
  static const auto fn = real(&dwfl_getmodules, "dwfl_getmodules");
  return fn(dwfl, callback, arg, offset);
}
const char* dwfl_lineinfo(Dwfl_Line* line, Dwarf_Addr* addr, int* linep, int* colp, Dwarf_Word* mtime,
                          Dwarf_Word* length) {
  static const auto fn = real(&dwfl_lineinfo, "dwfl_lineinfo");
  return fn(line, addr, linep, colp, mtime, length);
}
int dwfl_linux_proc_find_elf(Dwfl_Module* mod, void** userdata, const char* module_name, Dwarf_Addr base,
                             char** file_name, Elf** elfp) {
  static const auto fn = real(&dwfl_linux_proc_find_elf, "dwfl_linux_proc_find_elf");
  return fn(mod, userdata, module_name, base, file_name, elfp);
}
int dwfl_linux_proc_report(Dwfl* dwfl, pid_t pid) {
  static const auto fn = real(&dwfl_linux_proc_report, "dwfl_linux_proc_report");
  return fn(dwfl, pid);
}
const char* dwfl_module_addrinfo(Dwfl_Module* mod, GElf_Addr address, GElf_Off* offset, GElf_Sym* sym,
                                 GElf_Word* shndxp, Elf** elfp, Dwarf_Addr* bias) {
  static const auto fn = real(&dwfl_module_addrinfo, "dwfl_module_addrinfo");
  return fn(mod, address, offset, sym, shndxp, elfp, bias);
}
Elf* dwfl_module_getelf(Dwfl_Module* mod, GElf_Addr* bias) {
  static const auto fn = real(&dwfl_module_getelf, "dwfl_module_getelf");
  return fn(mod, bias);
}
Dwfl_Line* dwfl_module_getsrc(Dwfl_Module* mod, Dwarf_Addr addr) {
  static const auto fn = real(&dwfl_module_getsrc, "dwfl_module_getsrc");
  return fn(mod, addr);
}
const char* dwfl_module_info(Dwfl_Module* mod, void*** userdata, Dwarf_Addr* start, Dwarf_Addr* end,
                             Dwarf_Addr* dwbias, Dwarf_Addr* symbias, const char** mainfile,
                             const char** debugfile) {
  static const auto fn = real(&dwfl_module_info, "dwfl_module_info");
  return fn(mod, userdata, start, end, dwbias, symbias, mainfile, debugfile);
}
void dwfl_report_begin(Dwfl* dwfl) {
  static const auto fn = real(&dwfl_report_begin, "dwfl_report_begin");
  fn(dwfl);
}
int dwfl_report_end(Dwfl* dwfl, int (*removed)(Dwfl_Module*, void*, const char*, Dwarf_Addr, void*), void* arg) {
  static const auto fn = real(&dwfl_report_end, "dwfl_report_end");
  return fn(dwfl, removed, arg);
}
int dwfl_standard_find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                                 const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                                 char** debuginfo_file_name) {
  static const auto fn = real(&dwfl_standard_find_debuginfo, "dwfl_standard_find_debuginfo");
  return fn(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}
int dwfl_build_id_find_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                                 const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                                 char** debuginfo_file_name) {
  static const auto fn = real(&dwfl_build_id_find_debuginfo, "dwfl_build_id_find_debuginfo");
  return fn(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc, debuginfo_file_name);
}
Elf* elf_begin(int fildes, Elf_Cmd cmd, Elf* ref) {
  static const auto fn = real(&elf_begin, "elf_begin");
  return fn(fildes, cmd, ref);
}
int elf_end(Elf* elf) {
  static const auto fn = real(&elf_end, "elf_end");
  return fn(elf);
}
Elf_Data* elf_getdata(Elf_Scn* scn, Elf_Data* data) {
  static const auto fn = real(&elf_getdata, "elf_getdata");
  return fn(scn, data);
}
char* elf_getident(Elf* elf, size_t* nbytes) {
  static const auto fn = real(&elf_getident, "elf_getident");
  return fn(elf, nbytes);
}
int elf_getshdrstrndx(Elf* elf, size_t* dst) {
  static const auto fn = real(&elf_getshdrstrndx, "elf_getshdrstrndx");
  return fn(elf, dst);
}
Elf_Scn* elf_nextscn(Elf* elf, Elf_Scn* scn) {
  static const auto fn = real(&elf_nextscn, "elf_nextscn");
  return fn(elf, scn);
}
char* elf_strptr(Elf* elf, size_t index, size_t offset) {
  static const auto fn = real(&elf_strptr, "elf_strptr");
  return fn(elf, index, offset);
}
unsigned int elf_version(unsigned int version) {
  static const auto fn = real(&elf_version, "elf_version");
  return fn(version);
}
GElf_Shdr* gelf_getshdr(Elf_Scn* scn, GElf_Shdr* dst) {
  static const auto fn = real(&gelf_getshdr, "gelf_getshdr");
  return fn(scn, dst);
}

}  // extern "C"
