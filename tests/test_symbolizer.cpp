// Symbolizer: names from .symtab (internal functions dladdr cannot see), demangling, file:line, libraries
// loaded later, and concurrent use.
#include <doctest.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "selfperf/symbolizer.hpp"

using namespace selfperf;

namespace {

int call_line = 0;

[[gnu::noinline]] std::uint64_t return_address() {
  return reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
}

// Internal linkage: only .symtab names it, the dynamic symbol table does not.
[[gnu::noinline]] std::uint64_t hidden_caller_for_symbolizer_test() {
  call_line = __LINE__ + 1;
  std::uint64_t ra = return_address();
  asm volatile("" ::: "memory");  // keep the call from being the function's last instruction
  return ra;
}

[[gnu::noinline]] std::vector<std::string> outer_frame_for_stack_test(Symbolizer& s) {
  void* raw[32];
  int n = ::backtrace(raw, 32);
  std::vector<std::uint64_t> frames;
  for (int i = 0; i < n; ++i) frames.push_back(reinterpret_cast<std::uintptr_t>(raw[i]));
  auto names = s.stack_names(frames);
  asm volatile("" ::: "memory");
  return names;
}

}  // namespace

TEST_CASE("names an internal function from .symtab with its source line") {
  Symbolizer s;
  const std::uint64_t ra = hidden_caller_for_symbolizer_test();
  Dl_info dl{};
  const bool dladdr_named = ::dladdr(reinterpret_cast<void*>(ra), &dl) != 0 && dl.dli_sname != nullptr;
  CHECK_FALSE(dladdr_named);  // what makes .symtab necessary

  auto info = s.symbolize(ra - 1);  // a return address: the call is the byte before
  CHECK(info.function.find("hidden_caller_for_symbolizer_test") != std::string::npos);
  CHECK(info.function.find("(anonymous namespace)::") == 0);  // demangled
  CHECK(info.module == std::filesystem::read_symlink("/proc/self/exe").string());
  CHECK(info.offset > 0);
  CHECK(std::filesystem::path(info.file).filename() == "test_symbolizer.cpp");
  CHECK(info.line >= call_line - 1);
  CHECK(info.line <= call_line + 1);
  CHECK(info.display_name(ra - 1) == info.function);
}

TEST_CASE("names libc functions and says when nothing covers an address") {
  Symbolizer s;
  auto info = s.symbolize(reinterpret_cast<std::uintptr_t>(&::getpid));
  CHECK(info.function.find("getpid") != std::string::npos);
  CHECK(info.function.find('@') == std::string::npos);  // symbol versions stripped
  CHECK(info.module.find("libc") != std::string::npos);
  CHECK(info.offset == 0);

  auto none = s.symbolize(0x10);
  CHECK(none.function.empty());
  CHECK(none.module.empty());
  CHECK(none.display_name(0x10) == "[unknown]");  // perf's name for an address outside every mapping
}

TEST_CASE("a frame without a symbol is named by its function's FDE, or by its module as perf's tools do") {
  SymbolInfo in_fde;
  in_fde.module = "/usr/bin/gzip";
  in_fde.offset = 0x4330;
  in_fde.fde_start = 0x4290;
  CHECK(in_fde.display_name() == "gzip+0x4290");
  SymbolInfo other_address = in_fde;
  other_address.offset = 0x4313;  // same function: same box
  CHECK(other_address.display_name() == in_fde.display_name());
  SymbolInfo no_fde;
  no_fde.module = "/usr/bin/gzip";
  no_fde.offset = 0x4330;
  CHECK(no_fde.display_name() == "[gzip]");  // stackcollapse-perf's name for perf's "[unknown] (/usr/bin/gzip)"
}

TEST_CASE("stack_names follows a stack leaf first") {
  Symbolizer s;
  auto names = outer_frame_for_stack_test(s);
  REQUIRE(names.size() >= 3);
  // Leaf first: our function, then (further out) the test body. Under ASan backtrace() is intercepted, so
  // the interceptor may come before our function.
  std::size_t ours = names.size(), body = names.size();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (ours == names.size() && names[i].find("outer_frame_for_stack_test") != std::string::npos) ours = i;
    if (body == names.size() && names[i].find("DOCTEST_ANON_FUNC") != std::string::npos) body = i;
  }
  CHECK(ours <= 1);
  const bool test_body_seen = body < names.size() && body > ours;
  CHECK(test_body_seen);
}

TEST_CASE("stack_names gives each frame the name symbolize() gives it, without reading source lines") {
  // stack_names skips file:line (a module's whole DWARF: ~0.3 s of a profiled python3's exit), so its names
  // come from another lookup than symbolize()'s: they must still agree, frame for frame.
  void* raw[32];
  const int n = ::backtrace(raw, 32);
  REQUIRE(n >= 3);
  Symbolizer s;
  std::vector<std::uint64_t> frames;
  for (int i = 0; i < n; ++i) frames.push_back(reinterpret_cast<std::uintptr_t>(raw[i]));
  const auto by_stack = s.stack_names(frames);
  REQUIRE(by_stack.size() == frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) {
    const std::uint64_t pc = i == 0 ? frames[i] : frames[i] - 1;
    const SymbolInfo info = s.symbolize(pc);
    INFO("frame " << i);
    CHECK(by_stack[i] == info.display_name());
  }
  // symbolize() still reads the source line that stack_names skipped.
  const std::uint64_t ra = hidden_caller_for_symbolizer_test();
  CHECK(s.stack_names(std::vector<std::uint64_t>{0, ra})[1] == s.symbolize(ra - 1).display_name());
  CHECK(s.symbolize(ra - 1).line == call_line);
}

TEST_CASE("demangles C++ names and leaves others alone") {
  CHECK(demangle("_ZN8selfperf10SymbolizerD1Ev") == "selfperf::Symbolizer::~Symbolizer()");
  CHECK(demangle("_Z3fooi") == "foo(int)");
  CHECK(demangle("main") == "main");
  CHECK(demangle("_Znot valid") == "_Znot valid");
  CHECK(demangle(nullptr).empty());
}

TEST_CASE("finds libraries loaded after it was created") {
  Symbolizer s;
  void* lib = ::dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    MESSAGE("skipped: libzstd.so.1 not installed");
    return;
  }
  void* fn = ::dlsym(lib, "ZSTD_versionNumber");
  REQUIRE(fn != nullptr);
  auto info = s.symbolize(reinterpret_cast<std::uintptr_t>(fn));
  CHECK(info.function == "ZSTD_versionNumber");
  CHECK(info.module.find("libzstd") != std::string::npos);
  ::dlclose(lib);
}

TEST_CASE("is safe to share between threads and answers from its cache consistently") {
  Symbolizer s;
  const std::uint64_t ra = hidden_caller_for_symbolizer_test() - 1;
  const auto expected = s.symbolize(ra).function;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (s.symbolize(ra).function != expected) ++mismatches[static_cast<std::size_t>(t)];
        s.symbolize(reinterpret_cast<std::uintptr_t>(&::getpid) + static_cast<std::uint64_t>(i % 7));
      }
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) CHECK(m == 0);
  s.refresh();
  CHECK(s.symbolize(ra).function == expected);
}
