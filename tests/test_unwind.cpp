// Unwinders on synthetic stacks (every check that stops a walk) and on real signal contexts.
#include <doctest.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>
#include <ios>
#include <string_view>
#include <vector>

#include <link.h>
#include <pthread.h>

#include "sampler_workload.hpp"
#include "selfperf/unwind.hpp"
#include "test_support.hpp"

using namespace selfperf;
using selfperf_test::CodeRange;

namespace {

// A fake stack: frame records (saved rbp, return address) placed at chosen word indexes.
struct FakeStack {
  alignas(16) std::array<std::uint64_t, 64> words{};
  std::uint64_t at(std::size_t i) const { return reinterpret_cast<std::uint64_t>(&words[i]); }
  void frame(std::size_t i, std::uint64_t next_fp, std::uint64_t ret) {
    words[i] = next_fp;
    words[i + 1] = ret;
  }
  StackBounds bounds() const { return {at(0), at(0) + sizeof words}; }
};

// Instruction bytes for IP: a body instruction (nop), `push %rbp`, `mov %rsp,%rbp`.
const unsigned char kNop[] = {0x90, 0x90, 0x90, 0x90};
const unsigned char kPush[] = {0x55, 0x90, 0x90, 0x90};
const unsigned char kMovRspRbp[] = {0x48, 0x89, 0xe5, 0x90};
std::uint64_t code(const unsigned char* bytes) { return reinterpret_cast<std::uint64_t>(bytes); }
int g_not_on_stack = 0;

}  // namespace

TEST_CASE("frame-pointer walk follows a well-formed chain to its end") {
  FakeStack s;
  s.frame(10, s.at(20), 0x1111);
  s.frame(20, s.at(30), 0x2222);
  s.frame(30, 0, 0x3333);  // outermost: next fp 0 lies below the floor
  std::array<std::uint64_t, 16> out{};
  std::size_t n = unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out);
  REQUIRE(n == 4);
  CHECK(out[0] == code(kNop));
  CHECK(out[1] == 0x1111);
  CHECK(out[2] == 0x2222);
  CHECK(out[3] == 0x3333);
}

TEST_CASE("frame-pointer walk stops, without faulting, at loops, bad alignment and frames off the stack") {
  std::array<std::uint64_t, 16> out{};
  SUBCASE("a frame pointing back down is a loop") {
    FakeStack s;
    s.frame(10, s.at(20), 0x1111);
    s.frame(20, s.at(10), 0x2222);
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 3);
  }
  SUBCASE("a frame pointing at itself") {
    FakeStack s;
    s.frame(10, s.at(10), 0x1111);
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 2);
  }
  SUBCASE("misaligned frame pointer") {
    FakeStack s;
    s.frame(10, s.at(20) + 3, 0x1111);
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 2);
  }
  SUBCASE("frame pointer beyond the stack (unmapped address never read)") {
    FakeStack s;
    s.frame(10, 0x10, 0x1111);
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 2);
    s.frame(10, s.at(62), 0x1111);  // the record would straddle the top of the stack
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 2);
  }
  SUBCASE("frame pointer below the stack pointer") {
    FakeStack s;
    s.frame(4, s.at(20), 0x1111);
    CHECK(unwind_frame_pointer({code(kNop), s.at(8), s.at(4)}, s.bounds(), out) == 1);
  }
  SUBCASE("stack pointer on another stack: the leaf alone") {
    FakeStack s;
    s.frame(10, s.at(20), 0x1111);
    CHECK(unwind_frame_pointer({code(kNop), 0x1000, s.at(10)}, s.bounds(), out) == 1);
  }
  SUBCASE("zero return address ends the walk") {
    FakeStack s;
    s.frame(10, s.at(20), 0);
    CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(10)}, s.bounds(), out) == 1);
  }
}

TEST_CASE("frame-pointer walk is bounded by the output size") {
  FakeStack s;
  for (std::size_t i = 4; i + 4 < s.words.size(); i += 2) s.frame(i, s.at(i + 2), 0x1000 + i);
  std::array<std::uint64_t, 5> out{};
  CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(4)}, s.bounds(), out) == 5);
  CHECK(unwind_frame_pointer({code(kNop), s.at(2), s.at(4)}, s.bounds(), std::span<std::uint64_t>{}) == 0);
}

