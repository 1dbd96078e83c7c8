// Symbolizer over elfutils libdwfl: module list from /proc/self/maps, names from .symtab/.dynsym, lines from DWARF.
#include "selfperf/symbolizer.hpp"

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>

#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "output/debuginfo_lookup.hpp"
#include "output/unknown_frame.hpp"
#include "selfperf/error.hpp"

namespace selfperf {
namespace {

char* debuginfo_path = nullptr;  // libdwfl's default search path (.debug, /usr/lib/debug)

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = detail::find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = &debuginfo_path,
};

Dwfl* as_dwfl(void* p) { return static_cast<Dwfl*>(p); }

}  // namespace

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) return name;
  std::string result(out);
  std::free(out);
  return result;
}

std::string SymbolInfo::display_name() const {
  if (!function.empty()) return function;
  return detail::unknown_frame_name(module, fde_start);
}

void Symbolizer::DwflDeleter::operator()(void* dwfl) const noexcept { detail::end_session(as_dwfl(dwfl)); }

Symbolizer::Symbolizer() { report(); }

Symbolizer::~Symbolizer() = default;

void Symbolizer::report() {
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  if (dwfl == nullptr)
    throw Error(std::string("symbolizer: libdwfl could not start: ") + dwfl_errmsg(-1));
  dwfl_report_begin(dwfl);
  int rc = dwfl_linux_proc_report(dwfl, ::getpid());
  dwfl_report_end(dwfl, nullptr, nullptr);
  if (rc != 0) {
    dwfl_end(dwfl);
    throw Error("symbolizer: cannot read this process's mappings from /proc/self/maps (" +
                std::string(rc > 0 ? std::strerror(rc) : dwfl_errmsg(-1)) + "); is /proc mounted?",
                rc > 0 ? rc : 0);
  }
  dwfl_.reset(dwfl);
}

void Symbolizer::refresh() {
  std::lock_guard lock(mu_);
  report();
  cache_.clear();
  name_cache_.clear();
  refreshed_on_miss_ = false;
}

SymbolInfo Symbolizer::lookup(std::uint64_t pc, bool with_source) {
  SymbolInfo info;
  Dwfl* dwfl = as_dwfl(dwfl_.get());
  Dwfl_Module* mod = dwfl_addrmodule(dwfl, pc);
  if (mod == nullptr && !refreshed_on_miss_) {
    // Probably mapped after we reported the modules (dlopen): read the mappings again, once.
    refreshed_on_miss_ = true;
    report();
    cache_.clear();
    name_cache_.clear();
    dwfl = as_dwfl(dwfl_.get());
    mod = dwfl_addrmodule(dwfl, pc);
  }
  if (mod == nullptr) return info;
  const char* mainfile = nullptr;
  const char* modname = dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &mainfile, nullptr);
  info.module = mainfile ? mainfile : (modname ? modname : "");
  GElf_Off offset = 0;
  GElf_Sym sym{};
  const char* name = dwfl_module_addrinfo(mod, pc, &offset, &sym, nullptr, nullptr, nullptr);
  if (name != nullptr) {
    info.function = detail::frame_symbol_name(name);
    info.offset = offset;
  } else {
    // The ELF's own address, as perf script and objdump print it: not pc - the module's lowest mapping, which
    // is the file offset (0x4e3eb where perf shows 0x44e3eb in a non-PIE executable).
    Dwarf_Addr bias = 0;
    if (dwfl_module_getelf(mod, &bias) != nullptr && pc >= bias) info.offset = pc - bias;
    info.fde_start = detail::fde_start(mod, pc);
  }
  if (!with_source) return info;
  if (Dwfl_Line* line = dwfl_module_getsrc(mod, pc)) {
    int lineno = 0;
    if (const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
      info.file = src;
      info.line = lineno;
    }
  }
  return info;
}

SymbolInfo Symbolizer::symbolize(std::uint64_t pc) {
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(pc); it != cache_.end()) return it->second;
  auto info = lookup(pc, true);
  cache_.emplace(pc, info);
  return info;
}

std::vector<std::string> Symbolizer::stack_names(std::span<const std::uint64_t> frames) {
  std::vector<std::string> names;
  names.reserve(frames.size());
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    std::uint64_t pc = (i == 0 || frames[i] == 0) ? frames[i] : frames[i] - 1;
    auto it = name_cache_.find(pc);
    if (it == name_cache_.end()) it = name_cache_.emplace(pc, lookup(pc, false).display_name()).first;
    names.push_back(it->second);
  }
  return names;
}

}  // namespace selfperf
