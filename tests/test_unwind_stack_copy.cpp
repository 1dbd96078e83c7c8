// StackCopyUnwinder on this process's own samples (user registers and stack copies, as selfperf record -p
// --call-graph dwarf takes them from another process): the frames name the callers; what cannot be unwound
// keeps its ip and is counted with the reason.
#include <doctest.h>

#include <asm/perf_regs.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "selfperf/perf_data_writer.hpp"
#include "selfperf/sampling_event.hpp"
#include "selfperf/symbolizer.hpp"
#include "test_support.hpp"
#include "unwinding/unwind_stack_copy.hpp"

using namespace selfperf;

namespace {

volatile std::uint64_t spin_sink;

[[gnu::noipa]] void stack_copy_leaf() {
  std::uint64_t x = 1;
  for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + 1;
  spin_sink = x;
}
[[gnu::noipa]] void stack_copy_caller() {
  stack_copy_leaf();
  spin_sink = spin_sink + 1;  // a call, not a jump
}
[[gnu::noipa]] void stack_copy_outer(std::uint64_t ns) {
  const std::uint64_t start = test::thread_cpu_ns();
  while (test::thread_cpu_ns() - start < ns) stack_copy_caller();
}

// Code of a library loaded after the unwinder read this process's maps: libcrypt's SHA-512 crypt (libcrypt1
// is in every Debian; nothing this test links loads it), from dlopen.
using Crypt = char* (*)(const char*, const char*);
Crypt crypt_fn = nullptr;
[[gnu::noipa]] void stack_copy_in_library(std::uint64_t ns) {
  const std::uint64_t start = test::thread_cpu_ns();
  while (test::thread_cpu_ns() - start < ns) {
    const char* hash = crypt_fn("password", "$6$rounds=20000$saltsalt$");
    spin_sink = hash != nullptr ? static_cast<unsigned char>(hash[0]) : 0;
  }
}

// A sample as the kernel writes it, with the bytes its spans point into.
struct OwnedSample {
  SampleRecord record;
  std::vector<std::uint64_t> regs;
  std::vector<std::byte> stack;
};

// Samples of a new thread running `work` (stack_copy_outer by default), with registers and 16 KiB stack
// copies. A thread of its own: its stack from `work` to clone3 fits in the copy whatever a sanitizer adds to
// doctest's frames (under ASan the main thread's from here to main does not).
std::vector<OwnedSample> sample_own_stack(std::uint64_t& regs_mask, void (*work)(std::uint64_t) = stack_copy_outer) {
  CallchainSamplingOptions options;
  options.period = 1000000;  // ns of task-clock: ~30 samples, which the ring holds until they are read
  options.kernel_frames = KernelFrames::exclude;
  perf_event_attr attr = callchain_sampling_attr(parse_event("task-clock:u"), options);
  detail::sample_stack_copies(attr, 16384);
  regs_mask = attr.sample_regs_user;
  std::vector<OwnedSample> out;
  std::uint64_t undecodable = 0;
  std::thread([&] {
    SamplingEvent event(attr, "task-clock:u", 0, 128);
    event.enable();
    work(30'000'000);
    event.disable();
    event.read_samples([&](const SampleRecord& s) {
      OwnedSample o{s, {s.regs_user.begin(), s.regs_user.end()}, {s.stack_user.begin(), s.stack_user.end()}};
      o.record.regs_user = o.regs;
      o.record.stack_user = o.stack;
      out.push_back(std::move(o));
    });
    undecodable = event.undecodable();
  }).join();
  CHECK(undecodable == 0);
  return out;
}

// This process's executable mappings, as selfperf record -p hands a process's to the unwinder at the attach;
// those whose path contains `only`, when given.
std::vector<detail::CodeMapping> own_maps(const char* only = nullptr) {
  std::vector<detail::CodeMapping> out;
  for (const auto& m : read_self_executable_maps())
    if (only == nullptr || m.filename.find(only) != std::string::npos)
      out.push_back({m.start, m.len, m.pgoff, m.filename});
  return out;
}

bool calls(const std::vector<std::string>& names, std::initializer_list<const char*> leaf_first) {
  auto it = names.begin();
  for (const char* want : leaf_first) {
    it = std::find_if(it, names.end(), [&](const std::string& n) { return n.find(want) != std::string::npos; });
    if (it == names.end()) return false;
    ++it;
  }
  return true;
}

}  // namespace