// The rule the walk must follow, one frame at a time (the library's loop predicts frames in runs of equal size
// and must give exactly this).
std::size_t reference_walk(std::uint64_t fp, std::uint64_t sp, const StackBounds& stack,
                           std::span<std::uint64_t> out) {
  std::size_t n = 0;
  std::uint64_t floor = sp;
  while (n < out.size() && fp >= floor && fp + 16 <= stack.high && fp % 8 == 0) {
    std::uint64_t next, ret;
    std::memcpy(&next, reinterpret_cast<const void*>(fp), 8);
    std::memcpy(&ret, reinterpret_cast<const void*>(fp + 8), 8);
    if (ret == 0) break;
    out[n++] = ret;
    floor = fp + 16;
    fp = next;
  }
  return n;
}

TEST_CASE("frame-pointer walk equals the one-frame-at-a-time rule on random stacks with runs of equal frames") {
  // Runs of equal frames (recursion) of random length and size, broken by frames of other sizes and by
  // every fault the walk must stop at: a loop, a frame a few bytes up, misalignment, a jump past the top,
  // a zero return address. The output is sized at random so the walk also ends by filling it, in a run.
  alignas(16) static std::array<std::uint64_t, 2048> words;
  // An address by word index; one-past-the-top ones are needed for frames that leave the stack.
  auto at = [&](std::size_t i) { return reinterpret_cast<std::uint64_t>(words.data()) + 8 * i; };
  const StackBounds bounds{at(0), at(0) + sizeof words};
  selfperf::test::XorShift rng(0x9e3779b97f4a7c15u);
  auto random = [&](std::uint64_t below) { return rng.below(below); };
  std::array<std::uint64_t, 400> expected{};
  std::array<std::uint64_t, 402> got{};  // the leaf, the frames, and one word that must stay untouched
  std::size_t longest = 0, stopped_early = 0;
  for (int round = 0; round < 20000; ++round) {
    words.fill(0);
    std::size_t i = 2 + random(4);
    const std::size_t first = i;
    std::size_t frames = 0;
    while (i + 2 < words.size()) {
      std::size_t run = 1 + random(4) * random(40), size = 2 * (1 + random(5));  // size in words, >= 16 bytes
      for (std::size_t k = 0; k < run && i + 2 < words.size(); ++k, ++frames) {
        std::size_t next = i + size;
        words[i] = at(next);
        words[i + 1] = 0x400000 + frames;
        if (random(400) == 0) {
          switch (random(5)) {
            case 0: words[i] = at(i - std::min<std::size_t>(i, 2 * random(4))); break;  // loop back or in place
            case 1: words[i] = at(i + 1); break;                                          // only 8 bytes up
            case 2: words[i] = at(next) + 1 + random(7); break;                           // misaligned
            case 3: words[i] = at(words.size() - 1 - random(2)); break;                   // straddles the top
            case 4: words[i + 1] = 0; break;                                              // zero return address
          }
        }
        i = next;
      }
    }
    std::size_t cap = random(3) == 0 ? 1 + random(expected.size()) : expected.size();
    std::size_t want = reference_walk(at(first), at(1), bounds, std::span(expected).first(cap));
    got.fill(0xdead);
    std::size_t n = unwind_frame_pointer({code(kNop), at(1), at(first)}, bounds, std::span(got).first(cap + 1));
    REQUIRE(n == want + 1);
    CHECK(got[0] == code(kNop));
    REQUIRE(std::equal(expected.begin(), expected.begin() + want, got.begin() + 1));
    CHECK(got[n] == 0xdead);  // nothing written past the frames counted
    longest = std::max(longest, want);
    stopped_early += want < 20 ? 1 : 0;
  }
  CHECK(longest >= 300);   // the runs reached deep stacks...
  CHECK(stopped_early > 50);  // ...and the faults stopped some walks early
}

