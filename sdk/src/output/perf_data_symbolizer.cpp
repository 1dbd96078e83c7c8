// PerfDataSymbolizer: one libdwfl session per process of the file, each executable mapping reported at the
// bias its MMAP record implies (start - pgoff + p_offset - p_vaddr of the PT_LOAD segment it maps).
#include "selfperf/perf_data_symbolizer.hpp"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <optional>
#include <set>

#include <elfutils/libdwfl.h>

#include "output/debuginfo_lookup.hpp"
#include "output/unknown_frame.hpp"
#include "selfperf/error.hpp"
#include "selfperf/record.hpp"
#include "selfperf/symbolizer.hpp"
#include "unwinding/elf_load_bias.hpp"

namespace selfperf {
namespace {

char* debuginfo_path = nullptr;

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = detail::find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &debuginfo_path,
};

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_kernel_address(std::uint64_t a) { return a >= 0xffff800000000000ULL; }

}  // namespace

// One process image: its executable mappings, its name, and the libdwfl session built from them on demand.
struct PerfDataSymbolizer::Image {
  std::vector<Mmap2Info> maps;
  std::string comm;
  Dwfl* dwfl = nullptr;
  bool dwfl_built = false;
  std::map<std::uint64_t, std::string> cache;

  Image() = default;
  Image(const Image& other) : maps(other.maps), comm(other.comm) {}  // a fork's copy builds its own session
  ~Image() { detail::end_session(dwfl); }
  void changed() {
    detail::end_session(dwfl);
    dwfl = nullptr;
    dwfl_built = false;
    cache.clear();
  }
  Dwfl* session() {
    if (dwfl_built) return dwfl;
    dwfl_built = true;
    dwfl = dwfl_begin(&kOfflineCallbacks);
    if (!dwfl) return nullptr;
    dwfl_report_begin(dwfl);
    // Newest first: a mapping hides an older one it overlaps (the address was unmapped and reused). A file
    // mapped at two places is two modules (an exec whose old image was not dropped, a library dlopen'd again):
    // reported once by name, the later place's addresses had no module.
    std::set<std::pair<std::string, std::uint64_t>> reported;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;
    for (auto m = maps.rbegin(); m != maps.rend(); ++m) {
      if (m->filename[0] != '/') continue;  // [vdso] and the like
      const std::uint64_t end = m->start + m->len;
      if (std::any_of(taken.begin(), taken.end(), [&](const auto& r) { return m->start < r.second && r.first < end; }))
        continue;
      taken.emplace_back(m->start, end);
      const auto bias = detail::elf_load_bias(m->filename, m->start, m->pgoff);
      if (bias && reported.emplace(m->filename, *bias).second)
        dwfl_report_elf(dwfl, basename_of(m->filename).c_str(), m->filename.c_str(), -1, *bias, false);
    }
    dwfl_report_end(dwfl, nullptr, nullptr);
    return dwfl;
  }
};

PerfDataSymbolizer::PerfDataSymbolizer() = default;
PerfDataSymbolizer::~PerfDataSymbolizer() = default;

PerfDataSymbolizer::Image& PerfDataSymbolizer::writable(std::uint32_t pid) {
  auto& slot = images_[pid];
  if (!slot)
    slot = std::make_shared<Image>();
  else if (slot.use_count() > 1)
    slot = std::make_shared<Image>(*slot);  // shared with a parent or child since a fork: copy on write
  return *slot;
}

void PerfDataSymbolizer::observe(const PerfDataReader& reader, const PerfRecord& rec) {
  if (rec.type == PERF_RECORD_MMAP || rec.type == PERF_RECORD_MMAP2) {
    Mmap2Info m = reader.decode_mmap(rec);
    // MMAP records (perf without MMAP2) carry no prot: data mappings are marked MISC_MMAP_DATA instead.
    bool exec = rec.type == PERF_RECORD_MMAP ? !(rec.misc & PERF_RECORD_MISC_MMAP_DATA) : (m.prot & 4) != 0;
    if (!exec || m.filename.empty()) return;
    Image& image = writable(static_cast<std::uint32_t>(m.pid));
    image.maps.push_back(std::move(m));
    image.changed();
  } else if (rec.type == PERF_RECORD_COMM) {
    auto c = reader.decode_comm(rec);
    if (c.pid != c.tid) return;  // a thread's name, not the process's
    Image& image = writable(c.pid);
    if (rec.misc & PERF_RECORD_MISC_COMM_EXEC) {
      image.maps.clear();  // the old image is gone; MMAP records of the new one follow
      image.changed();
    }
    image.comm = c.comm;
  } else if (rec.type == PERF_RECORD_FORK && rec.bytes.size() >= 8 + 16) {
    std::uint32_t ids[4];  // pid, ppid, tid, ptid
    std::memcpy(ids, rec.bytes.data() + 8, sizeof ids);
    if (ids[0] == ids[1]) return;  // a new thread shares its process's image
    auto parent = images_.find(ids[1]);
    if (parent != images_.end()) images_[ids[0]] = parent->second;
  }
}

