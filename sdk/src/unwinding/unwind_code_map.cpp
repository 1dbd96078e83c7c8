// Snapshots of the executable segments: lets the frame-pointer walk test "is this a return address"
// without reading memory it cannot prove is mapped.
#include <link.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "sampling/fork_guard.hpp"
#include "unwinding/code_map_lock.hpp"
#include "unwinding/dwarf_cfi.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf {

namespace {

std::mutex g_refresh_mutex;
std::atomic<const CodeMap*> g_current{nullptr};
// Every snapshot ever published: a handler may still read an old one, so none is freed.
std::vector<std::unique_ptr<CodeMap>>& all_snapshots() {
  static auto* snapshots = new std::vector<std::unique_ptr<CodeMap>>;
  return *snapshots;
}

}  // namespace

namespace detail {
void code_map_waits_for_fork() { fork_waits_for(g_refresh_mutex, ForkLockRank::leaf); }
}  // namespace detail

const CodeMap* CodeMap::current() noexcept { return g_current.load(std::memory_order_acquire); }

const CodeMap* CodeMap::refresh() {
  std::lock_guard lock(g_refresh_mutex);
  const CodeMap* old = g_current.load(std::memory_order_acquire);
  // glibc counts loads and unloads in dlpi_adds/dlpi_subs: unchanged sums mean an unchanged set of objects.
  unsigned long long generation = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t size, void* data) {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
          *static_cast<unsigned long long*>(data) = info->dlpi_adds * 1'000'003ull + info->dlpi_subs;
        return 1;
      },
      &generation);
  if (old && generation != 0 && old->generation_ == generation) return old;
  auto map = std::make_unique<CodeMap>();
  map->generation_ = generation;
  struct Entry {
    Segment segment;
    EhFrameSection eh_frame;
  };
  std::vector<Entry> entries;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& out = *static_cast<std::vector<Entry>*>(data);
        EhFrameSection eh{};
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME) eh.hdr = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        // The loaded segment around .eh_frame_hdr bounds every read of the tables (.eh_frame sits beside it).
        for (int i = 0; eh.hdr != 0 && i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const std::uint64_t begin = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_R) && begin <= eh.hdr && eh.hdr < begin + ph.p_filesz) {
            eh.begin = begin;
            eh.end = begin + ph.p_filesz;
          }
        }
        if (eh.begin == 0) eh = EhFrameSection{};
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          std::uint64_t begin = info->dlpi_addr + ph.p_vaddr;
          out.push_back(Entry{{begin, begin + ph.p_memsz}, eh});
        }
        return 0;
      },
      &entries);
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.segment.begin < b.segment.begin; });
  if (entries.size() > kMaxSegments) entries.resize(kMaxSegments);
  for (const Entry& e : entries) {
    map->segments_[map->count_] = e.segment;
    map->eh_frames_[map->count_++] = e.eh_frame;
  }
  if (map->count_ > 0) {
    map->lowest_ = map->segments_[0].begin;
    for (std::size_t i = 0; i < map->count_; ++i) map->highest_ = std::max(map->highest_, map->segments_[i].end);
  }
  // Rules cached for the old set of objects may describe code that is gone.
  if (old != nullptr) detail::cfi_cache::clear();
  const CodeMap* published = map.get();
  all_snapshots().push_back(std::move(map));
  g_current.store(published, std::memory_order_release);
  return published;
}

// Called from signal handlers with whatever the stack holds: a binary search whose steps are conditional
// moves, not branches the predictor would miss on every new value.
const CodeMap::Segment* CodeMap::find(std::uint64_t addr) const noexcept {
  if (count_ == 0) return nullptr;
  const Segment* base = segments_;
  for (std::size_t n = count_; n > 1; n -= n / 2) base = base[n / 2].begin <= addr ? base + n / 2 : base;
  return base->begin <= addr && addr < base->end ? base : nullptr;
}

EhFrameSection CodeMap::eh_frame_of(std::uint64_t addr) const noexcept {
  const Segment* s = find(addr);
  return s == nullptr ? EhFrameSection{} : eh_frames_[s - segments_];
}

bool CodeMap::contains(std::uint64_t addr) const noexcept { return find(addr) != nullptr; }

bool CodeMap::follows_call(std::uint64_t addr) const noexcept {
  const Segment* s = find(addr);
#if defined(__aarch64__)
  // Fixed 4-byte instructions: the one before addr is the call.
  if (s == nullptr || addr < s->begin + 4 || (addr & 3u) != 0) return false;
  const std::uint32_t insn = reinterpret_cast<const std::uint32_t*>(addr)[-1];
  if ((insn & 0xfc000000) == 0x94000000) return true;  // bl imm26
  if ((insn & 0xfffffc1f) == 0xd63f0000) return true;  // blr xn
  if ((insn & 0xfefff800) == 0xd63f0800) return true;  // blraa/blrab/blraaz/blrabz (pointer authentication)
  return false;
#else
  if (s == nullptr || addr < s->begin + 7) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(addr);
  if (p[-5] == 0xe8) return true;                                       // call rel32
  if (p[-2] == 0xff && (p[-1] & 0x38) == 0x10) return true;             // call *%reg / *(%reg)
  if (p[-3] == 0xff && (p[-2] & 0x38) == 0x10) return true;             // call *disp8(%reg)
  if (p[-6] == 0xff && (p[-5] & 0x38) == 0x10) return true;             // call *disp32(%rip / %reg)
  if (p[-7] == 0xff && (p[-6] & 0x38) == 0x10) return true;             // call *disp32(%reg,%reg,s)
  return false;
#endif
}

}  // namespace selfperf