#if defined(__aarch64__)
TEST_CASE("frame-pointer walk recovers the caller of a function in its prologue from the link register") {
  FakeStack s;
  s.frame(20, 0, 0x2222);  // the caller's caller, as x29 still says
  std::array<std::uint64_t, 8> out{};
  // Instructions at which the record is not linked yet (or any more): x30 holds the caller.
  alignas(4) static const std::uint32_t kInsns[] = {0xa9bf7bfd /* stp x29, x30, [sp, #-16]! */,
                                                    0x910003fd /* mov x29, sp */, 0xd65f03c0 /* ret */};
  for (const std::uint32_t& insn : kInsns) {
    CAPTURE(insn);
    REQUIRE(unwind_frame_pointer({reinterpret_cast<std::uint64_t>(&insn), s.at(10), s.at(20), 0xaaaa}, s.bounds(),
                                 out) == 3);
    CHECK(out[1] == 0xaaaa);
    CHECK(out[2] == 0x2222);
  }
  // Inside a function body x30 may be stale: without a code map it is not taken.
  alignas(4) static const std::uint32_t kBody = 0xd503201f;  // nop
  CHECK(unwind_frame_pointer({reinterpret_cast<std::uint64_t>(&kBody), s.at(10), s.at(20), 0xaaaa}, s.bounds(),
                             out) == 2);
  CHECK(out[1] == 0x2222);
}
#else
TEST_CASE("frame-pointer walk recovers the caller of a function in its prologue") {
  FakeStack s;
  s.frame(20, 0, 0x2222);  // the caller's caller, as rbp still says
  std::array<std::uint64_t, 8> out{};
  SUBCASE("at push %rbp: the return address is at [sp]") {
    s.words[10] = 0xaaaa;
    REQUIRE(unwind_frame_pointer({code(kPush), s.at(10), s.at(20)}, s.bounds(), out) == 3);
    CHECK(out[1] == 0xaaaa);
    CHECK(out[2] == 0x2222);
  }
  SUBCASE("at mov %rsp,%rbp: rbp was just pushed, the return address is at [sp+8]") {
    s.words[10] = s.at(20);
    s.words[11] = 0xbbbb;
    REQUIRE(unwind_frame_pointer({code(kMovRspRbp), s.at(10), s.at(20)}, s.bounds(), out) == 3);
    CHECK(out[1] == 0xbbbb);
    CHECK(out[2] == 0x2222);
  }
}
#endif

TEST_CASE("stack bounds and the code map describe this process") {
  int local = 0;
  StackBounds stack = StackBounds::of_this_thread();
  CHECK(stack.contains(reinterpret_cast<std::uintptr_t>(&local), sizeof local));
  CHECK_FALSE(stack.contains(reinterpret_cast<std::uintptr_t>(&g_not_on_stack), 1));
  const CodeMap* map = CodeMap::refresh();
  REQUIRE(map != nullptr);
  CHECK(map == CodeMap::current());
  CHECK(map == CodeMap::refresh());  // nothing loaded since: the same snapshot
  CHECK(map->contains(reinterpret_cast<std::uint64_t>(&CodeMap::refresh)));
  CHECK_FALSE(map->contains(reinterpret_cast<std::uint64_t>(&local)));
  CHECK_FALSE(map->is_return_address(reinterpret_cast<std::uint64_t>(&local)));
}

TEST_CASE("the code map answers exactly what the loader's executable segments say") {
  struct Range {
    std::uint64_t begin, end;
  };
  std::vector<Range> reference;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            static_cast<std::vector<Range>*>(data)->push_back(
                {info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz});
        }
        return 0;
      },
      &reference);
  REQUIRE(reference.size() >= 2);
  const CodeMap* map = CodeMap::refresh();
  auto expected = [&](std::uint64_t a) {
    return std::any_of(reference.begin(), reference.end(), [a](const Range& r) { return a >= r.begin && a < r.end; });
  };
  std::vector<std::uint64_t> probes{0, 1, ~std::uint64_t{0}};
  for (const Range& r : reference)
    for (std::uint64_t a : {r.begin - 1, r.begin, r.begin + 1, (r.begin + r.end) / 2, r.end - 1, r.end, r.end + 1})
      probes.push_back(a);
  std::uint64_t x = 12345;
  for (int i = 0; i < 20000; ++i) {  // random addresses around and between the segments
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const Range& r = reference[(x >> 20) % reference.size()];
    probes.push_back(r.begin + (x >> 33) % ((r.end - r.begin) * 3) - (r.end - r.begin));
  }
  for (std::uint64_t a : probes) {
    INFO("address 0x" << std::hex << a);
    REQUIRE(map->contains(a) == expected(a));
    if (!expected(a)) REQUIRE_FALSE(map->is_return_address(a));
  }
}