TEST_CASE("stack copies of a thread unwind to its callers, to the outermost frame") {
  std::uint64_t mask = 0;
  std::vector<OwnedSample> samples = sample_own_stack(mask);
  REQUIRE(samples.size() > 10);
  detail::StackCopyUnwinder unwinder;
  unwinder.add_process(::getpid(), own_maps());
  Symbolizer symbols;
  std::size_t in_leaf = 0, with_callers = 0;
  for (const auto& s : samples) {
    CHECK(s.record.stack_user_dyn_size > 0);
    const auto frames = unwinder.unwind(s.record, mask);
    REQUIRE(!frames.empty());
    CHECK(frames[0] == s.record.ip);
    const auto names = symbols.stack_names(frames);
    if (names[0].find("stack_copy_leaf") == std::string::npos) continue;
    ++in_leaf;
    if (calls(names, {"stack_copy_leaf", "stack_copy_caller", "stack_copy_outer", "start_thread"})) ++with_callers;
  }
  const auto& stats = unwinder.stats();
  MESSAGE(samples.size() << " samples, " << in_leaf << " in the leaf, " << with_callers << " with its callers; "
                         << stats.full << " full, " << stats.partial << " partial (" << stats.last_partial << "), "
                         << stats.ip_only << " ip only (" << stats.last_ip_only << ")");
  REQUIRE(in_leaf > 0);
  CHECK(with_callers == in_leaf);
  CHECK(stats.full + stats.partial + stats.ip_only == samples.size());
  CHECK(stats.full * 10 >= samples.size() * 9);
}

TEST_CASE("a sample that cannot be unwound keeps its ip, and is counted with the reason") {
  std::uint64_t mask = 0;
  std::vector<OwnedSample> samples = sample_own_stack(mask);
  REQUIRE(!samples.empty());
  const SampleRecord real = samples.back().record;
  detail::StackCopyUnwinder unwinder;
  unwinder.add_process(::getpid(), own_maps());

  SUBCASE("no registers (a kernel thread's sample)") {
    SampleRecord s = real;
    s.regs_user_abi = PERF_SAMPLE_REGS_ABI_NONE;
    s.regs_user = {};
    const auto frames = unwinder.unwind(s, mask);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0] == real.ip);
    CHECK(unwinder.stats().ip_only == 1);
    CHECK(unwinder.stats().last_ip_only.find("no user registers") != std::string::npos);
  }
  SUBCASE("registers sampled without the sp") {
#if defined(__x86_64__)
    const std::uint64_t sp = std::uint64_t{1} << PERF_REG_X86_SP;
#elif defined(__aarch64__)
    const std::uint64_t sp = std::uint64_t{1} << PERF_REG_ARM64_SP;
#endif
    const auto frames = unwinder.unwind(real, mask & ~sp);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0] == real.ip);
    CHECK(unwinder.stats().last_ip_only.find("lack the pc or the sp") != std::string::npos);
  }
  SUBCASE("a stack copy too short for the callers") {
    SampleRecord s = real;  // as if 16 bytes had been asked for, and copied
    s.stack_user = s.stack_user.first(16);
    s.stack_user_dyn_size = 16;
    const auto frames = unwinder.unwind(s, mask);
    CHECK(!frames.empty());
    CHECK(frames[0] == real.ip);
    CHECK(unwinder.stats().full == 0);
    const std::string why = unwinder.stats().ip_only ? unwinder.stats().last_ip_only : unwinder.stats().last_partial;
    CHECK(why.find("beyond the 16-byte stack copy") != std::string::npos);
    // The same sample with its whole copy: unwound fully.
    CHECK(unwinder.unwind(real, mask).size() > frames.size());
    CHECK_MESSAGE(unwinder.stats().full == 1, unwinder.stats().last_partial, unwinder.stats().last_ip_only);
  }
  SUBCASE("a process never attached: its ip, and the reason says so") {
    SampleRecord s = real;
    s.pid = 0x3fffffff;  // above PID_MAX_LIMIT: no process has it
    const auto frames = unwinder.unwind(s, mask);
    REQUIRE(frames.size() == 1);
    CHECK(unwinder.stats().last_ip_only.find("process 1073741823 was not attached") != std::string::npos);
  }
  SUBCASE("after an exec, until the new image's mappings come: its ip") {
    unwinder.exec(::getpid());
    REQUIRE(unwinder.unwind(real, mask).size() == 1);
    CHECK(unwinder.stats().last_ip_only.find("no executable mapping of process") != std::string::npos);
    for (auto& m : own_maps()) unwinder.add_mapping(::getpid(), std::move(m));
    CHECK(unwinder.unwind(real, mask).size() > 1);
    CHECK(unwinder.stats().full == 1);
  }
}