std::string PerfDataSymbolizer::name(std::uint32_t pid, std::uint64_t address, bool return_address) {
  if (is_kernel_address(address)) return "[kernel]";
  const std::uint64_t pc = return_address && address > 0 ? address - 1 : address;
  auto it = images_.find(pid);
  if (it == images_.end()) return "[unknown]";
  Image& image = *it->second;
  if (auto hit = image.cache.find(pc); hit != image.cache.end()) return hit->second;
  std::string result;
  Dwfl_Module* mod = nullptr;
  if (Dwfl* dwfl = image.session())
    if ((mod = dwfl_addrmodule(dwfl, pc)) != nullptr)
      if (const char* sym = dwfl_module_addrname(mod, pc)) result = detail::frame_symbol_name(sym);
  if (result.empty()) {
    // Named as Symbolizer names it in the profile itself (unknown_frame.cpp): one name per function.
    std::string module;
    for (const auto& m : image.maps)
      if (pc >= m.start && pc < m.start + m.len) module = m.filename;
    result = detail::unknown_frame_name(module, module.empty() ? std::nullopt : detail::fde_start(mod, pc));
  }
  image.cache.emplace(pc, result);
  return result;
}

std::string PerfDataSymbolizer::comm(std::uint32_t pid) const {
  auto it = images_.find(pid);
  return it == images_.end() || it->second->comm.empty() ? "pid " + std::to_string(pid) : it->second->comm;
}

void for_each_record_in_time_order(PerfDataReader& reader, const std::function<void(const PerfRecord&)>& fn) {
  struct Item {
    std::uint64_t time;
    PerfRecord record;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<Item> items;
  reader.rewind();
  PerfRecord rec;
  std::uint64_t last_time = 0;
  while (reader.next_record(rec)) {
    std::uint64_t time = 0;
    try {
      time = rec.type == PERF_RECORD_SAMPLE ? reader.decode_sample(rec).time : reader.decode_sample_id(rec).time;
    } catch (const Error&) {
      time = 0;
    }
    if (time == 0) time = last_time;  // no time (perf's synthesized records, no sample_id_all): keep its place
    last_time = time;
    items.push_back({time, rec, std::vector<std::uint8_t>(rec.bytes.begin(), rec.bytes.end())});
  }
  reader.rewind();
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.time < b.time; });
  for (auto& item : items) {
    item.record.bytes = item.bytes;
    fn(item.record);
  }
}

StackCounts perf_data_stacks(PerfDataReader& reader, const PerfDataStackOptions& options) {
  StackCounts stacks;
  PerfDataSymbolizer symbolizer;
  std::vector<std::string> names;
  for_each_record_in_time_order(reader, [&](const PerfRecord& rec) {
    if (rec.type != PERF_RECORD_SAMPLE) {
      symbolizer.observe(reader, rec);
      return;
    }
    DecodedSample s = reader.decode_sample(rec);
    std::vector<std::uint64_t> frames = s.frames();
    if (frames.empty() && s.ip != 0) frames.push_back(s.ip);
    if (options.max_depth && frames.size() > options.max_depth) frames.resize(options.max_depth);
    names.clear();
    for (std::size_t i = 0; i < frames.size(); ++i) names.push_back(symbolizer.name(s.pid, frames[i], i > 0));
    if (options.comm_root) names.push_back(symbolizer.comm(s.pid));
    if (!names.empty()) stacks.add_leaf_first(names);
  });
  return stacks;
}

}  // namespace selfperf
