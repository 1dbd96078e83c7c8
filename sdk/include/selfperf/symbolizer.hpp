#pragma once
// Symbolizer: this process's instruction addresses → function names (ELF .symtab as well as dynamic symbols),
// demangled, with file:line where DWARF line info exists. Built on elfutils libdwfl; results are cached.
// Not async-signal-safe: symbolize after draining samples, never inside a signal handler.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace selfperf {

struct SymbolInfo {
  std::string function;  // demangled; empty when no symbol covers the address
  std::string module;    // path of the mapped file (or [vdso])
  std::string file;      // source file; empty without debug info
  int line = 0;
  std::uint64_t offset = 0;  // address - symbol start; without a symbol the ELF address (as perf script shows it)
  // Without a symbol: where the function's .eh_frame FDE starts (ELF address); empty when no FDE covers it.
  std::optional<std::uint64_t> fde_start;

  // A name flame graphs can use, the same for every address of one function: "function"; without a symbol
  // "module+0x<FDE start>" (ELF address, as perf prints it), "[module]" where no FDE covers it (as
  // stackcollapse-perf names perf's "[unknown] (module)"), "[unknown]" outside every module (as perf does).
  std::string display_name() const;
  // The same; the address is no longer part of the name (kept for source compatibility).
  std::string display_name(std::uint64_t /*address*/) const { return display_name(); }
};

// abi::__cxa_demangle of a mangled C++ name; the name unchanged when it is not one.
std::string demangle(const char* name);

class Symbolizer {
 public:
  // Reports the modules mapped into this process now; later dlopen()s are picked up on the first miss.
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // The symbol containing `pc` exactly. Thread-safe.
  SymbolInfo symbolize(std::uint64_t pc);
  // Names of a stack, leaf first as sampled: frames[0] is an IP, the rest return addresses, which are looked
  // up one byte earlier so a call at the end of a function is not attributed to the next one.
  std::vector<std::string> stack_names(std::span<const std::uint64_t> frames_leaf_first);

  // Re-reads the process's mappings (after dlopen/dlclose) and drops the cache.
  void refresh();

 private:
  // with_source: file and line too. They cost the module's DWARF (libpython's 9 MB of .debug_info: ~0.3 s of
  // a profiled python3's exit), which names do not need.
  SymbolInfo lookup(std::uint64_t pc, bool with_source);
  void report();

  struct DwflDeleter {
    void operator()(void* dwfl) const noexcept;
  };
  std::mutex mu_;
  std::unique_ptr<void, DwflDeleter> dwfl_;
  std::unordered_map<std::uint64_t, SymbolInfo> cache_;
  std::unordered_map<std::uint64_t, std::string> name_cache_;  // stack_names: without file and line
  bool refreshed_on_miss_ = false;
};

}  // namespace selfperf