TEST_CASE("code mapped after the attach is unwound once its mapping is added; a newer mapping hides an older") {
  detail::StackCopyUnwinder unwinder;
  unwinder.add_process(::getpid(), own_maps());  // before the library is loaded
  void* library = ::dlopen("libcrypt.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    MESSAGE("skipped: no libcrypt.so.1 to load (" << ::dlerror() << ")");
    return;
  }
  crypt_fn = reinterpret_cast<Crypt>(::dlsym(library, "crypt"));
  REQUIRE(reinterpret_cast<void*>(crypt_fn) != nullptr);
  std::uint64_t mask = 0;
  std::vector<OwnedSample> samples = sample_own_stack(mask, stack_copy_in_library);
  Symbolizer symbols;  // knows the library
  std::vector<const OwnedSample*> in_library;
  for (const auto& s : samples)
    if (symbols.symbolize(s.record.ip).module.find("libcrypt") != std::string::npos) in_library.push_back(&s);
  MESSAGE(samples.size() << " samples, " << in_library.size() << " in libcrypt");
  REQUIRE(in_library.size() > 5);

  // With the maps of before the dlopen, a walk from libcrypt has no module to start from: ip only.
  const auto before = unwinder.unwind(in_library[0]->record, mask);
  CHECK(before.size() == 1);
  CHECK(unwinder.stats().ip_only == 1);
  // Its mappings come as MMAP2 records would (selfperf record adds each); before them, an older mapping of
  // another file at the same addresses (as if one library had been unloaded there), which they hide.
  const std::vector<detail::CodeMapping> crypt_maps = own_maps("libcrypt");
  REQUIRE(!crypt_maps.empty());
  detail::CodeMapping older = crypt_maps[0];
  older.path = "/bin/bash";  // another ELF file, larger than libcrypt, which this process has not mapped
  older.pgoff = 0;
  unwinder.add_mapping(::getpid(), older);
  for (const auto& m : crypt_maps) unwinder.add_mapping(::getpid(), m);
  std::size_t with_caller = 0;
  for (const OwnedSample* s : in_library) {
    const auto frames = unwinder.unwind(s->record, mask);
    if (calls(symbols.stack_names(frames), {"crypt", "stack_copy_in_library", "start_thread"})) ++with_caller;
  }
  MESSAGE(with_caller << " of " << in_library.size() << " reach crypt, stack_copy_in_library and start_thread; "
                      << unwinder.stats().full << " full, last partial: " << unwinder.stats().last_partial
                      << ", last ip-only: " << unwinder.stats().last_ip_only);
  CHECK(with_caller * 10 >= in_library.size() * 9);
  ::dlclose(library);
}

TEST_CASE("the registers sampled include the pc and the stack pointer's") {
  const std::uint64_t mask = detail::stack_copy_regs_mask();
#if defined(__x86_64__)
  CHECK(mask == 0xff01ffULL);  // ax..ip (0-8) and r8-r15 (16-23): no flags nor segment registers
#elif defined(__aarch64__)
  CHECK(mask == (std::uint64_t{1} << 33) - 1);  // x0-x30, sp, pc
#endif
}