// ---- real contexts: outer → middle → inner, which signals itself ----

namespace {

struct Captured {
  std::array<std::uint64_t, 64> fp{}, fast{}, cursor{};
  std::size_t fp_n = 0, fast_n = 0, cursor_n = 0;
  StackBounds stack;
  const CodeMap* code = nullptr;
};
Captured g_captured;

void capture(int, siginfo_t*, void* context) {
  const auto& uc = *static_cast<const ucontext_t*>(context);
  RegisterState regs = RegisterState::from(uc);
  g_captured.fp_n = unwind_frame_pointer(regs, g_captured.stack, g_captured.fp, g_captured.code);
  g_captured.fast_n = unwind_libunwind(regs, g_captured.fast);
  g_captured.cursor_n = unwind_libunwind_cursor(uc, g_captured.cursor);
}

}  // namespace

extern "C" [[gnu::noipa, gnu::noinline, gnu::used, gnu::section("text_unwind_inner")]] std::uint64_t unwind_inner(std::uint64_t n) {
  pthread_kill(pthread_self(), SIGUSR2);
  return n + 1;
}
extern "C" char __start_text_unwind_inner[], __stop_text_unwind_inner[];
SELFPERF_TEST_CALLER(unwind_middle, unwind_inner)
SELFPERF_TEST_CALLER(unwind_outer, unwind_middle)

namespace {

bool has(std::span<const std::uint64_t> frames, const CodeRange& r) {
  for (std::uint64_t f : frames)
    if (r.contains(f)) return true;
  return false;
}

}  // namespace

TEST_CASE("every unwinder finds the callers above a signal's interrupted context") {
  struct sigaction sa {}, old{};
  sa.sa_sigaction = capture;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGUSR2, &sa, &old) == 0);
  g_captured.stack = StackBounds::of_this_thread();
  g_captured.code = CodeMap::refresh();
  prepare_libunwind_this_thread();
  unwind_outer(1);
  sigaction(SIGUSR2, &old, nullptr);
  const CodeRange inner{"inner", reinterpret_cast<std::uintptr_t>(__start_text_unwind_inner),
                        reinterpret_cast<std::uintptr_t>(__stop_text_unwind_inner)};
  auto fp = std::span<const std::uint64_t>(g_captured.fp).first(g_captured.fp_n);
  auto fast = std::span<const std::uint64_t>(g_captured.fast).first(g_captured.fast_n);
  auto cursor = std::span<const std::uint64_t>(g_captured.cursor).first(g_captured.cursor_n);
  for (const auto& entry : {std::pair{"frame_pointer", fp}, {"libunwind", fast}, {"cursor", cursor}}) {
    // Named copies, not structured bindings: doctest's INFO captures them in a lambda, which Clang 14 refuses.
    const char* name = entry.first;
    const std::span<const std::uint64_t> frames = entry.second;
    INFO(name << ": " << frames.size() << " frames");
    // The signal interrupts glibc's pthread_kill, built without frame pointers: the rbp chain resumes at
    // inner's frame, whose return address is middle. CFI unwinding sees inner itself.
    // Under TSan the context is one TSan saved inside its pthread_kill interceptor (no frame pointers).
    if (std::string_view(name) == "frame_pointer" && selfperf_test::kTsan) continue;
    if (std::string_view(name) != "frame_pointer") CHECK(has(frames, inner));
    CHECK(has(frames, unwind_middle_range()));
    CHECK(has(frames, unwind_outer_range()));
  }
  // The fast path and the cursor loop agree frame for frame on the part they both see.
  REQUIRE(fast.size() >= 4);
  REQUIRE(cursor.size() >= 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(fast[i] == cursor[i]);
}
